"""The ``raw`` and ``ceiling`` engines: plain consume loops with no processing.

``raw`` reads the backlog in batches of :data:`BATCH` and records each message (the same
fields the other engines' recorder keeps, so its order and losses are checked like theirs),
nothing else: no handler call, no commit. ``ceiling`` (``count_only``) only counts what the
client hands over, skipping even the per-message fields a program must read to do anything
with a message: what the client alone delivers, the limit no consumer built on it can
pass (its rows have no order check, and lost or doubled messages are judged by the count).
On the embedded log both poll the same :class:`~laneway.sources.base.Source` laneway uses;
on Kafka each is a bare confluent-kafka ``Consumer.consume(num_messages=BATCH)`` loop, so
the figure is what librdkafka plus the Python client deliver before laneway adds anything.
It fetches as laneway's :class:`~laneway.sources.kafka.source.KafkaSource` does (the
settings of :data:`laneway.sources.kafka.client_config.DEFAULTS`). With librdkafka's
default ``fetch.queue.backoff.ms`` (1 s) a loop faster than the fetcher drains its prefetch
queue and then waits: so configured, the ceiling read 282,591-284,693 msg/s and raw
280,842-281,259, below laneway's sync engine (387,483-395,912); tuned, 1,308,700-1,321,510
and 701,551-713,219 (trivial, 1,000,000 messages, 8 partitions, two rounds each).

With ``out`` (the ``raw+results`` twin of ``laneway bench --results``) the loop also writes
every message it reads into the topic ``out``, the client's own cheapest at-least-once
pipeline: on Kafka an idempotent producer (``acks=all``, ``linger.ms=5``: a loop that
produces all the time batches best by lingering) reporting failures only and flushed at
the end, as a loop that flushes before each commit would; on the embedded log one bulk
append per fetch. Its throughput
against the plain raw row is what writing a result costs the client itself, next to
what it costs laneway (``<engine>+results`` against ``<engine>``).

Timing: from the moment the first poll returned messages to the moment the last message
was recorded, or with ``out`` the last write acknowledged (group join and the first wait
are start-up, reported apart).
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Message, Producer

from laneway.bench.engines.recorder import Record
from laneway.bench.engines.workloads import sequence_of
from laneway.sources.base import IgnoreRebalances, Source
from laneway.sources.embedded.log import EmbeddedLog
from laneway.sources.kafka.client_config import DEFAULTS as KAFKA_DEFAULTS
from laneway.sources.kafka.client_logs import describe_error
from laneway.sources.kafka.group_protocol import DEFAULT_ASSIGNMENT_STRATEGY

BATCH = 2_000
"""Messages asked for per poll: laneway's default ``poll_batch_size``."""
POLL_TIMEOUT_S = 0.1
FLUSH_TIMEOUT_S = 60.0
"""Seconds the ``raw+results`` loop waits at the end for its writes to be acknowledged."""


@dataclass(frozen=True)
class RawResult:
    """What a raw loop saw: its records, when the first message arrived, and its runtime."""

    records: list[Record]
    first_ns: int | None
    elapsed: float
    timed_out: bool


class RawLoop(abc.ABC):
    """A consume loop over a backlog of ``messages``; :meth:`stop` ends it from any thread."""

    def __init__(
        self,
        messages: int,
        out: str | None = None,
        decode: Callable[[bytes], object] | None = None,
        count_only: bool = False,
    ) -> None:
        self.messages = messages
        self.out = out
        """The topic every message read is also written to (``None``: read only)."""
        self.decode = decode
        """What the loop decodes each value with (``--value-format``; ``None``: bytes)."""
        self.count_only = count_only
        """Count the messages and keep no records (the ``ceiling`` engine)."""
        self.count = 0
        self._polled_ns = 0
        """When the last poll returned (the ceiling loop's start, at its first messages)."""
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
                fetched = self._count() if self.count_only else self._fetch(records)
                if fetched:
                    if first_ns is None:
                        first_ns = self._polled_ns if self.count_only else records[self.count][5]
                    self.count += fetched
                    last_ns = time.monotonic_ns()
            written = self._finish_writes()
            if self.out is not None:
                last_ns = time.monotonic_ns()
        finally:
            self._close()
        elapsed = 0.0 if first_ns is None else (last_ns - first_ns) / 1e9
        return RawResult(records, first_ns, elapsed, self.count < self.messages or not written)

    @abc.abstractmethod
    def _open(self) -> None:
        """Subscribe / join the group."""

    @abc.abstractmethod
    def _fetch(self, records: list[Record]) -> int:
        """Poll once, append a record per message, return how many arrived."""

    @abc.abstractmethod
    def _count(self) -> int:
        """Poll once, note when it returned, return how many messages arrived."""

    @abc.abstractmethod
    def _close(self) -> None:
        """Leave the group."""

    def _finish_writes(self) -> bool:
        """Wait for the writes to ``out`` to be acknowledged; ``False`` if some were not in
        time. Raises when the log refused one (a ceiling must not count lost writes)."""
        return True


