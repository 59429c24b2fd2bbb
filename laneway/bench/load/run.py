"""One open-loop run of the ``spike`` or ``paced`` benchmark for one topology.

A run: a fresh topic and consumer group, a freshly prepared reservation database, the
topology's ``laneway run`` processes started and warmed up (requests for a warm-up event
until every member holds partitions and the group is stable), then the measured requests
produced while the consumers run — all at once (``spike``) or at a fixed rate (``paced``,
optionally with the database slowed during its middle third) — and the wait until every
request has an outcome (or nothing moved for ``SETTLE_S`` seconds). Latency is intended
send -> done per request, from the database (see
:func:`laneway.bench.tickets.database.timings`); CPU seconds are the consumer processes'
from the first produce to the last outcome.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from laneway.bench.load.consumer_processes import ConsumerProcesses
from laneway.bench.load.jaeger_traces import consumer_environment
from laneway.bench.load.topologies import Topology
from laneway.bench.tickets import database
from laneway.bench.tickets.requests import Request, RequestProducer, SpanFactory, requests
from laneway.kafka import create_topic

OK, TIMEOUT, ERROR = "OK", "TIMEOUT", "ERROR"
SEATS_PER_EVENT = 800
REQUESTS_PER_EVENT = 1_000
"""Seed 004's proportions: 1,000 requests for 800 seats, half of them for any seat."""
WARM_UP = 64
WARM_UP_TIMEOUT_S = 120.0
SETTLE_S = 15.0
"""Seconds without a new outcome, after the last produce, after which the requests still
without an outcome or a dead letter are counted as lost instead of waited for."""
QUIET_S = 0.5
"""Seconds without a new outcome after which the dead letters are counted too."""
POLL_S = 0.02


@dataclass(frozen=True)
class LoadSettings:
    """What every run of one ``laneway bench`` invocation shares."""

    bootstrap: str
    dsn: str
    topic_prefix: str
    partitions: int = 8
    pool: int = 16
    statement_timeout: float | None = None
    slow_ms: float = 0.0
    trace_dir: Path | None = None
    timeout: float = 600.0
    otlp_endpoint: str | None = None
    """Where the producer and the consumers export their spans over OTLP/HTTP, if anywhere."""


@dataclass(frozen=True)
class Load:
    """The measured requests: ``count`` of them, at once (``rate`` None) or ``rate`` a
    second; ``slowed`` says whether the database is slowed during the middle third."""

    scenario: str
    count: int
    rate: float | None = None
    slowed: bool = False

    @property
    def duration(self) -> float:
        return 0.0 if self.rate is None else self.count / self.rate


@dataclass
class LoadOutcome:
    """What one run measured, before it is turned into a row."""

    topology: Topology
    load: Load
    status: str = OK
    error: str | None = None
    produced: int = 0
    timings: list[tuple[str, float, float]] = field(default_factory=list)
    dead_letters: int = 0
    conflicts: list[str] = field(default_factory=list)
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    slow_window: tuple[float, float] | None = None
    slowest: str | None = None
    """The id of the request that took longest (its trace is in the trace directory)."""
    trace_dir: Path | None = None
    topic: str = ""
    prefix: str = ""
    """The run's topic, and the start of its measured requests' ids."""
    started_ns: int = 0
    """When the measured requests began to be produced (ns since the epoch)."""


