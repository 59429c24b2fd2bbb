"""Exactly-once after a SIGKILL: how soon ``read_committed`` readers see new results.

A member killed with a transaction open leaves it open on the broker, and a
``read_committed`` reader sees nothing of a partition past that transaction's first record
until it ends (the last stable offset stays put). It ends when a producer with the same
``transactional.id`` initialises (fencing the dead one), or when the broker aborts it for
being older than ``transaction.timeout.ms`` (checked every 10 s). Before laneway chose its
defaults this took 39-60 s (librdkafka's 60 s timeout, and a new ``transactional.id`` per
process).

Here inputs arrive every 20 ms, so a transaction is always open; after the kill the test
checks that one was left open, restarts the consumer as a supervisor would, and measures
until the reader sees the result of an input produced after the kill. With laneway's
defaults alone (a new process, a new id: the 10 s timeout ends it) that is under 20 s;
``laneway run --members 2`` restarts the killed member in its slot with its
``transactional.id``, which ends the transaction as soon as the member is back.
The figures are printed (``pytest -s``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import kafka_helpers
import psutil
import pytest
from chaos_harness import CLASSIC_GROUP, wait_until
from checkout import SUPPORT
from confluent_kafka import Consumer, Producer, TopicPartition

pytestmark = [pytest.mark.kafka, pytest.mark.timing]

PACE = 0.02
"""Seconds between two inputs."""
VISIBLE_WITHIN = 20.0
"""The goal: new results visible this soon after the restart, with default settings."""
FENCED_WITHIN = 9.0
"""A restarted member that fences its predecessor ends the open transaction sooner than
the broker's timeout could (10 s after the transaction began, at best 9 s after the kill)."""
CHILD = SUPPORT / "results_child.py"
HANDLER = """
import os

import laneway


def handle(message):
    pid = str(os.getpid()).encode()
    return laneway.Produce(os.environ["RESULTS_TOPIC"], message.value, message.key, [("pid", pid)])
"""


class Flow:
    """Inputs ``0, 1, 2, ...`` into ``topic`` every ``PACE`` s, and a ``read_committed``
    reader of ``out`` noting when each input's result became visible (and when results of
    each writer, by the ``pid`` header ``laneway run``'s handler adds, were last seen)."""

    def __init__(self, bootstrap: str, topic: str, out: str) -> None:
        self.bootstrap, self.topic, self.out = bootstrap, topic, out
        self.produced: dict[int, float] = {}
        self.visible: dict[int, float] = {}
        self.writers: dict[int, float] = {}
        self.duplicates = 0
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._read, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _produce(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 0}
        )
        number = 0
        while not self._stop.is_set():
            producer.produce(self.topic, str(number).encode(), f"key-{number % 16}".encode())
            producer.poll(0)
            self.produced[number] = time.monotonic()
            number += 1
            time.sleep(PACE)
        producer.flush(10.0)

    def _read(self) -> None:
        reader = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": kafka_helpers.unique_name("results-reader"),
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 50,
            }
        )
        reader.subscribe([self.out])
        try:
            while not self._stop.is_set():
                for record in reader.consume(500, 0.05):
                    if record.error() is None:
                        number = int(record.value() or b"-1")
                        if number in self.visible:
                            self.duplicates += 1
                        self.visible.setdefault(number, time.monotonic())
                        pid = dict(record.headers() or []).get("pid")
                        if pid:
                            self.writers[int(pid)] = time.monotonic()
        finally:
            reader.close()

    def mid_transaction(self) -> None:
        """Wait until results flow, then half a commit interval past a commit: a
        transaction with results in it is open."""
        assert wait_until(lambda: len(self.visible) >= 100, 60.0), "no results before the kill"
        count = len(self.visible)
        assert wait_until(lambda: len(self.visible) > count, 10.0), "no commit"
        time.sleep(0.5)

    def first_visible_after(self, moment: float) -> float | None:
        """When the first result of an input produced after ``moment`` became visible."""
        visible = self.visible
        after = [
            visible[n] for n, at in list(self.produced.items()) if at > moment and n in visible
        ]
        return min(after, default=None)

    def open_transaction_left(self) -> bool:
        """Whether ``out`` holds records no transaction has ended yet (its high watermark
        is above its last stable offset)."""
        ends = []
        for level in ("read_uncommitted", "read_committed"):
            consumer = Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": kafka_helpers.unique_name("watermarks"),
                    "isolation.level": level,
                }
            )
            try:
                ends.append(consumer.get_watermark_offsets(TopicPartition(self.out, 0), 10)[1])
            finally:
                consumer.close()
        return ends[0] > ends[1]

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30.0)


