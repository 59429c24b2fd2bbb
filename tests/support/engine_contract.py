"""The Engine protocol's promises as a test suite: subclass ``EngineContract`` per engine.

Handlers are :mod:`recording`'s (every call appended to a file, so process-engine workers
are observed like threads), built through ``build_engine`` exactly as a consumer builds
them. A new engine gets these tests by subclassing and setting ``engine`` (and the class
attributes saying which optional promises it makes).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import process_handlers
import pytest
import recording

from laneway.config import ConsumerConfig
from laneway.engines.attempts import AttemptHook
from laneway.engines.base import Completions, Engine
from laneway.engines.factory import build_engine
from laneway.options import Ordering
from laneway.types import Failure, Message

WAIT_S = 30.0


def workload(count: int, keys: int = 20, partitions: int = 4, value: bytes = b"") -> list[Message]:
    """``count`` messages over ``keys`` keys (key k on partition k % partitions), offsets in
    order per partition; ``value`` is the recording handler's work in ms (or b"fail")."""
    offsets = [0] * partitions
    out = []
    for i in range(count):
        key = i % keys
        p = key % partitions
        out.append(Message("t", p, offsets[p], f"k{key}".encode(), value))
        offsets[p] += 1
    return out


def settle(
    completions: Completions, expected: int, timeout: float = WAIT_S
) -> tuple[list[Message], list[Failure]]:
    """Finished and failed messages until ``expected`` came back or ``timeout`` passed."""
    finished: list[Message] = []
    failed: list[Failure] = []
    deadline = time.monotonic() + timeout
    while len(finished) + len(failed) < expected and time.monotonic() < deadline:
        completions.wait(0.05)
        more, bad = completions.take()
        finished += more
        failed += bad
    return finished, failed


def positions(messages: Sequence[Message]) -> set[tuple[int, int]]:
    return {(m.partition, m.offset) for m in messages}


