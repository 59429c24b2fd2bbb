"""One consumer process of ``laneway run``: source, handler and consumer from the settings,
health probes, and a run until SIGTERM/SIGINT."""

from __future__ import annotations

import os
import threading
import time
from contextlib import AbstractContextManager
from typing import Any

from laneway.consumer import Consumer
from laneway.errors import ConfigError, LanewayError
from laneway.logs import get_logger
from laneway.metrics import Metrics
from laneway.observability.start import export_spans
from laneway.options import Ordering
from laneway.service import exits
from laneway.service.handler_ref import load_handler
from laneway.service.health_server import HealthServer
from laneway.service.logs import started
from laneway.service.settings import Resolved
from laneway.sources import backends
from laneway.sources.base import Source
from laneway.state.settings import store_of
from laneway.status.member import MemberStatus

log = get_logger(__name__)

ORPHAN_CHECK = 1.0
"""Seconds between a member's checks that its supervisor still runs."""
START_CHECK = 0.05
"""Seconds between checks whether the consumer runs yet (to write the start-up's log)."""


def open_source(settings: Resolved, member: int | None) -> AbstractContextManager[Source]:
    """The source the settings name (a Kafka group, a share group, or a durable embedded
    log directory), closed when the ``with`` block ends."""
    target = settings.target()
    if not settings["group"]:
        raise ConfigError("no consumer group: give --group NAME")
    if not settings["topics"]:
        raise ConfigError("no topic: give --topic NAME (repeat it for several)")
    return backends.open_source(
        target, settings["group"], settings["topics"], settings.source_options(), member
    )


def consumer_options(settings: Resolved) -> dict[str, Any]:
    """The consumer options of the settings; with ``share``, ordering is ``unordered``
    unless set (any other ordering fails when the consumer is built, naming why)."""
    options = dict(settings.consumer_options)
    if settings["share"] and settings.origins["ordering"] == "default":
        options["ordering"] = Ordering.UNORDERED
    return options


def run_member(settings: Resolved, member: int | None = None) -> int:
    """Run one consumer until it is stopped; its exit code (0 after a clean drain,
    ``exits.ABANDONED`` when the drain ended with messages unfinished).

    Errors at start-up propagate (the command turns them into one line and an exit code);
    what the start-up logged is held until the consumer runs (see
    :class:`~laneway.service.logs.StartUpHold`).
    """
    try:
        return _run(settings, member)
    except LanewayError:
        raise  # one line says it all: the command drops what the start-up logged
    except BaseException:
        started()  # unexpected: its traceback needs what led to it
        raise


def _run(settings: Resolved, member: int | None) -> int:
    export_spans(settings["tracing"])  # OTEL_EXPORTER_OTLP_ENDPOINT: before the handler's import
    handler = load_handler(settings["handler"])
    with open_source(settings, member) as source:
        options = consumer_options(settings)
        options["state"] = store_of(settings.values, member)
        if settings["metrics_port"] is not None:
            port = settings["metrics_port"] + (member or 0)
            options["metrics"] = _serve_metrics(port, settings["metrics_address"])
        consumer = Consumer(source, handler, **options)
        probes = None
        if settings["health_port"] is not None:
            port = settings["health_port"] + (member or 0)
            show_keys = settings["health_show_keys"]
            status = MemberStatus(
                consumer, show_keys=show_keys, source=source.name, config=settings.describe()
            )
            probes = HealthServer(
                consumer.health,
                port,
                settings["health_address"],
                show_keys=show_keys,
                backlog=consumer.backlog,
                status=status,
            )
            probes.start()
        if member is not None:
            _stop_when_orphaned(consumer)
        began = time.monotonic()
        log.info(
            "consuming %s with %s (engine=%s, concurrency=%d)",
            source.name,
            settings["handler"],
            consumer.config.engine.value,
            consumer.config.concurrency,
        )
        _release_log_when_running(consumer)
        try:
            stats = consumer.run()
        finally:
            if probes is not None:
                probes.stop()
        started()
        log.info(
            "stopped after %.1f s: %d processed, %d failed, %d dead-lettered, committed %s",
            time.monotonic() - began,
            stats.processed,
            stats.failed,
            stats.dead_lettered,
            {f"{t}[{p}]": o for (t, p), o in sorted(stats.committed.items())},
        )
        return exits.ABANDONED if stats.abandoned else exits.OK


def _release_log_when_running(consumer: Consumer) -> None:
    """Write what the start-up logged once the consumer runs (its source is open)."""

    def watch() -> None:
        while consumer.health().state in ("new", "starting"):
            time.sleep(START_CHECK)
        if consumer.health().state == "running":
            started()

    threading.Thread(target=watch, name="laneway-start-watch", daemon=True).start()


def _stop_when_orphaned(consumer: Consumer) -> None:
    """A supervised member stops (drains, commits) when its supervisor is gone, instead of
    running on unwatched after the supervisor was killed."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_CHECK)
        log.warning("the --members supervisor (pid %d) is gone; stopping", parent)
        consumer.stop()

    threading.Thread(target=watch, name="laneway-orphan-watch", daemon=True).start()


def _serve_metrics(port: int, address: str) -> Metrics:
    try:
        from laneway.observability.prometheus import serve_metrics
    except ModuleNotFoundError as error:
        raise ConfigError(
            f"metrics_port needs the prometheus-client package ({error.name} is missing): "
            "pip install 'laneway[metrics]'"
        ) from None
    try:
        metrics = serve_metrics(port, address)
    except OSError as error:
        raise ConfigError(
            f"metrics_port={port} on metrics_address={address} cannot be used: "
            f"{error.strerror or error}"
        ) from None
    log.info("Prometheus metrics on %s port %d: /metrics", address, port)
    return metrics