@pytest.fixture
def topics(kafka_bootstrap: str) -> Iterator[tuple[str, str]]:
    topic = kafka_helpers.unique_name("eos-restart")
    kafka_helpers.create_topic(kafka_bootstrap, topic, 2)
    kafka_helpers.create_topic(kafka_bootstrap, topic + ".out", 1)
    yield topic, topic + ".out"


def measure(flow: Flow, killed_at: float, restarted_at: float, what: str) -> float:
    """Seconds from the restart until a result of an input produced after the kill showed."""
    assert wait_until(
        lambda: flow.first_visible_after(killed_at) is not None, 90.0, interval=0.1
    ), f"{what}: no new result became visible"
    seen = flow.first_visible_after(killed_at)
    assert seen is not None
    print(
        f"{what}: new results visible {seen - restarted_at:.1f} s after the restart "
        f"({seen - killed_at:.1f} s after the kill)"
    )
    return seen - restarted_at


def test_default_settings_show_new_results_soon_after_a_sigkill_and_restart(
    kafka_bootstrap: str, topics: tuple[str, str]
) -> None:
    topic, out = topics
    settings = {
        "bootstrap": kafka_bootstrap,
        "group": kafka_helpers.unique_name("eos-restart-group"),
        "topic": topic,
        "out": out,
        "exactly_once": True,
        "commit_interval": 1.0,
        "max_buffered": 1_000,
        "kafka_config": CLASSIC_GROUP,
    }
    command = [sys.executable, str(CHILD), json.dumps(settings)]
    flow = Flow(kafka_bootstrap, topic, out)
    first = subprocess.Popen(command)
    second: subprocess.Popen[bytes] | None = None
    try:
        flow.mid_transaction()
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        killed_at = time.monotonic()
        assert flow.open_transaction_left(), "the kill left no transaction open"
        second = subprocess.Popen(command)
        elapsed = measure(flow, killed_at, time.monotonic(), "default transactional.id")
        assert elapsed < VISIBLE_WITHIN
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(60)
        flow.stop()
    assert flow.duplicates == 0, "a result became visible twice"


def test_laneway_run_members_restart_a_killed_member_in_its_slot(
    kafka_bootstrap: str, topics: tuple[str, str], tmp_path: Path
) -> None:
    topic, out = topics
    (tmp_path / "results_app.py").write_text(HANDLER)
    (tmp_path / "kafka.toml").write_text(
        "[kafka]\n"
        + "".join(f'"{key}" = {json.dumps(value)}\n' for key, value in CLASSIC_GROUP.items())
    )
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "RESULTS_TOPIC": out}
    group = kafka_helpers.unique_name("eos-members-group")
    supervisor = subprocess.Popen(
        [
            *(sys.executable, "-m", "laneway", "run", "results_app:handle"),
            *("--bootstrap-servers", kafka_bootstrap, "--group", group, "--topic", topic),
            *("--members", "2", "--exactly-once", "--config", str(tmp_path / "kafka.toml")),
        ],
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    )
    flow = Flow(kafka_bootstrap, topic, out)
    try:

        def children() -> set[int]:
            return {child.pid for child in psutil.Process(supervisor.pid).children()}

        assert wait_until(lambda: len(children()) == 2, 30.0), "the members did not start"
        members = children()

        def both_write() -> bool:
            recent = {pid for pid, at in flow.writers.items() if at > time.monotonic() - 2.0}
            return recent == members

        assert wait_until(both_write, 60.0, interval=0.1), "the members never both wrote"
        flow.mid_transaction()
        victim = psutil.Process(min(members))
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
        killed_at = time.monotonic()
        assert flow.open_transaction_left(), "the kill left no transaction open"

        def replaced() -> bool:
            return bool(children() - members)

        assert wait_until(replaced, 30.0, interval=0.05), "the member was not restarted"
        restarted_at = time.monotonic()
        elapsed = measure(flow, killed_at, restarted_at, "laneway run --members 2")
        assert elapsed < VISIBLE_WITHIN
        assert restarted_at - killed_at + elapsed < FENCED_WITHIN, "not fenced at restart"
    finally:
        supervisor.send_signal(signal.SIGTERM)
        try:
            supervisor.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(supervisor.pid, signal.SIGKILL)
            supervisor.wait(30)
        flow.stop()
    assert supervisor.returncode == 0
    assert flow.duplicates == 0, "a result became visible twice"