def run_load(
    settings: LoadSettings,
    topology: Topology,
    load: Load,
    send_span: SpanFactory | None = None,
    say: Callable[[str], None] = print,
) -> LoadOutcome:
    """Run ``load`` through ``topology``; never raises for a failed run (see ``status``)."""
    outcome = LoadOutcome(topology, load)
    run_id = uuid.uuid4().hex[:8]
    topic = f"{settings.topic_prefix}-{load.scenario}-{run_id}"
    prefix = f"{load.scenario}-{run_id}-"
    outcome.topic, outcome.prefix = topic, prefix
    events = max(1, math.ceil(load.count / REQUESTS_PER_EVENT))
    wanted = requests(load.count, load.count, SEATS_PER_EVENT, events=events, prefix=prefix)
    with contextlib.ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="laneway-")))
        if settings.trace_dir is not None:
            outcome.trace_dir = settings.trace_dir / f"{load.scenario}-{_slug(topology.name)}"
        try:
            create_topic(settings.bootstrap, topic, settings.partitions)
            stack.callback(_delete_topics, settings.bootstrap, [topic, f"{topic}.dlq"])
            database.prepare(settings.dsn, SEATS_PER_EVENT, events=range(events + 1))
            slowdown = database.Slowdown(settings.dsn) if load.slowed else None
            if slowdown is not None:
                stack.callback(slowdown.remove)
            counter = database.Counter(settings.dsn)
            stack.callback(counter.close)
            consumers = ConsumerProcesses(
                topology, settings.bootstrap, topic, _environment(settings, outcome), directory
            )
            stopped = stack.enter_context(_stopping(consumers))
            producer = RequestProducer(settings.bootstrap, topic, send_span)
            _warm_up(settings, topology, topic, producer, consumers, counter)
            cpu_before = consumers.cpu_seconds()
            outcome.started_ns = time.time_ns()
            with _slowed(slowdown, load, settings.slow_ms, outcome):
                if load.rate is None:
                    producer.spike(wanted)
                else:
                    producer.paced(wanted, load.rate)
                producer.flush()
            outcome.produced = producer.produced
            outcome.status = _wait_for_outcomes(
                settings, topic, prefix, load.count, consumers, counter
            )
            outcome.cpu_s = consumers.cpu_seconds() - cpu_before
            outcome.peak_rss_mb = consumers.peak_rss_mb()
            code = stopped()
            outcome.dead_letters = dead_letters(settings.bootstrap, f"{topic}.dlq")
            if code != 0 and outcome.status == OK:
                outcome.status, outcome.error = ERROR, f"laneway run exited with {code}"
            if outcome.status != OK and outcome.error is None:
                outcome.error = consumers.log_tail()
        except (KafkaException, psycopg.Error, OSError, RuntimeError) as error:
            outcome.status, outcome.error = ERROR, f"{type(error).__name__}: {error}"
            return outcome
    outcome.timings = database.timings(settings.dsn, prefix)
    outcome.conflicts = database.conflicts(settings.dsn)
    if outcome.timings:
        outcome.slowest = max(outcome.timings, key=lambda t: t[2] - t[1])[0]
    say(f"{load.scenario} {topology.name}: {len(outcome.timings)} of {load.count} done")
    return outcome


def _environment(settings: LoadSettings, outcome: LoadOutcome) -> dict[str, str]:
    env = {
        "TICKETING_DSN": settings.dsn,
        "TICKETING_POOL_SIZE": str(outcome.topology.pool_size(settings.pool)),
    }
    if settings.statement_timeout is not None:
        env["TICKETING_STATEMENT_TIMEOUT"] = f"{settings.statement_timeout:g}"
    if outcome.trace_dir is not None:
        env["TICKETING_TRACE_DIR"] = str(outcome.trace_dir)
    if settings.otlp_endpoint is not None:
        env.update(consumer_environment(settings.otlp_endpoint))
    return env


@contextlib.contextmanager
def _stopping(consumers: ConsumerProcesses) -> Iterator[Callable[[], int]]:
    """Yields a function that stops the consumers (once) and returns their exit code; they
    are stopped on the way out in any case."""
    codes: list[int] = []

    def stop() -> int:
        if not codes:
            codes.append(consumers.stop())
        return codes[0]

    try:
        yield stop
    finally:
        stop()


