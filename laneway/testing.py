"""Testing handlers without Kafka: the ``laneway`` pytest plugin.

pytest loads this module by itself wherever laneway is installed (it is registered as a
``pytest11`` entry point), so a project's tests can use its fixtures without importing
anything:

* ``laneway_log``: a fresh in-memory :class:`~laneway.EmbeddedLog`, closed after the test.
* ``laneway_run``: a :class:`ConsumerRunner`. ``laneway_run(handler, records, **options)``
  writes ``records`` to a new topic of ``laneway_log``, runs a real
  :class:`~laneway.Consumer` with ``options`` until every record is handled and
  committed, and returns a :class:`CompletedRun`: the final stats and the dead letters,
  read back from the dead-letter topic, with assertions on them.

The consumer, its engines, retries, ordering and dead letters are the ones production
runs on Kafka; only the log is in memory. So a handler test checks what the handler does
with laneway around it, in milliseconds, with nothing to start. See the testing guide in
the documentation (``docs/guides/testing.md``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeAlias

import pytest

from laneway.config import ConsumerConfig, OptionsBesidesEngine
from laneway.consumer import Consumer
from laneway.control.dead_letters.router import HEADER_PREFIX
from laneway.options import EngineKind, EngineName, choice
from laneway.serde.codec import Codec
from laneway.serde.names import deserializer
from laneway.sources.base import IgnoreRebalances
from laneway.sources.embedded.log import EmbeddedLog
from laneway.stats import ConsumerStats
from laneway.types import Handler, Header, Message

if TYPE_CHECKING:
    from typing_extensions import Unpack

Text: TypeAlias = bytes | str
"""A key or value: bytes, or text (written as UTF-8)."""

Value: TypeAlias = Any
"""A key or value to write: bytes, text (written as UTF-8), or, when the run has a
``value_deserializer`` (``key_deserializer``) of :mod:`laneway.serde`, any object it
encodes (``laneway_run(handle, [Order(1)], value_deserializer=serde.json(Order))``)."""

Record: TypeAlias = Value | tuple[Value, Value] | tuple[Value, Value, Sequence[Header]]
"""A record to write: a value alone (no key), ``(key, value)`` or ``(key, value, headers)``."""

DEFAULT_TIMEOUT = 30.0
"""Seconds :class:`ConsumerRunner` lets a run take before it stops it and fails the test."""


@dataclass(frozen=True)
class DeadLetter:
    """A message the consumer gave up on, as its dead-letter record tells it.

    ``key``, ``value`` and ``headers`` are the original message's; ``topic``,
    ``partition`` and ``offset`` where it was read; ``error_type`` (the exception's class
    name), ``error_message``, ``attempts`` and ``traceback`` what its last attempt raised.
    """

    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    topic: str
    partition: int
    offset: int
    error_type: str
    error_message: str
    attempts: int
    traceback: str

    @classmethod
    def from_record(cls, record: Message) -> DeadLetter:
        """Decode a record of a dead-letter topic (headers as laneway writes them)."""
        own = {
            name[len(HEADER_PREFIX) :]: (value or b"").decode()
            for name, value in record.headers
            if name.startswith(HEADER_PREFIX)
        }
        original = tuple(h for h in record.headers if not h[0].startswith(HEADER_PREFIX))
        return cls(
            key=record.key,
            value=record.value,
            headers=original,
            topic=own["original.topic"],
            partition=int(own["original.partition"]),
            offset=int(own["original.offset"]),
            error_type=own["error.type"],
            error_message=own["error.message"],
            attempts=int(own["attempts"]),
            traceback=own.get("error.traceback", ""),
        )


@dataclass(frozen=True)
class CompletedRun:
    """What a consumer run by :class:`ConsumerRunner` did: its final ``stats``, the
    ``topic`` it read, and the ``dead_letters`` written for it (in offset order per
    partition)."""

    stats: ConsumerStats
    topic: str
    dead_letters: tuple[DeadLetter, ...]

    def assert_no_dead_letters(self) -> None:
        """Fail the test, naming each one and its error, if any message was dead-lettered."""
        if self.dead_letters:
            raise AssertionError(
                f"{len(self.dead_letters)} message(s) went to dead letters: "
                + "; ".join(_describe(letter) for letter in self.dead_letters)
            )

    def assert_dead_lettered(
        self, *keys: Text | None, error: type[BaseException] | str | None = None
    ) -> tuple[DeadLetter, ...]:
        """Fail the test unless the dead letters are exactly the messages with ``keys``
        (one key per message, any order; none given: at least one dead letter) and, with
        ``error``, each last attempt raised that exception type (a class or its name).
        Returns the dead letters, for further checks."""
        letters = self.dead_letters
        if not keys and not letters:
            raise AssertionError("no message went to dead letters")
        if keys:
            wanted = _in_order(_key_bytes(key) for key in keys)
            got = _in_order(letter.key for letter in letters)
            if wanted != got:
                raise AssertionError(
                    f"dead-lettered keys {_sorted_keys(got)} are not the expected "
                    f"{_sorted_keys(wanted)}; dead letters: "
                    + ("; ".join(_describe(letter) for letter in letters) or "none")
                )
        if error is not None:
            name = error if isinstance(error, str) else error.__name__
            wrong = [letter for letter in letters if letter.error_type != name]
            if wrong:
                raise AssertionError(
                    f"expected every dead letter to come from {name}, but: "
                    + "; ".join(_describe(letter) for letter in wrong)
                )
        return letters


class ConsumerRunner:
    """Runs a handler over records on an embedded log to completion (the ``laneway_run``
    fixture).

    Each call writes the records to a new topic of ``log`` (``partitions`` partitions; a
    key lands where Kafka's partitioner would put it), runs a :class:`~laneway.Consumer`
    with the given options until every record is handled (processed or failed for good)
    and committed, and reads back its dead letters. ``handle_signals`` defaults to False
    here, so pytest keeps its own Ctrl-C. A run that does not finish within ``timeout``
    seconds is stopped and fails the test, saying how far it got (a hung handler, or a
    retry budget longer than the timeout). ``timeout`` bounds the whole call: a run stopped
    by it does not wait ``drain_timeout`` for the handlers still running, it abandons them.
    """

    def __init__(self, log: EmbeddedLog) -> None:
        self.log = log
        self._runs = 0

    def __call__(
        self,
        handler: Handler,
        records: Iterable[Record],
        *,
        engine: EngineName | EngineKind | None = None,
        topic: str | None = None,
        partitions: int = 4,
        timeout: float = DEFAULT_TIMEOUT,
        **options: Unpack[OptionsBesidesEngine],
    ) -> CompletedRun:
        self._runs += 1
        name = topic or f"laneway-test-{self._runs}"
        self.log.create_topic(name, partitions=partitions)
        count = 0
        encoders = _encoders(name, options)
        for record in records:
            key, value, headers = _parts(record, *encoders)
            self.log.produce(name, value=value, key=key, headers=headers)
            count += 1
        options.setdefault("handle_signals", False)
        kind = ConsumerConfig().engine if engine is None else choice(EngineKind, engine, "engine")
        consumer = Consumer(
            self.log.subscribe([name], group=f"{name}-group"), handler, engine=kind, **options
        )
        stats = _run_within(consumer, count, timeout) if count else ConsumerStats()
        dead_letter_topic = consumer.config.dead_letter_topic
        letters: tuple[DeadLetter, ...] = ()
        if dead_letter_topic is not None and consumer.config.on_failure is None:
            letters = tuple(
                DeadLetter.from_record(record)
                for record in read_topic(self.log, dead_letter_topic.format(topic=name))
            )
        return CompletedRun(stats, name, letters)


def read_topic(log: EmbeddedLog, topic: str) -> list[Message]:
    """Every record of ``topic`` on ``log`` (none when it does not exist), partition by
    partition in offset order, read by a group of its own."""
    if topic not in log.topics():
        return []
    wanted = sum(log.end_offsets(topic).values()) - sum(log.start_offsets(topic).values())
    source = log.subscribe([topic], group=f"laneway-testing-reader-{topic}")
    source.open(IgnoreRebalances())
    records: list[Message] = []
    try:
        while len(records) < wanted:
            batch = source.poll(wanted - len(records), 1.0)
            if not batch:
                raise AssertionError(f"{topic}: read {len(records)} of {wanted} records")
            records += batch
    finally:
        source.close()
    return sorted(records, key=lambda m: (m.partition, m.offset))


@pytest.fixture
def laneway_log() -> Iterator[EmbeddedLog]:
    """A fresh in-memory :class:`~laneway.EmbeddedLog`, closed after the test."""
    log = EmbeddedLog()
    try:
        yield log
    finally:
        log.close()


@pytest.fixture
def laneway_run(laneway_log: EmbeddedLog) -> ConsumerRunner:
    """``laneway_run(handler, records, **options)``: run a consumer over ``records`` on
    ``laneway_log`` until all are handled; returns a :class:`CompletedRun`."""
    return ConsumerRunner(laneway_log)


def _run_within(consumer: Consumer, count: int, timeout: float) -> ConsumerStats:
    # Once all `count` are handled the run ends with nothing left to drain; a run the
    # timeout stops has failed, so it abandons what still runs instead of draining.
    timer = threading.Timer(timeout, partial(consumer.stop, drain=False))
    timer.daemon = True
    timer.start()
    try:
        stats = consumer.run(max_messages=count)
    finally:
        timer.cancel()
    if stats.handled < count:
        raise AssertionError(
            f"the consumer handled {stats.handled} of {count} messages within "
            f"timeout={timeout:g} s and abandoned {stats.abandoned} unfinished; a handler "
            "that hangs, or retries that take longer (max_retries x retry_backoff_max), "
            "do this"
        )
    return stats


Encoder: TypeAlias = "Callable[[Value], bytes]"


def _encoders(topic: str, options: Mapping[str, object]) -> tuple[Encoder, Encoder]:
    """How the keys and the values of the records are written: bytes and text as they are,
    other objects by the run's deserializer codec, as a producer of that format would."""

    def encoder(part: str) -> Encoder:
        codec = deserializer(options.get(f"{part}_deserializer"), f"{part}_deserializer")

        def encode(given: Value) -> bytes:
            if isinstance(given, (bytes, str)):
                return _text_bytes(given)
            if isinstance(codec, Codec):
                return codec.encode(given, topic, part == "key")
            raise TypeError(
                f"laneway_run cannot write the {part} {given!r:.60}: pass bytes or text, or a "
                f"{part}_deserializer of laneway.serde that encodes it"
            )

        return encode

    return encoder("key"), encoder("value")


def _parts(
    record: Record, encode_key: Encoder, encode_value: Encoder
) -> tuple[bytes | None, bytes, list[Header] | None]:
    if not isinstance(record, tuple):
        return None, encode_value(record), None
    if len(record) == 2:
        key, value = record
        return None if key is None else encode_key(key), encode_value(value), None
    key, value, headers = record
    return None if key is None else encode_key(key), encode_value(value), list(headers)


def _text_bytes(text: Text) -> bytes:
    return text.encode() if isinstance(text, str) else text


def _key_bytes(key: Text | None) -> bytes | None:
    return None if key is None else _text_bytes(key)


def _in_order(keys: Iterable[bytes | None]) -> list[bytes | None]:
    return sorted(keys, key=lambda key: (key is not None, key or b""))


def _sorted_keys(keys: list[bytes | None]) -> str:
    return "[" + ", ".join(repr(key) for key in keys) + "]"


def _describe(letter: DeadLetter) -> str:
    return (
        f"{letter.topic}[{letter.partition}]@{letter.offset} key {letter.key!r}: "
        f"{letter.error_type}: {letter.error_message} after {letter.attempts} attempt(s)"
    )
