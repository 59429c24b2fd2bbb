"""One consumer process of ``laneway run``: source, handler and consumer from the settings,
health probes, and a run until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from laneway.consumer import Consumer
from laneway.errors import ConfigError
from laneway.metrics import Metrics
from laneway.options import Ordering
from laneway.service.handler_ref import load_handler
from laneway.service.health_server import HealthServer
from laneway.service.settings import Resolved
from laneway.sources.base import Source
from laneway.sources.embedded.log import EmbeddedLog
from laneway.sources.kafka.source import KafkaSource
from laneway.sources.share.source import KafkaShareSource

log = logging.getLogger(__name__)

ORPHAN_CHECK = 1.0
"""Seconds between a member's checks that its supervisor still runs."""


def open_source(settings: Resolved, member: int | None) -> tuple[Source, EmbeddedLog | None]:
    """The source the settings name: a Kafka group, or a durable embedded log directory
    (returned too, to be closed after the run)."""
    servers, log_dir = settings["bootstrap_servers"], settings["log_dir"]
    if servers and log_dir:
        raise ConfigError(
            "bootstrap_servers and log_dir are both set; choose Kafka or the embedded log"
        )
    if not servers and not log_dir:
        raise ConfigError(
            "no source: give --bootstrap-servers HOST:PORT (Kafka) or --log-dir DIR (a "
            "durable embedded log)"
        )
    if not settings["group"]:
        raise ConfigError("no consumer group: give --group NAME")
    if not settings["topics"]:
        raise ConfigError("no topic: give --topic NAME (repeat it for several)")
    if settings["share"] and not servers:
        raise ConfigError("share needs Kafka: give --bootstrap-servers HOST:PORT")
    if servers:
        kafka = dict(settings.kafka)
        if member is not None:
            kafka.setdefault("client.id", f"laneway-member-{member}")
        if settings["share"]:
            share = KafkaShareSource(
                servers,
                settings["group"],
                list(settings["topics"]),
                kafka,
                connect_timeout=settings["connect_timeout"],
                wait_for_topics=settings["wait_for_topics"],
                start_at=settings["start_at"],
            )
            return share, None
        source = KafkaSource(
            servers,
            settings["group"],
            list(settings["topics"]),
            kafka,
            connect_timeout=settings["connect_timeout"],
            wait_for_topics=settings["wait_for_topics"],
        )
        return source, None
    if member is not None:
        raise ConfigError("members > 1 needs Kafka: an embedded log lives in one process")
    embedded = EmbeddedLog(Path(log_dir))
    try:
        return embedded.subscribe(list(settings["topics"]), settings["group"]), embedded
    except BaseException:
        embedded.close()
        raise


def consumer_options(settings: Resolved) -> dict[str, Any]:
    """The consumer options of the settings; with ``share``, ordering is ``unordered``
    unless set (any other ordering fails when the consumer is built, naming why)."""
    options = dict(settings.consumer_options)
    if settings["share"] and settings.origins["ordering"] == "default":
        options["ordering"] = Ordering.UNORDERED
    return options


def run_member(settings: Resolved, member: int | None = None) -> int:
    """Run one consumer until it is stopped; its exit code (0 after a clean drain).

    Errors at start-up propagate (the command turns them into one line and an exit code).
    """
    handler = load_handler(settings["handler"])
    source, embedded = open_source(settings, member)
    try:
        options = consumer_options(settings)
        if settings["metrics_port"] is not None:
            options["metrics"] = _serve_metrics(settings["metrics_port"] + (member or 0))
        consumer = Consumer(source, handler, **options)
        probes = None
        if settings["health_port"] is not None:
            port = settings["health_port"] + (member or 0)
            probes = HealthServer(consumer.health, port)
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
        try:
            stats = consumer.run()
        finally:
            if probes is not None:
                probes.stop()
        log.info(
            "stopped after %.1f s: %d processed, %d failed, %d dead-lettered, committed %s",
            time.monotonic() - began,
            stats.processed,
            stats.failed,
            stats.dead_lettered,
            {f"{t}[{p}]": o for (t, p), o in sorted(stats.committed.items())},
        )
        return 0
    finally:
        if embedded is not None:
            embedded.close()


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


def _serve_metrics(port: int) -> Metrics:
    try:
        from laneway.observability.prometheus import serve_metrics
    except ModuleNotFoundError as error:
        raise ConfigError(
            f"metrics_port needs the prometheus-client package ({error.name} is missing): "
            "pip install 'laneway[metrics]'"
        ) from None
    metrics = serve_metrics(port)
    log.info("Prometheus metrics on port %d: /metrics", port)
    return metrics
