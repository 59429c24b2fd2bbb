"""``laneway status``: one status page for a whole group, served on loopback."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from types import FrameType

import click

from laneway.observability.bounded_http import BoundedServer
from laneway.observability.http_request import Request
from laneway.ops.connection import (
    EXIT_CODES_HELP,
    OpsError,
    connection_options,
    finish,
    resolve_settings,
)
from laneway.ops.group_status import GroupStatus, Members, member_url
from laneway.ops.lag import group_and_topics
from laneway.service import exits
from laneway.status.page import send_document, send_page

SUMMARY = (
    "Serve one status page for a whole group (on loopback): Kafka's view of every partition, "
    "as laneway lag reads it, joined with each member's /status.json."
)

HELP = f"""{SUMMARY}

\b
Members are the health addresses of laneway run (--health-port): give each with --member
(127.0.0.1:8080 means http://127.0.0.1:8080/status.json), or --member-service NAME:PORT
for a Kubernetes headless service, whose name resolves to one address per ready pod
(looked up again at every sample). A member that does not answer is shown as such.

The page (GET /status, also /) reads GET /status.json every second; the group is sampled
every --interval seconds (its committed offsets and log ends: a handful of requests to
the cluster; an embedded --log-dir is opened only while it is read, and while a consumer
has it open the partitions are those its members report). --json prints one document
and exits. Message keys the members show (laneway run --health-show-keys) are left out
unless --show-keys. Read only: GET, nothing is paused, committed or written.

{EXIT_CODES_HELP}
"""


@click.command("status", help=HELP)
@click.option("--group", metavar="NAME", help="The consumer group [env LANEWAY_GROUP].")
@click.option("--topic", "topics", multiple=True, metavar="NAME", help="Only this topic (repeat).")
@click.option(
    "--member",
    "member_urls",
    multiple=True,
    metavar="URL",
    help="A member's health address, e.g. 127.0.0.1:8080; repeat per member.",
)
@click.option(
    "--member-service",
    "services",
    multiple=True,
    metavar="NAME:PORT",
    help="A name that resolves to every member (a Kubernetes headless service) and their "
    "health port.",
)
@click.option(
    "--address",
    default="127.0.0.1",
    show_default=True,
    help="Address the page listens on (0.0.0.0 for every interface: think twice).",
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8089, show_default=True, help="0: any free."
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2, max=2.0),
    default=2.0,
    show_default=True,
    help="Seconds between two samples of the group and its members.",
)
@click.option("--show-keys", is_flag=True, help="Show the message keys members show.")
@click.option("--json", "as_json", is_flag=True, help="Print one document and exit.")
@connection_options
def status(
    group: str | None,
    topics: tuple[str, ...],
    member_urls: tuple[str, ...],
    services: tuple[str, ...],
    address: str,
    port: int,
    interval: float,
    show_keys: bool,
    as_json: bool,
    bootstrap_servers: str | None,
    log_dir: str | None,
    config_file: Path | None,
) -> None:
    flags: dict[str, object] = {
        "group": group,
        "topics": topics,
        "bootstrap_servers": bootstrap_servers,
        "log_dir": log_dir,
    }
    members = Members([member_url(url) for url in member_urls], services)

    def body() -> int:
        settings = resolve_settings(flags, config_file)
        target = settings.target()
        name, wanted = group_and_topics(settings)
        watched = GroupStatus(target, name, wanted, members, show_keys=show_keys, interval=interval)
        if as_json:
            return _print_once(watched)
        return _serve(watched, address, port)

    finish("status", body)


def _print_once(watched: GroupStatus) -> int:
    """Two samples ``interval`` apart (rates need two), printed as one document."""
    try:
        watched.sample()
        time.sleep(watched.interval)
        click.echo(json.dumps(watched.sample()))
    finally:
        watched.stop()
    return exits.OK


def _serve(watched: GroupStatus, address: str, port: int) -> int:
    def answer(request: Request) -> None:
        path = request.path.split("?", 1)[0]
        if path in ("/", "/status"):
            send_page(request)
        elif path == "/status.json":
            send_document(request, watched.document())
        else:
            body = json.dumps({"error": f"unknown path {path}; try /status"}).encode()
            request.reply(404, "application/json", body)

    try:
        server = BoundedServer((address, port), answer, name="laneway-status")
    except OSError as error:
        raise OpsError(
            f"--port {port} on --address {address} cannot be used: {error.strerror or error}",
            exits.USAGE,
        ) from None
    watched.start()
    host = f"[{address}]" if ":" in address else address
    click.echo(f"group status page on http://{host}:{server.port}/status (Ctrl-C ends it)")
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.server_close()
        watched.stop()
    return exits.OK


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
