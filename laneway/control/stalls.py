"""StallWatch: notices messages whose handler has been running too long, from its own thread."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from laneway.config import ConsumerConfig
from laneway.engines.base import Engine
from laneway.logs import get_logger, key_clause
from laneway.options import STALL_EXIT_CODE, EngineKind, StallAction
from laneway.retry import RetryPolicy
from laneway.types import HotKey, Message, PartitionId, Stall

log = get_logger(__name__)

CHECK_EVERY = 1.0
"""Seconds between two looks at the engine's running messages (at most; a quarter of
``stall_timeout`` when that is shorter)."""


def attempts_bound(policy: RetryPolicy) -> float:
    """The longest a message can stay in its handler under ``policy`` when every attempt
    runs out its ``timeout``: all attempts plus the longest backoffs between them (0 when
    attempts are not bounded)."""
    if policy.timeout is None:
        return 0.0
    backoffs = sum(
        min(policy.backoff_max, policy.backoff * 2.0**retry) for retry in range(policy.max_retries)
    )
    return (policy.max_retries + 1) * policy.timeout + backoffs


def stall_advice(config: ConsumerConfig) -> str:
    """What to do about a stall, for the consumer's engine and its ``handler_timeout``.

    The sync and thread engines refuse ``handler_timeout`` (a thread cannot be
    interrupted); async and process take it, and once it is set a stall means either a
    ``stall_timeout`` below what retries of bounded attempts may take, or (async) a handler
    that blocks the event loop, which cancelling cannot stop."""
    engine, policy = config.engine, config.retry
    if engine in (EngineKind.SYNC, EngineKind.THREAD):
        where = "the control thread" if engine is EngineKind.SYNC else "a worker thread"
        return (
            f"It runs on {where} (engine={engine.value!r}), which cannot be interrupted, so "
            "handler_timeout is refused there: bound the blocking call inside the handler "
            "(a client or query timeout), or use engine='async' or 'process' with "
            "handler_timeout"
        )
    what = "cancels the attempt" if engine is EngineKind.ASYNC else "replaces the worker"
    if policy.timeout is None:
        return f"Set handler_timeout: engine={engine.value!r} {what} when an attempt runs past it"
    bound = attempts_bound(policy)
    if config.stall_timeout < bound:
        return (
            f"Each attempt is bounded by handler_timeout={policy.timeout:g} s, but with "
            f"max_retries={policy.max_retries} and their backoffs a message may take up to "
            f"{bound:g} s in all: raise stall_timeout above that, or lower max_retries"
        )
    if engine is EngineKind.ASYNC:
        return (
            f"With handler_timeout={policy.timeout:g} s set, the handler must be blocking the "
            "event loop (a blocking call in an async def cannot be cancelled): move it to "
            "asyncio.to_thread() or use an async client"
        )
    return (
        f"With handler_timeout={policy.timeout:g} s set, its worker should have been "
        "replaced already: look for worker restart errors in the log"
    )


@dataclass(frozen=True)
class InFlightReport:
    """One look at what the engine runs: the age of the oldest running message overall
    and per partition (seconds), the stalls among them, and per partition the messages
    that cannot start until a stalled call returns."""

    oldest: float = 0.0
    oldest_by_partition: dict[PartitionId, float] = field(default_factory=dict)
    stalls: tuple[Stall, ...] = ()
    waiting_by_partition: dict[PartitionId, int] = field(default_factory=dict)


class StallWatch:
    """Looks at the engine's running messages about once a second and reports each one in
    flight longer than ``timeout`` seconds as a WARNING (once per message), naming topic,
    partition, offset and age (the key only where :func:`~laneway.logs.show_keys` allows
    it), what cannot start until it returns (how many messages, of how many keys, on which
    partitions: see
    :meth:`~laneway.engines.base.Engine.waiting_behind`) and how many finished messages
    of its partition it holds uncommitted (``held_back``, from the latest backlog
    sample). :attr:`report` is the latest look, for ``stats()`` and metrics.

    With ``action=StallAction.EXIT`` the first stall also ends the process (exit code
    :data:`~laneway.options.STALL_EXIT_CODE`, no drain: a stuck thread cannot be drained).
    It runs on its own thread because the control thread may be the one that is stuck
    (the sync engine runs handlers on it). Nothing is interrupted: a thread cannot be,
    and ``handler_timeout`` (async and process engines) is what bounds an attempt. The
    age counts from the message's first attempt, retries and backoffs included, and for
    the process engine from when the watch first saw it running (within a second).
    ``advice`` ends each warning: what to do about it for this consumer (see
    :func:`stall_advice`, which :meth:`for_config` uses).
    """

    def __init__(
        self,
        engine: Engine,
        timeout: float,
        action: StallAction = StallAction.WARN,
        exit_process: Callable[[int], object] = os._exit,
        advice: str = "Bound the blocking call inside the handler.",
        finished_beyond: Callable[[], Mapping[PartitionId, int]] = dict,
        hot_keys: Callable[[], Sequence[HotKey]] = tuple,
    ) -> None:
        self._engine = engine
        self._finished_beyond = finished_beyond
        self._hot_keys = hot_keys
        self._timeout = timeout
        self._action = action
        self._exit = exit_process
        self._advice = advice
        self._interval = min(CHECK_EVERY, timeout / 4)
        self._warned: set[tuple[str, int, int]] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.report = InFlightReport()

    @classmethod
    def for_config(
        cls,
        engine: Engine,
        config: ConsumerConfig,
        finished_beyond: Callable[[], Mapping[PartitionId, int]] = dict,
        hot_keys: Callable[[], Sequence[HotKey]] = tuple,
    ) -> StallWatch:
        """The watch of a consumer with ``config``: its ``stall_timeout``, ``on_stall`` and
        the advice for its engine; ``finished_beyond``: the finished messages beyond each
        partition's commit point, and ``hot_keys``: the hottest keys, as last sampled."""
        return cls(
            engine,
            config.stall_timeout,
            config.on_stall,
            advice=stall_advice(config),
            finished_beyond=finished_beyond,
            hot_keys=hot_keys,
        )

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="laneway-stall-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def look(self, now: float | None = None) -> InFlightReport:
        """Look at the engine now; warn of new stalls; keep and return the report."""
        now = time.monotonic() if now is None else now
        running = self._engine.running()
        oldest: dict[PartitionId, float] = {}
        stalled: list[tuple[Message, float]] = []
        for message, since in running:
            age = max(0.0, now - since)
            pid = (message.topic, message.partition)
            oldest[pid] = max(oldest.get(pid, 0.0), age)
            if age >= self._timeout:
                stalled.append((message, age))
        stalls = self._stalls(stalled)
        waiting: dict[PartitionId, int] = {}
        for stall in stalls:
            for pid in stall.waiting.partitions:
                waiting[pid] = waiting.get(pid, 0) + stall.waiting.messages
        self._warn(stalls)
        self.report = InFlightReport(
            max(oldest.values(), default=0.0), oldest, tuple(stalls), waiting
        )
        if stalls and self._action is StallAction.EXIT:
            log.critical(
                "on_stall='exit': ending the process with exit code %d; unfinished messages "
                "are replayed by the next consumer",
                STALL_EXIT_CODE,
            )
            logging.shutdown()
            self._exit(STALL_EXIT_CODE)
        return self.report

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.look()

    def _stalls(self, stalled: list[tuple[Message, float]]) -> list[Stall]:
        """The stalled messages with what waits behind each and what each holds back."""
        if not stalled:
            return []
        behind = self._engine.waiting_behind([message for message, _ in stalled])
        beyond = self._finished_beyond()
        return [
            Stall(
                m.topic,
                m.partition,
                m.offset,
                m.key,
                age,
                waiting,
                beyond.get((m.topic, m.partition), 0),
            )
            for (m, age), waiting in zip(stalled, behind, strict=True)
        ]

    def _warn(self, stalls: list[Stall]) -> None:
        current = {(s.topic, s.partition, s.offset) for s in stalls}
        for stall in stalls:
            where = (stall.topic, stall.partition, stall.offset)
            if where in self._warned:
                continue
            log.warning(
                "the handler has been running for %.1f s on %s[%d]@%d%s, longer than "
                "stall_timeout=%g s; %s%s. %s",
                stall.seconds,
                stall.topic,
                stall.partition,
                stall.offset,
                key_clause(stall.key),
                self._timeout,
                held_up(stall),
                hot_now(self._hot_keys()),
                self._advice,
                extra={"topic": stall.topic, "partition": stall.partition, "offset": stall.offset},
            )
        self._warned = current


def hot_now(hot_keys: Sequence[HotKey]) -> str:
    """The hot keys in words, for a stall warning (counts only)."""
    if not hot_keys:
        return ""
    held = sum(1 for hot in hot_keys if hot.held_off)
    text = f"; the hottest key holds {hot_keys[0].buffered} message(s)"
    if held:
        text += f", {held} key(s) at max_buffered_per_key"
    return text


def held_up(stall: Stall) -> str:
    """What a stalled call holds up, in words (counts only: no key names)."""
    waiting = stall.waiting
    if waiting.messages:
        places = ", ".join(f"{topic}[{number}]" for topic, number in waiting.partitions)
        what = (
            f"{waiting.messages} message(s) of {waiting.keys} key(s) on {places} wait for it "
            f"(for {stall.seconds:.1f} s)"
        )
    else:
        what = "nothing is queued behind it"
    return (
        f"{what}; it holds its partition's commit point, with {stall.held_back} finished "
        "message(s) beyond it"
    )
