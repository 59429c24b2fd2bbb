"""The ``laneway run`` click command; its options are derived from the settings lists."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from laneway.config import env_variable
from laneway.consumer import Consumer
from laneway.errors import (
    AccessDeniedError,
    ConfigError,
    LanewayError,
    SourceError,
    UnknownTopicError,
)
from laneway.logs import get_logger, show_keys
from laneway.printable import printable
from laneway.service import exits
from laneway.service.handler_ref import load_handler
from laneway.service.logs import configure, scrubbed, start_failed, started
from laneway.service.member import consumer_options, open_source, run_member
from laneway.service.settings import MEMBER_VARIABLE, Resolved, all_specs, resolve
from laneway.service.supervisor import Supervisor, member_command

log = get_logger("laneway.service")

HELP = f"""Run HANDLER (MODULE:ATTR, imported like uvicorn's app) on every message of a Kafka
consumer group (--share: a share group) or a durable embedded log, until SIGTERM/SIGINT
(drain, commit, exit 0).

\b
Every setting is a flag, a LANEWAY_<NAME> environment variable (e.g.
LANEWAY_CONCURRENCY=64) or a key of the --config TOML file (librdkafka settings go in
its [kafka] table); a flag wins over the variable, which wins over the file, which wins
over the default. --print-config shows each effective value and where it came from.

\b
Exit codes: {exits.OK} clean stop; {exits.FAILED} unexpected error; {exits.USAGE} bad settings
or handler, or a state changelog that ends before what a state file holds; {exits.SOURCE}
broker unreachable or unknown topic; {exits.STALLED} on_stall=exit after a stall;
{exits.CRASH_LOOP} a member of --members kept crashing; {exits.DENIED} the cluster refused
(authentication failed or an ACL is missing); {exits.ABANDONED} stopped, but the drain
timed out (unfinished messages' offsets stay uncommitted).
"""


def _options() -> list[click.Parameter]:
    params: list[click.Parameter] = [click.Argument(["handler"], required=False)]
    for name, (default, spec) in all_specs().items():
        if name == "handler":
            continue
        shown = spec.shown_default or _shown(default)
        what = f"{spec.help}: {' | '.join(spec.choices)}" if spec.choices else spec.help
        text = f"{what} [default: {shown}; env {env_variable(name)}]"
        dashed = name.replace("_", "-")
        if name == "topics":
            params.append(click.Option(["--topic", name], multiple=True, metavar="NAME", help=text))
        elif spec.kind == "bool":
            params.append(
                click.Option([f"--{dashed}/--no-{dashed}", name], default=None, help=text)
            )
        else:
            metavar = {"int": "N", "number": "NUMBER", "seconds": "SECONDS"}.get(spec.kind, "TEXT")
            params.append(click.Option([f"--{dashed}", name], metavar=metavar, help=text))
    params.append(
        click.Option(
            ["--config", "config_file"],
            type=click.Path(dir_okay=False, path_type=Path),
            help="A TOML file of settings (consumer options at top level, librdkafka "
            "settings in [kafka]).",
        )
    )
    params.append(
        click.Option(
            ["--print-config"],
            is_flag=True,
            help="Print every effective setting and where it came from (secrets redacted); "
            "do not run.",
        )
    )
    return params


def _shown(default: object) -> str:
    if default in (None, ()):
        return "none"
    return str(getattr(default, "value", default))


def _run(config_file: Path | None, print_config: bool, **given: Any) -> None:
    flags = {name: value for name, value in given.items() if value not in (None, ())}
    sys.exit(_main(flags, config_file, print_config))


def _main(flags: dict[str, Any], config_file: Path | None, print_config: bool) -> int:
    member_index = os.environ.get(MEMBER_VARIABLE)
    member = None if member_index is None else int(member_index)
    try:
        settings = resolve(flags, os.environ, config_file)
        if print_config:
            for name, value, origin in settings.describe():
                click.echo(f"{name:<22} {value:<40} ({origin})")
            return exits.OK
        configure(settings["log_level"], settings["log_format"], member, settings.client.secrets())
        show_keys(settings["health_show_keys"])
        if not settings["handler"]:
            raise ConfigError("no handler: laneway run MODULE:ATTR, e.g. myapp.handlers:handle")
        if member is None and settings["members"] > 1:
            _check(settings)
            started()
            return Supervisor(member_command(sys.argv[1:]), settings["members"]).run()
        return run_member(settings, member)
    except ConfigError as error:
        return _fail(error, exits.USAGE)
    except AccessDeniedError as error:
        return _fail(error, exits.DENIED)
    except (SourceError, UnknownTopicError) as error:
        return _fail(error, exits.SOURCE)
    except LanewayError as error:
        return _fail(error, exits.FAILED)


def _check(settings: Resolved) -> None:
    """What can fail before any member starts: the handler, the options, the source's
    settings (not its reachability: each member checks that when it opens)."""
    handler = load_handler(settings["handler"])
    with open_source(settings, member=0) as source:
        Consumer(source, handler, **consumer_options(settings))


def _fail(error: LanewayError, code: int) -> int:
    start_failed()
    click.echo(f"laneway run: error: {printable(scrubbed(str(error)))}", err=True)
    return code


run = click.Command("run", params=_options(), callback=_run, help=HELP, no_args_is_help=False)
"""``laneway run``: add it to the CLI with ``main.add_command(run)``."""
