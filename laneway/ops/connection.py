"""What the ops commands share: where the log is, how to reach it, and how they end.

The connection comes from the same places as ``laneway run``'s (see
:func:`laneway.service.settings.resolve`): ``--bootstrap-servers`` or ``--log-dir``, else
``LANEWAY_BOOTSTRAP_SERVERS`` / ``LANEWAY_LOG_DIR``, else the ``--config`` TOML file;
librdkafka settings from its ``[kafka]`` table (and wherever ``laneway run`` reads them).
The ops commands' Kafka clients take the connection part of those settings
(``security.*``, ``sasl.*``, ``ssl.*``, ``client.*``, ``socket.*``), as laneway's own
producers do; consumer tuning in the table is not theirs.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from laneway.errors import (
    AccessDeniedError,
    ConfigError,
    LanewayError,
    SourceError,
    UnknownTopicError,
)
from laneway.service import exits
from laneway.service.settings import resolve

EXIT_CODES_HELP = (
    f"Exit codes: {exits.OK} done; {exits.FAILED} unexpected error; {exits.USAGE} bad "
    f"arguments or settings; {exits.SOURCE} the cluster or log cannot be reached, or the "
    f"group or topic does not exist; {exits.DENIED} authentication or authorization refused."
)
"""The exit codes every ops command documents in its ``--help``."""


class OpsError(LanewayError):
    """A failure an ops command reports in one line, ending with exit ``code``."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Target:
    """The log an ops command works on: a Kafka cluster (``bootstrap_servers`` and the
    librdkafka ``kafka`` settings) or a durable embedded log (``log_dir``), and the
    effective settings they were resolved from (for a default group or topics)."""

    bootstrap_servers: str | None
    log_dir: Path | None
    connect_timeout: float
    kafka: Mapping[str, object] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """The log as a user names it, for messages."""
        return str(self.log_dir) if self.log_dir is not None else str(self.bootstrap_servers)


def resolve_target(flags: Mapping[str, object], config_file: Path | None) -> Target:
    """The target of ``flags`` (given ones only: ``bootstrap_servers``, ``log_dir`` and
    any other ``laneway run`` setting a command takes), with ``LANEWAY_*`` variables and
    the TOML file below them. Exactly one of Kafka or an embedded log must result."""
    given = {name: value for name, value in flags.items() if value not in (None, ())}
    resolved = resolve(given, os.environ, config_file)
    servers, log_dir = resolved["bootstrap_servers"], resolved["log_dir"]
    if servers and log_dir:
        raise OpsError(
            f"both --bootstrap-servers ({servers}) and --log-dir ({log_dir}) are set "
            "(by flags, LANEWAY_* variables or --config); give one",
            exits.USAGE,
        )
    if not servers and not log_dir:
        raise OpsError(
            "no log to read: give --bootstrap-servers HOST:PORT (Kafka) or --log-dir DIR "
            "(a durable embedded log), or LANEWAY_BOOTSTRAP_SERVERS, or --config FILE",
            exits.USAGE,
        )
    return Target(
        bootstrap_servers=servers,
        log_dir=None if log_dir is None else Path(log_dir),
        connect_timeout=float(resolved["connect_timeout"]),
        kafka=dict(resolved.kafka),
        settings=dict(resolved.values),
    )


F = TypeVar("F", bound=Callable[..., Any])


def connection_options(*, log_dir: bool = True) -> Callable[[F], F]:
    """The options every ops command takes: ``--bootstrap-servers``, ``--config`` and
    (unless ``log_dir=False``) ``--log-dir``."""

    def decorate(command: F) -> F:
        command = click.option(
            "--config",
            "config_file",
            type=click.Path(dir_okay=False, path_type=Path),
            help="A TOML file of settings, as for laneway run (librdkafka settings in its "
            "[kafka] table).",
        )(command)
        if log_dir:
            command = click.option(
                "--log-dir",
                metavar="DIR",
                help="A durable embedded log directory instead of Kafka (not while another "
                "process has it open) [env LANEWAY_LOG_DIR].",
            )(command)
        return click.option(
            "--bootstrap-servers",
            metavar="HOST:PORT[,...]",
            help="The Kafka cluster [env LANEWAY_BOOTSTRAP_SERVERS].",
        )(command)

    return decorate


def finish(name: str, body: Callable[[], int]) -> NoReturn:
    """Run a command's ``body`` and exit with its code, or report its error in one line
    (``laneway NAME: error: ...``) and exit with the error's code."""
    try:
        code = body()
    except OpsError as error:
        code = _report(name, error, error.code)
    except ConfigError as error:
        code = _report(name, error, exits.USAGE)
    except AccessDeniedError as error:
        code = _report(name, error, exits.DENIED)
    except (SourceError, UnknownTopicError) as error:
        code = _report(name, error, exits.SOURCE)
    except LanewayError as error:
        code = _report(name, error, exits.FAILED)
    sys.exit(code)


def _report(name: str, error: LanewayError, code: int) -> int:
    click.echo(f"laneway {name}: error: {error}", err=True)
    return code


READ_GROUP_PREFIX = "laneway-dlq-read-"


def read_group() -> str:
    """A fresh group name for a read that commits nothing (``dlq list`` and ``show``)."""
    return f"{READ_GROUP_PREFIX}{uuid.uuid4().hex[:12]}"