class EmbeddedRawLoop(RawLoop):
    """The raw loop on the embedded log; with ``out``, one bulk append into ``log`` per fetch."""

    def __init__(
        self,
        source: Source,
        messages: int,
        log: EmbeddedLog,
        out: str | None = None,
        decode: Callable[[bytes], object] | None = None,
        count_only: bool = False,
    ) -> None:
        super().__init__(messages, out, decode, count_only)
        self._source = source
        self._log = log

    def _open(self) -> None:
        self._source.open(IgnoreRebalances())

    def _fetch(self, records: list[Record]) -> int:
        batch = self._source.poll(BATCH, POLL_TIMEOUT_S)
        now = time.monotonic_ns()
        decode = self.decode
        if decode is None:
            records.extend(
                [
                    (m.partition, m.key, m.offset, sequence_of(m.value), m.timestamp, now, now)
                    for m in batch
                ]
            )
        else:  # --value-format: decode as a plain loop would, once per message
            seq = [sequence_of(None if m.value is None else decode(m.value)) for m in batch]
            records.extend(
                [
                    (m.partition, m.key, m.offset, sequence, m.timestamp, now, now)
                    for m, sequence in zip(batch, seq, strict=True)
                ]
            )
        if self.out is not None and batch:
            kept = self._log.produce_many(self.out, [(m.key, m.value) for m in batch])
            if kept != len(batch):
                raise RuntimeError(f"the log kept {kept} of {len(batch)} writes to {self.out}")
        return len(batch)

    def _count(self) -> int:
        batch = self._source.poll(BATCH, POLL_TIMEOUT_S)
        self._polled_ns = time.monotonic_ns()
        return len(batch)

    def _close(self) -> None:
        self._source.close()


def consumer_settings(bootstrap_servers: str, group: str) -> dict[str, object]:
    """The bare Kafka loop's consumer: fetching and assigned as laneway's is (from the
    earliest offset), committing nothing."""
    return {
        **KAFKA_DEFAULTS,
        "bootstrap.servers": bootstrap_servers,
        "group.id": group,
        "enable.auto.commit": False,
        "partition.assignment.strategy": DEFAULT_ASSIGNMENT_STRATEGY,
    }


class KafkaRawLoop(RawLoop):
    """The raw loop on Kafka: a bare confluent-kafka consumer; with ``out``, a bare producer
    too (see the module docstring)."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        group: str,
        messages: int,
        out: str | None = None,
        decode: Callable[[bytes], object] | None = None,
        count_only: bool = False,
    ) -> None:
        super().__init__(messages, out, decode, count_only)
        self._topic = topic
        self._failures: list[str] = []
        self._producer: Producer | None = None
        if out is not None:
            self._producer = Producer(
                {
                    "bootstrap.servers": bootstrap_servers,
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "delivery.report.only.error": True,
                    "on_delivery": self._failed,
                }
            )
        self._consumer = Consumer(consumer_settings(bootstrap_servers, group))

    def _open(self) -> None:
        self._consumer.subscribe([self._topic])

    def _fetch(self, records: list[Record]) -> int:
        batch = self._consumer.consume(num_messages=BATCH, timeout=POLL_TIMEOUT_S)
        decode = self.decode
        now = time.monotonic_ns()
        before = len(records)
        for m in batch:
            partition, offset = m.partition(), m.offset()
            if m.error() is None and partition is not None and offset is not None:
                ts, value = m.timestamp()[1], m.value()
                decoded = value if decode is None or value is None else decode(value)
                records.append((partition, m.key(), offset, sequence_of(decoded), ts, now, now))
        if self._producer is not None and self.out is not None and batch:
            self._write(self._producer, self.out, batch)
        return len(records) - before

    def _count(self) -> int:
        batch = self._consumer.consume(num_messages=BATCH, timeout=POLL_TIMEOUT_S)
        self._polled_ns = time.monotonic_ns()
        errors = [m for m in batch if m.error() is not None]
        return len(batch) - len(errors)

    def _write(self, producer: Producer, out: str, batch: list[Message]) -> None:
        for m in batch:
            while True:
                try:
                    producer.produce(out, m.value(), m.key())
                    break
                except BufferError:  # the local queue is full: let acknowledgements in
                    producer.poll(POLL_TIMEOUT_S)
        producer.poll(0)

    def _finish_writes(self) -> bool:
        if self._producer is None:
            return True
        remaining = self._producer.flush(FLUSH_TIMEOUT_S)
        if self._failures:
            raise RuntimeError(
                f"{len(self._failures)} writes to {self.out} failed, first: {self._failures[0]}"
            )
        return remaining == 0

    def _failed(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._failures.append(describe_error(error))

    def _close(self) -> None:
        self._consumer.close()
