"""The autoscaling signal of a running consumer on the embedded log: ``GET /backlog`` on a
real socket, ``Consumer.backlog()`` and the backlog gauges, while one key holds a
partition's commit point (backlog < lag) and after it is let go. The expected figures come
from the log's own committed positions and ends."""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from metrics_recorder import Recorder

import laneway as lw
from laneway.metrics import Metric
from laneway.offsets.codec import decode
from laneway.service.health_server import HealthServer
from laneway.types import CommitPosition, Message

GROUP = "billing"


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def get_backlog(port: int) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/backlog", timeout=5) as reply:
        assert reply.status == 200
        body: dict[str, object] = json.loads(reply.read())
        return body


@pytest.fixture
def log() -> Iterator[lw.EmbeddedLog]:
    """``orders``: partition 0 a slow key at offset 0 then 9 other keys, partition 1 five."""
    embedded = lw.EmbeddedLog()
    embedded.create_topic("orders", partitions=2)
    embedded.produce("orders", b"held", key=b"slow", partition=0)
    for i in range(9):
        embedded.produce("orders", b"%d" % i, key=b"k%d" % i, partition=0)
    for i in range(5):
        embedded.produce("orders", b"%d" % i, key=b"x%d" % i, partition=1)
    yield embedded
    embedded.close()


@pytest.mark.parametrize("instrumented", [False, True], ids=["no-metrics", "metrics"])
def test_backlog_while_a_key_holds_the_commit_point(
    log: lw.EmbeddedLog, instrumented: bool
) -> None:
    release = threading.Event()

    def handle(message: Message) -> None:
        if message.key == b"slow":
            release.wait(30)

    recorder = Recorder()
    options: dict[str, object] = {"metrics": recorder} if instrumented else {}
    consumer = lw.Consumer(
        log.subscribe(["orders"], GROUP),
        handle,
        engine="thread",
        ordering="key",
        concurrency=8,
        commit_interval=0.05,
        handle_signals=False,
        **options,  # type: ignore[arg-type]
    )
    probes = HealthServer(consumer.health, 0, backlog=consumer.backlog)
    probes.start()
    running = threading.Thread(target=consumer.run)
    running.start()
    try:
        # Independently of laneway's figures: what the log says is committed and finished.
        def held_and_sampled() -> bool:
            positions = log.committed(GROUP, "orders")
            return (
                positions.get(0) is not None
                and len(decode(positions[0].metadata, positions[0].offset)) == 9
                and positions.get(1) == CommitPosition(5, "", 0)  # generation 0 of record 4
                and get_backlog(probes.port)["backlog"] == 1
            )

        wait_for(held_and_sampled, "every key but slow committed, and sampled")
        ends = log.end_offsets("orders")
        held = get_backlog(probes.port)
        assert ends == {0: 10, 1: 5}
        assert held["lag"] == 10 and held["backlog"] == 1  # Kafka's lag counts 9 done ones
        assert held["partitions"] == [
            {"topic": "orders", "partition": 0, "committed": 0, "end": 10, "lag": 10,
             "finished_beyond": 9, "backlog": 1},
            {"topic": "orders", "partition": 1, "committed": 5, "end": 5, "lag": 0,
             "finished_beyond": 0, "backlog": 0},
        ]  # fmt: skip
        rate, drain = held["rate"], held["drain_seconds"]
        assert isinstance(rate, float) and isinstance(drain, float)
        assert rate > 0  # 14 messages finished within the window
        assert drain == pytest.approx(1 / rate, rel=0.01, abs=0.001)  # both to 3 decimals
        assert consumer.backlog().backlog == 1
        if instrumented:
            gauges = recorder.gauges
            assert gauges[(Metric.BACKLOG, ("orders", "0"))] == 1
            assert gauges[(Metric.BACKLOG, ("orders", "1"))] == 0
            assert gauges[(Metric.CONSUMER_LAG, ("orders", "0"))] == 10
            assert math.isfinite(gauges[(Metric.DRAIN_SECONDS, ())])

        release.set()
        wait_for(lambda: get_backlog(probes.port)["lag"] == 0, "the slow key committed")
        done = get_backlog(probes.port)
        assert (done["backlog"], done["drain_seconds"]) == (0, 0.0)
        if instrumented:
            assert recorder.gauges[(Metric.BACKLOG, ("orders", "0"))] == 0
            assert recorder.gauges[(Metric.DRAIN_SECONDS, ())] == 0.0
    finally:
        release.set()
        consumer.stop()
        running.join(30)
        probes.stop()
