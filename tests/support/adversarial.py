"""The adversarial contract suite's driver: a consumer over a real log with a handler that
misbehaves (see :mod:`misbehaving`), and the promise checked: every message whose lane no
call blocks finishes within the engine's stated bound, order holds, and the stall report
names what is blocked and what waits for it.

A *scenario* is a workload: keys over partitions, each record's value saying what its call
does. Records behind a hung call in their lane (their key's; with ``ordering="partition"``,
their partition's) cannot finish; every other record must.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import kafka_helpers
import misbehaving
import pytest
import recording
from topics import EmbeddedTopic, KafkaTopic, LogTopic

import laneway
from laneway.engines.claims import GIVE_BACK_AFTER
from laneway.engines.process.detaching import DETACH_AFTER, LOOK_EVERY
from laneway.engines.thread import STALL_CHECK
from laneway.sources.base import Source

SOURCES = [
    "embedded",
    pytest.param("kafka", marks=pytest.mark.kafka),
    pytest.param("kip848", marks=pytest.mark.kafka),
]
"""The embedded log, Kafka's classic group protocol, and KIP-848's (group.protocol=consumer)."""

STALL_TIMEOUT = 0.5
"""The suite's ``stall_timeout``: short, so stalls are reported (and replaced) quickly."""
WORKER_START_S = 1.0
"""About the most a fresh process worker takes to start here (spawn, import the handler)."""
SLACK_S = 10.0
"""What a loaded CI machine may add to a bound (the suite checks promises, not speed)."""


def bound(engine: str) -> float:
    """The longest another key may wait behind a blocked call on ``engine`` while a worker
    is free (docs/concepts/ordering.md): a give-back on the thread and async engines, a
    detach and a worker start on the process engine."""
    if engine == "process":
        return DETACH_AFTER + LOOK_EVERY + WORKER_START_S
    return GIVE_BACK_AFTER + STALL_CHECK


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes


@dataclass
class Scenario:
    """Records to produce, in order; :meth:`blocked` says which cannot finish."""

    records: list[Record]
    partitions: int = 4
    positions: list[tuple[int, int]] = field(default_factory=list)

    def hung(self) -> list[int]:
        return [i for i, r in enumerate(self.records) if r.value == misbehaving.HANG]

    def blocked(self, ordering: str) -> set[tuple[int, int]]:
        """Positions that cannot finish while the hung calls hang (the hung ones too)."""
        out: set[tuple[int, int]] = set()
        for h in self.hung():
            hp, ho = self.positions[h]
            for record, (p, o) in zip(self.records, self.positions, strict=True):
                same_lane = p == hp and (
                    ordering == "partition" or record.key == self.records[h].key
                )
                if (p, o) == (hp, ho) or (ordering != "unordered" and same_lane and o > ho):
                    out.add((p, o))
        return out

    def free(self, ordering: str) -> set[tuple[int, int]]:
        """Positions that must finish."""
        return set(self.positions) - self.blocked(ordering)

    def hanging(self, ordering: str) -> set[tuple[int, int]]:
        """The hung records that start (those no earlier hung record's lane blocks)."""
        starts = set()
        for h in self.hung():
            others = Scenario(
                [r if i != h else Record(r.key, b"0") for i, r in enumerate(self.records)]
            )
            others.positions = self.positions
            if self.positions[h] not in others.blocked(ordering):
                starts.add(self.positions[h])
        return starts


def keyed(keys: int, per_key: int, work_ms: float, seed: int = 11) -> list[Record]:
    """``per_key`` records of each of ``keys`` keys, shuffled, each ``work_ms`` of work."""
    records = [
        Record(b"k%d" % k, repr(work_ms).encode()) for k in range(keys) for _ in range(per_key)
    ]
    random.Random(seed).shuffle(records)
    return records


