"""The ``raw`` engine: a plain consume loop with no processing, the ceiling of every table.

It reads the backlog in batches of :data:`BATCH` and records each message (the same
fields the other engines' recorder keeps), nothing else: no handler call, no commit. On the
embedded log it polls the same :class:`~laneway.sources.base.Source` laneway uses; on Kafka
it is a bare confluent-kafka ``Consumer.consume(num_messages=BATCH)`` loop, so the figure is
what librdkafka plus the Python client deliver before laneway adds anything.

Timing: from the moment the first poll returned messages to the moment the last message
was recorded (group join and the first wait are start-up, reported apart).
"""

from __future__ import annotations

import abc
import threading
import time
from dataclasses import dataclass

from confluent_kafka import Consumer

from laneway.bench.recorder import Record
from laneway.bench.workloads import sequence_of
from laneway.sources.base import IgnoreRebalances, Source

BATCH = 2_000
"""Messages asked for per poll: laneway's default ``poll_batch_size``."""
POLL_TIMEOUT_S = 0.1


@dataclass(frozen=True)
class RawResult:
    """What a raw loop saw: its records, when the first message arrived, and its runtime."""

    records: list[Record]
    first_ns: int | None
    elapsed: float
    timed_out: bool


class RawLoop(abc.ABC):
    """A consume loop over a backlog of ``messages``; :meth:`stop` ends it from any thread."""

    def __init__(self, messages: int) -> None:
        self.messages = messages
        self.count = 0
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> RawResult:
        records: list[Record] = []
        first_ns: int | None = None
        last_ns = 0
        self._open()
        try:
            while self.count < self.messages and not self._stop.is_set():
                fetched = self._fetch(records)
                if fetched:
                    if first_ns is None:
                        first_ns = records[self.count][5]
                    self.count += fetched
                    last_ns = time.monotonic_ns()
        finally:
            self._close()
        elapsed = 0.0 if first_ns is None else (last_ns - first_ns) / 1e9
        return RawResult(records, first_ns, elapsed, self.count < self.messages)

    @abc.abstractmethod
    def _open(self) -> None:
        """Subscribe / join the group."""

    @abc.abstractmethod
    def _fetch(self, records: list[Record]) -> int:
        """Poll once, append a record per message, return how many arrived."""

    @abc.abstractmethod
    def _close(self) -> None:
        """Leave the group."""


class EmbeddedRawLoop(RawLoop):
    def __init__(self, source: Source, messages: int) -> None:
        super().__init__(messages)
        self._source = source

    def _open(self) -> None:
        self._source.open(IgnoreRebalances())

    def _fetch(self, records: list[Record]) -> int:
        batch = self._source.poll(BATCH, POLL_TIMEOUT_S)
        now = time.monotonic_ns()
        records.extend(
            [
                (m.partition, m.key, m.offset, sequence_of(m.value), m.timestamp, now, now)
                for m in batch
            ]
        )
        return len(batch)

    def _close(self) -> None:
        self._source.close()


class KafkaRawLoop(RawLoop):
    def __init__(self, bootstrap_servers: str, topic: str, group: str, messages: int) -> None:
        super().__init__(messages)
        self._topic = topic
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap_servers,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "partition.assignment.strategy": "cooperative-sticky",
            }
        )

    def _open(self) -> None:
        self._consumer.subscribe([self._topic])

    def _fetch(self, records: list[Record]) -> int:
        batch = self._consumer.consume(num_messages=BATCH, timeout=POLL_TIMEOUT_S)
        now = time.monotonic_ns()
        before = len(records)
        for m in batch:
            partition, offset = m.partition(), m.offset()
            if m.error() is None and partition is not None and offset is not None:
                ts = m.timestamp()[1]
                records.append((partition, m.key(), offset, sequence_of(m.value()), ts, now, now))
        return len(records) - before

    def _close(self) -> None:
        self._consumer.close()
