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

import logging
import os
import sys
from collections.abc import Callable, Mapping
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
from laneway.logs import get_logger
from laneway.printable import PrintableFormatter, printable
from laneway.service import exits
from laneway.service.settings import Resolved, resolve

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


def resolve_settings(flags: Mapping[str, object], config_file: Path | None) -> Resolved:
    """The settings of ``flags`` (given ones only: ``bootstrap_servers``, ``log_dir`` and
    any other ``laneway run`` setting a command takes), with ``LANEWAY_*`` variables and
    the TOML file below them; :meth:`~laneway.service.settings.Resolved.target` is the log
    they name."""
    given = {name: value for name, value in flags.items() if value not in (None, ())}
    return resolve(given, os.environ, config_file)


F = TypeVar("F", bound=Callable[..., Any])


def connection_options(command: F) -> F:
    """The options every ops command takes: ``--bootstrap-servers``, ``--log-dir`` and
    ``--config``."""
    command = click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False, path_type=Path),
        help="A TOML file of settings, as for laneway run (librdkafka settings in its "
        "[kafka] table).",
    )(command)
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


class _CommandLines(PrintableFormatter):
    def __init__(self, name: str) -> None:
        super().__init__(f"laneway {name}: %(levelname)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        shown = logging.makeLogRecord(record.__dict__)
        shown.levelname = record.levelname.lower()
        return super().format(shown)


LIBRDKAFKA_LINES, CLIENT_ERRORS = "laneway.librdkafka", "laneway.kafka"
"""The loggers of librdkafka's own lines and of the clients' errors (see
:mod:`laneway.sources.kafka.client_logs`)."""


def _quiet_clients(record: logging.LogRecord) -> bool:
    if record.name.startswith(LIBRDKAFKA_LINES):
        return False
    if record.name.startswith(CLIENT_ERRORS):
        return record.levelno >= logging.ERROR  # a fatal client error
    return True


def command_logging(name: str) -> None:
    """laneway's log lines on stderr as ``laneway NAME: warning: ...``, nothing below
    WARNING, and not librdkafka's own lines nor the clients' passing errors (a broker not
    answering yet, a group coordinator still loading): the client retries them, and if
    one lasts the command ends with its one-line error naming it."""
    logger = get_logger("laneway")
    if any(isinstance(h.formatter, _CommandLines) for h in logger.handlers):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(_CommandLines(name))
    handler.setLevel(logging.WARNING)
    handler.addFilter(_quiet_clients)
    logger.addHandler(handler)


def finish(name: str, body: Callable[[], int]) -> NoReturn:
    """Run a command's ``body`` and exit with its code, or report its error in one line
    (``laneway NAME: error: ...``, :func:`~laneway.printable.printable`: it may name what
    the log, the group or a broker said) and exit with the error's code; what the command
    logs meanwhile is written as :func:`command_logging` says."""
    command_logging(name)
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
    click.echo(f"laneway {name}: error: {printable(str(error))}", err=True)
    return code
