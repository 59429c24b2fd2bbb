"""A source that waits (for topics the cluster does not have) makes the consumer not ready,
with the source's reason; it declares so in its capabilities (``waits``) and has
``waiting_for()``, checked when the consumer is made."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

import laneway
from laneway.config import ConsumerConfig
from laneway.errors import ConfigError
from laneway.sources.base import SourceCapabilities
from laneway.sources.capabilities import check_source
from laneway.sources.embedded.source import EMBEDDED_LOG, EmbeddedSource
from laneway.sources.kafka.source import KAFKA_GROUP


class Waiting(EmbeddedSource):
    """An embedded-log source that says it waits for something while ``reason`` is set."""

    reason = "the cluster does not have topic 'later' (not created yet, or deleted)"

    @property
    def capabilities(self) -> SourceCapabilities:
        return dataclasses.replace(EMBEDDED_LOG, waits=True)

    def waiting_for(self) -> str:
        return self.reason


def test_a_kafka_group_declares_that_it_waits() -> None:
    assert KAFKA_GROUP.waits
    assert not EMBEDDED_LOG.waits


def test_a_source_that_declares_waits_needs_waiting_for() -> None:
    class Undeclared(EmbeddedSource):
        @property
        def capabilities(self) -> SourceCapabilities:
            return dataclasses.replace(EMBEDDED_LOG, waits=True)

    with laneway.EmbeddedLog() as log:
        log.create_topic("orders")
        plain = log.subscribe(["orders"], "g")
        plain.__class__ = Undeclared
        with pytest.raises(ConfigError, match="declares waits but has no waiting_for"):
            check_source(plain, ConsumerConfig())


def test_the_consumer_is_not_ready_while_its_source_waits() -> None:
    with laneway.EmbeddedLog() as log:
        log.create_topic("orders")
        source = log.subscribe(["orders"], "g")
        source.__class__ = Waiting
        consumer = laneway.Consumer(source, lambda m: None, handle_signals=False)
        runner = threading.Thread(target=consumer.run)
        runner.start()
        try:
            deadline = time.monotonic() + 10
            while consumer.health().state != "running" and time.monotonic() < deadline:
                time.sleep(0.01)
            health = consumer.health()
            assert health.live and not health.ready
            assert health.reason == Waiting.reason
            waited, Waiting.reason = Waiting.reason, ""
            assert consumer.health().ready
            Waiting.reason = waited
        finally:
            consumer.stop()
            runner.join(10)