def _warm_up(
    settings: LoadSettings,
    topology: Topology,
    topic: str,
    producer: RequestProducer,
    consumers: ConsumerProcesses,
    counter: database.Counter,
) -> None:
    """Produce warm-up requests (event 0) until all are handled and the group is stable
    with every member holding partitions; raise RuntimeError when that takes too long."""
    deadline = time.monotonic() + WARM_UP_TIMEOUT_S
    admin = AdminClient({"bootstrap.servers": settings.bootstrap})
    for round_ in range(1, 1_000):
        prefix = f"warm{round_}-"
        batch = [Request(f"{prefix}{i}", f"warm{i}", 0, None) for i in range(WARM_UP)]
        producer.spike(batch)
        producer.flush()
        while counter.count(prefix) < WARM_UP:
            if not consumers.alive():
                raise RuntimeError(f"laneway run exited during warm-up: {consumers.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"warm-up requests not handled: {consumers.log_tail()}")
            time.sleep(POLL_S)
        if _stable(admin, topic, topology.members, settings.partitions):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the group of {topology.members} members did not settle")
        time.sleep(0.5)
    raise RuntimeError("the consumer group did not settle")


def _stable(admin: AdminClient, group: str, members: int, partitions: int) -> bool:
    """Whether ``group`` is stable with ``members`` members sharing every partition."""
    try:
        found = admin.describe_consumer_groups([group])[group].result(10.0)
    except KafkaException:
        return False
    owned = sum(len(m.assignment.topic_partitions) for m in found.members if m.assignment)
    return bool(
        found.state.name == "STABLE"
        and len(found.members) == members
        and owned == partitions
        and all(m.assignment and m.assignment.topic_partitions for m in found.members)
    )


@contextlib.contextmanager
def _slowed(
    slowdown: database.Slowdown | None, load: Load, slow_ms: float, outcome: LoadOutcome
) -> Iterator[None]:
    """Hold every reservation ``slow_ms`` ms from a third to two thirds of the load."""
    if slowdown is None:
        yield
        return
    started = time.time()
    third = load.duration / 3
    window = (started + third, started + 2 * third)
    slow = threading.Timer(third, slowdown.hold, (slow_ms / 1000.0,))
    fast = threading.Timer(2 * third, slowdown.hold, (0.0,))
    slow.start()
    fast.start()
    try:
        yield
    finally:
        slow.join()
        fast.join()
        outcome.slow_window = window


def _wait_for_outcomes(
    settings: LoadSettings,
    topic: str,
    prefix: str,
    count: int,
    consumers: ConsumerProcesses,
    counter: database.Counter,
) -> str:
    """Wait until each of ``count`` requests has an outcome or a dead letter, or nothing
    moved for ``SETTLE_S`` (dead letters are looked for once outcomes pause ``QUIET_S``)."""
    deadline = time.monotonic() + settings.timeout
    seen, moved, looked = -1, time.monotonic(), 0.0
    while True:
        done = counter.count(prefix)
        now = time.monotonic()
        if done >= count:
            return OK
        if done != seen:
            seen, moved = done, now
        elif now - moved > QUIET_S and now - looked > QUIET_S:
            looked = now
            if done + dead_letters(settings.bootstrap, f"{topic}.dlq") >= count:
                return OK
        if now - moved > SETTLE_S:
            return OK  # the rest is counted as lost
        if now > deadline:
            return TIMEOUT
        if not consumers.alive():
            return ERROR
        time.sleep(POLL_S)


def dead_letters(bootstrap: str, topic: str) -> int:
    """Records in ``topic`` (0 when it does not exist)."""
    reader = KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": f"count-{topic}"})
    try:
        described = reader.list_topics(topic, timeout=10.0).topics.get(topic)
        if described is None or described.error is not None:
            return 0
        total = 0
        for partition in described.partitions:
            low, high = reader.get_watermark_offsets(TopicPartition(topic, partition), 10.0)
            total += high - low
        return total
    finally:
        reader.close()


def _delete_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(topics, request_timeout=30.0).values():
        with contextlib.suppress(KafkaException):  # a leftover topic harms no later run
            future.result(30.0)


def _slug(name: str) -> str:
    return name.replace(" ", "-")