def zipf(count: int, keys: int, work_ms: float, s: float = 1.2, seed: int = 13) -> list[Record]:
    """``count`` records whose keys follow a Zipf law (key 0 the hottest)."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) ** s for rank in range(keys)]
    return [
        Record(b"k%d" % rng.choices(range(keys), weights)[0], repr(work_ms).encode())
        for _ in range(count)
    ]


def with_value(records: list[Record], key: bytes, value: bytes, nth: int = 0) -> list[Record]:
    """``records`` with the ``nth`` record of ``key`` given ``value``."""
    seen = 0
    out = list(records)
    for i, record in enumerate(out):
        if record.key == key:
            if seen == nth:
                out[i] = Record(key, value)
                return out
            seen += 1
    raise ValueError(f"no record {nth} of {key!r}")


def topic_for(kind: str, request: pytest.FixtureRequest, partitions: int) -> LogTopic:
    if kind == "embedded":
        return EmbeddedTopic(partitions)
    return KafkaTopic(request.getfixturevalue("kafka_bootstrap"), partitions)


def source_for(kind: str, topic: LogTopic, group: str) -> Source:
    if kind == "kip848":
        assert isinstance(topic, KafkaTopic)
        return laneway.KafkaSource(
            topic.bootstrap, group, [topic.name], {"group.protocol": "consumer"}
        )
    return topic.source(group)


def handler_for(engine: str, batch: bool = False, name: str = "handle") -> Callable[..., object]:
    function = name + ("_batch" if batch else "") + ("_async" if engine == "async" else "")
    return getattr(misbehaving, function)  # type: ignore[no-any-return]


@dataclass
class Run:
    """A consumer running a scenario on its own thread."""

    consumer: laneway.Consumer
    scenario: Scenario
    folder: Path
    thread: threading.Thread
    started: float

    def calls(self) -> list[recording.Call]:
        return recording.read_calls(self.folder)

    def wait_for(self, positions: set[tuple[int, int]], seconds: float) -> set[tuple[int, int]]:
        """Wait until every position in ``positions`` was handled and the consumer counts
        them finished (``stats().processed``: reported, so their offsets can be
        committed), or ``seconds`` passed; return the positions never handled, or, when
        all were but the consumer still counts fewer finished, as many of them as it
        misses (a hung call must not keep finished work unreported)."""
        deadline = time.monotonic() + seconds
        missing = set(positions)
        while time.monotonic() < deadline:
            missing = positions - {(c.partition, c.offset) for c in self.calls()}
            if not missing and self.consumer.stats().processed >= len(positions):
                return set()
            time.sleep(0.05)
        if missing:
            return missing
        unreported = len(positions) - self.consumer.stats().processed
        return set(sorted(positions)[:unreported])

    def wait_for_hangs(self, count: int, seconds: float = 30.0) -> None:
        deadline = time.monotonic() + seconds
        while len(misbehaving.hung(self.folder)) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(misbehaving.hung(self.folder)) >= count, "the hung calls never started"


def produce(topic: LogTopic, scenario: Scenario) -> None:
    scenario.positions = topic.produce([(r.key, r.value) for r in scenario.records])


@contextmanager
def running(
    source: Source,
    scenario: Scenario,
    folder: Path,
    engine: str,
    ordering: str,
    concurrency: int,
    batch: bool = False,
    handler: str = "handle",
    **options: object,
) -> Iterator[Run]:
    """Run a consumer on ``source`` with the misbehaving handler (``handler``: its name in
    :mod:`misbehaving`); on the way out release the hung calls, stop it and wait for its
    run to end."""
    settings: dict[str, object] = {
        "engine": engine,
        "ordering": ordering,
        "concurrency": concurrency,
        "stall_timeout": STALL_TIMEOUT,
        "drain_timeout": 2.0,
        **options,
    }
    if batch:
        settings["batch_size"] = 8
    consumer = laneway.Consumer(source, handler_for(engine, batch, handler), **settings)  # type: ignore[call-overload]
    thread = threading.Thread(target=consumer.run, name="adversarial-run", daemon=True)
    run = Run(consumer, scenario, folder, thread, time.monotonic())
    thread.start()
    try:
        yield run
    finally:
        misbehaving.release(folder)
        consumer.stop()
        thread.join(60)
        assert not thread.is_alive(), "the consumer did not stop"


def check_order(calls: Sequence[recording.Call], ordering: str) -> None:
    assert recording.order_violations(list(calls), ordering) == []


def unique_group(name: str) -> str:
    return kafka_helpers.unique_name(name)
