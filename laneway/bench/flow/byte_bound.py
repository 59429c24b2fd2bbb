"""``laneway bench byte-bound``: peak RSS of a consumer over a backlog far larger than memory.

A Kafka topic is filled with ``messages`` values of ``size`` random bytes (1,000,000 x 10 KB
= 10 GB by default: a backlog no consumer could hold). A consumer in a child process (sync
engine, a handler that reads each value) with ``max_buffered_bytes`` consumes all of it
while this process samples the child's RSS every 20 ms. The report compares the peak with
what the bound promises: the child's RSS before consuming (interpreter, imports, the
librdkafka client: the *constant*), plus ``max_buffered_bytes`` (laneway's buffer), plus a
quarter of it (librdkafka's queue, see ``prefetch_settings``), plus one fetch response
(``fetch.max.bytes``, at least 1 MB).

It needs the disk for the whole backlog on the broker (``df`` first: 10 GB by default) and
deletes the topic at the end.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import asdict, dataclass
from multiprocessing.queues import Queue
from typing import Any

from laneway.bench.engines.targets import KafkaTarget, unique_name
from laneway.consumer import Consumer
from laneway.control.backpressure import PREFETCH_SHARE
from laneway.sources.kafka.client_config import PREFETCH_DEFAULTS, prefetch_settings
from laneway.sources.kafka.source import KafkaSource
from laneway.types import Message

PARTITIONS = 8
SAMPLE_S = 0.02


@dataclass
class ByteBoundResult:
    messages: int
    size: int
    max_buffered_bytes: int
    baseline_rss: int
    peak_rss: int
    promised: int
    """baseline + max_buffered_bytes * 1.25 + one fetch response."""
    consumed: int
    seconds: float
    produce_seconds: float
    peak_buffered_bytes: int

    @property
    def within(self) -> bool:
        return self.peak_rss <= self.promised and self.consumed == self.messages


class _ReadValue:
    """The handler: touches every value (as a real one would) and remembers the largest
    buffered-bytes figure the consumer reported."""

    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.peak = 0
        self.seen = 0

    def __call__(self, message: Message) -> None:
        self.seen += len(message.value or b"")
        if self.consumer is not None and message.offset % 1000 == 0:
            self.peak = max(self.peak, self.consumer.stats().buffered_bytes)


def _consume(
    bootstrap: str, topic: str, bound: int, messages: int, results: Queue[dict[str, int]]
) -> None:
    source = KafkaSource(bootstrap, unique_name("laneway-bench", "group"), [topic])
    handler = _ReadValue()
    consumer = Consumer(source, handler, engine="sync", max_buffered_bytes=bound,
                        handle_signals=False)  # fmt: skip
    handler.consumer = consumer
    results.put({"baseline": _rss()})
    stats = consumer.run(max_messages=messages, idle_timeout=60.0)
    results.put({"consumed": stats.handled, "peak_buffered": handler.peak})


def _rss() -> int:
    with open(f"/proc/{os.getpid()}/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _rss_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _produce(target: KafkaTarget, topic: str, messages: int, size: int) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": target.bootstrap_servers,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "compression.type": "none",
            "queue.buffering.max.kbytes": 262_144,
        }
    )
    payloads = [os.urandom(size) for _ in range(16)]  # random: nothing compresses
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, value=payloads[i % 16], partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(600.0):
        raise RuntimeError(f"producing {messages:,} messages to {topic!r} did not finish")


def measure(
    bootstrap: str, messages: int, size: int, bound: int, say: Any = print
) -> ByteBoundResult:
    target = KafkaTarget(bootstrap)
    target.check()
    topic = unique_name("laneway-bench", "bytes")
    target.create_topic(topic, PARTITIONS)
    try:
        say(f"producing {messages:,} x {size:,} B = {messages * size / 1e9:.1f} GB to {topic}")
        started = time.perf_counter()
        _produce(target, topic, messages, size)
        produce_s = time.perf_counter() - started
        say(f"produced in {produce_s:.1f} s; consuming with max_buffered_bytes={bound:,}")
        spawn = multiprocessing.get_context("spawn")
        results: Queue[dict[str, int]] = spawn.Queue()
        child = spawn.Process(target=_consume, args=(bootstrap, topic, bound, messages, results))
        child.start()
        baseline = results.get(timeout=120.0)["baseline"]
        started = time.perf_counter()
        peak = 0
        while child.is_alive():
            peak = max(peak, _rss_of(child.pid or 0))
            if not results.empty():
                break
            time.sleep(SAMPLE_S)
        outcome = results.get(timeout=3_600.0)
        seconds = time.perf_counter() - started
        child.join(60.0)
    finally:
        target.delete_topic(topic)
    derived = {**PREFETCH_DEFAULTS, **prefetch_settings(bound // PREFETCH_SHARE, {})}
    queue = derived["queued.max.messages.kbytes"] * 1024
    promised = baseline + bound + queue + derived["fetch.max.bytes"]
    return ByteBoundResult(messages, size, bound, baseline, peak, promised,
                           outcome["consumed"], seconds, produce_s,
                           outcome["peak_buffered"])  # fmt: skip


def report_lines(result: ByteBoundResult) -> list[str]:
    mb = 1e6
    return [
        f"backlog: {result.messages:,} x {result.size:,} B = "
        f"{result.messages * result.size / 1e9:.1f} GB "
        f"(produced in {result.produce_seconds:.0f} s)",
        f"consumed {result.consumed:,} in {result.seconds:.1f} s "
        f"({result.consumed / max(result.seconds, 1e-9):,.0f} msg/s, "
        f"{result.consumed * result.size / mb / max(result.seconds, 1e-9):,.0f} MB/s)",
        f"max_buffered_bytes {result.max_buffered_bytes / mb:,.1f} MB; largest buffered "
        f"bytes seen by the handler {result.peak_buffered_bytes / mb:,.1f} MB",
        f"child RSS before consuming (the constant) {result.baseline_rss / mb:,.1f} MB; "
        f"peak while consuming {result.peak_rss / mb:,.1f} MB "
        f"(+{(result.peak_rss - result.baseline_rss) / mb:,.1f} MB)",
        f"promised: constant + 1.25 x bound + one fetch = {result.promised / mb:,.1f} MB: "
        + ("WITHIN" if result.within else "EXCEEDED"),
    ]


def as_json(result: ByteBoundResult) -> dict[str, Any]:
    return {**asdict(result), "within": result.within}