class EngineContract:
    """What every engine promises: each message reported exactly once, lanes in order and
    never overlapping, at most ``concurrency`` handlers at once, failures reported with
    their error, cancel returning only unstarted messages, hooks around every attempt."""

    engine: ClassVar[str]
    concurrency: ClassVar[int | None] = 4
    """``None``: the engine's default (the sync engine runs one at a time)."""

    @pytest.fixture(autouse=True)
    def record_dir(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        """Where the recording handler writes (spawned workers inherit the variable)."""
        monkeypatch.setenv(recording.RECORD_DIR, str(tmp_path))
        return tmp_path

    @pytest.fixture
    def engines(self) -> Iterator[list[Engine]]:
        built: list[Engine] = []
        yield built
        for engine in built:
            engine.close(5.0)

    def start(
        self,
        engines: list[Engine],
        ordering: Ordering = Ordering.KEY,
        max_retries: int = 0,
        hooks: Sequence[AttemptHook] = (),
        handler: str = "handle",
    ) -> tuple[Engine, Completions]:
        config = ConsumerConfig.from_options(
            {
                "engine": self.engine,
                "ordering": ordering,
                "concurrency": self.concurrency,
                "max_retries": max_retries,
                "retry_backoff": 0.001,
            }
        )
        module = process_handlers if handler.startswith("fail_first") else recording
        function = getattr(module, handler + ("_async" if self.engine == "async" else ""))
        engine = build_engine(config, function, threading.Event(), hooks=hooks)
        engines.append(engine)
        completions = Completions()
        engine.start(completions)
        return engine, completions

    @pytest.mark.parametrize("ordering", list(Ordering))
    def test_every_message_once_in_lane_order_within_concurrency(
        self, ordering: Ordering, engines: list[Engine], record_dir: Path
    ) -> None:
        engine, completions = self.start(engines, ordering)
        batch = workload(1_000, value=b"0.3")
        for i in range(0, len(batch), 300):
            engine.submit(batch[i : i + 300])
        done, failed = settle(completions, len(batch))
        assert not failed
        assert len(done) == len(batch) and positions(done) == positions(batch)
        calls = recording.read_calls(record_dir)
        assert recording.duplicates(calls) == 0
        assert recording.order_violations(calls, ordering.value) == []
        limit = self.concurrency or 1
        assert recording.peak_concurrency(calls) <= limit
        if limit > 1:
            assert recording.peak_concurrency(calls) >= 2, "work should overlap"
        assert engine.in_flight == 0

    def test_a_failing_handler_is_reported_as_a_failure_after_its_retries(
        self, engines: list[Engine]
    ) -> None:
        engine, completions = self.start(engines, max_retries=1)
        batch = [Message("t", 0, i, b"k", b"fail" if i == 3 else b"") for i in range(6)]
        engine.submit(batch)
        done, failed = settle(completions, len(batch))
        assert [f.message.offset for f in failed] == [3]
        assert failed[0].error_type == "ValueError"
        assert failed[0].error_message == "refused offset 3"
        assert failed[0].attempts == 2
        assert sorted(m.offset for m in done) == [0, 1, 2, 4, 5]

    def test_cancel_returns_only_messages_that_did_not_start(
        self, engines: list[Engine], record_dir: Path
    ) -> None:
        engine, completions = self.start(engines, Ordering.PARTITION)
        batch = workload(400, keys=4, partitions=2, value=b"1")
        engine.submit(batch)
        time.sleep(0.05)
        dropped = engine.cancel([("t", 0)])
        done, failed = settle(completions, len(batch) - len(dropped))
        assert not failed
        assert all(m.partition == 0 for m in dropped)
        assert not positions(done) & positions(dropped), "a cancelled message also ran"
        assert positions(done) | positions(dropped) == positions(batch)
        ran = {(c.partition, c.offset) for c in recording.read_calls(record_dir)}
        assert not ran & positions(dropped)

    def test_hooks_wrap_every_attempt(self, engines: list[Engine], tmp_path: Path) -> None:
        # A topic per engine: fail_first_two_attempts counts attempts per process and position.
        hook = process_handlers.CountAttempts(str(tmp_path / "attempts"))
        engine, completions = self.start(
            engines, max_retries=2, hooks=[hook], handler="fail_first_two_attempts"
        )
        batch = [Message(f"hooks-{self.engine}", 0, i, b"k%d" % i, b"") for i in range(5)]
        engine.submit(batch)
        done, failed = settle(completions, len(batch))
        assert not failed and positions(done) == positions(batch)
        seen: Counter[tuple[int, str]] = Counter()
        for path in tmp_path.glob("attempts.*"):
            for line in path.read_text().splitlines():
                offset, outcome = line.split()
                seen[(int(offset), outcome)] += 1
        expected = Counter({(o, "raised"): 2 for o in range(5)})
        expected.update({(o, "returned"): 1 for o in range(5)})
        assert seen == expected

    def test_running_shows_the_message_in_its_handler_and_since_when(
        self, engines: list[Engine]
    ) -> None:
        engine, completions = self.start(engines)
        slow = Message("t", 0, 0, b"slow", b"800")
        submitting = threading.Thread(target=engine.submit, args=([slow],))
        submitting.start()  # the sync engine runs the handler inside submit()
        time.sleep(0.2)
        engine.running()  # the process engine's clock: when a message is first seen
        time.sleep(0.3)
        [(message, since)] = engine.running()
        assert message == slow and time.monotonic() - since >= 0.25
        done, _ = settle(completions, 1)
        submitting.join(5)
        assert done == [slow] and engine.running() == []


class IndependentLanes(EngineContract):
    """For engines where a slow lane never holds up another lane (thread, async)."""

    def test_a_slow_lane_does_not_hold_up_the_others(self, engines: list[Engine]) -> None:
        engine, completions = self.start(engines)
        slow = Message("t", 0, 0, b"slow", b"1500")
        fast = [Message("t", 0, i + 1, f"k{i}".encode(), b"") for i in range(50)]
        engine.submit([slow, *fast])
        done, failed = settle(completions, len(fast), timeout=1.0)
        assert not failed and positions(done) == positions(fast)


class BoundedClose(EngineContract):
    """For engines whose ``close(timeout)`` returns in time while handlers are stuck (all
    but sync, which runs handlers inside ``submit``)."""

    def test_close_is_bounded_while_a_handler_is_stuck(self, engines: list[Engine]) -> None:
        engine, _ = self.start(engines, Ordering.UNORDERED)
        engine.submit([Message("t", 0, i, None, b"30000") for i in range(4)])
        time.sleep(0.2)
        began = time.monotonic()
        engine.close(0.5)
        assert time.monotonic() - began < 1.5
