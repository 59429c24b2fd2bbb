"""Consumer: the public entry point that runs a handler over a source.

``Consumer.__init__`` is overloaded so that a type checker matches the handler to the
engine and to the deserializers before :class:`~laneway.errors.ConfigError` does at run
time; the overloads are in :mod:`laneway.consumer_signatures`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, cast

from laneway.config import ConsumerConfig
from laneway.consumer_signatures import ConsumerSignatures
from laneway.control.backlog import Backlog
from laneway.control.plane import ControlPlane
from laneway.engines.admission.gate import AsyncGate, ThreadGate, gate_for
from laneway.engines.factory import build_engine, limits_of
from laneway.engines.handler_checks import check_handler
from laneway.errors import AccessDeniedError, ConfigError, LanewayError
from laneway.gc_tuning import sized_for
from laneway.health import Health
from laneway.logs import get_logger
from laneway.observability.start import start_tracing
from laneway.options import EngineKind, EventLoop, seconds, whole_number
from laneway.serde.typed_handlers import check_fit, typed_handler
from laneway.signal_relay import SignalRelay
from laneway.sources.base import Source, WaitingSource
from laneway.sources.capabilities import check_source, engine_config
from laneway.state.keeper import StateKeeper, state_keeper
from laneway.stats import ConsumerStats

log = get_logger(__name__)

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
SAME_SIGNAL_S = 1.0
"""A signal this soon after the first is the same request, not a second one that aborts
the drain: a SIGTERM to a process group or a cgroup (systemd) reaches a ``laneway run
--members`` member both directly and forwarded by its supervisor."""


class Consumer(ConsumerSignatures):
    """Runs ``handler`` on every message of ``source``, in parallel, in order per lane.

    ``engine`` picks where handlers run (``sync``, ``thread``, ``async``, ``process``);
    ``ordering`` what must stay in order (``key``, ``partition``, ``unordered``; a
    source may allow fewer: a share group only ``unordered``);
    ``concurrency`` how many handlers run at once; ``max_buffered`` how many fetched
    messages may wait unfinished before the source is paused. Every option, its default
    and its tuning advice: :class:`laneway.config.ConsumerConfig`.

    A handler that raises is retried (``max_retries``, exponential ``retry_backoff`` with
    jitter, capped by ``retry_backoff_max``) while its key's lane waits; after the last
    attempt the message goes to ``on_failure(message, failure)`` if given, else to the
    dead-letter topic ``dead_letter_topic`` (default ``"{topic}.dlq"``, created on first
    use), and its offset counts as finished only once that succeeded. ``handler_timeout``
    bounds one attempt: the async engine cancels it, the process engine replaces the
    worker; threads cannot be interrupted, so sync and thread engines refuse the option.
    ``poison_threshold`` opens a key's circuit after that many final failures: its next
    messages go straight to dead letters for ``poison_cooldown`` seconds. ``event_loop``
    picks the async engine's own loop under :meth:`run` (uvloop when installed).

    Offsets are committed every ``commit_interval`` seconds, on revocation and on stop,
    and only up to the first unfinished message of each partition; finished offsets
    beyond it travel in the commit metadata so a restart skips them.

    With ``batch_size`` the handler is called with a list of up to that many messages
    (waiting up to ``batch_wait`` seconds to fill it). A handler may return
    :class:`laneway.Produce` records (or a list of them) to be written; a message counts
    as finished once they are acknowledged, or with ``exactly_once=True`` they are written
    and the offsets committed in one transaction (see :mod:`laneway.producing.result_writers`).
    With ``value_deserializer`` (``key_deserializer``) the handler gets decoded values
    (keys), e.g. ``serde.json(Order)`` for a ``Message[Order]``; a record that does not
    decode is dead-lettered without running. ``value_serializer`` writes the objects a
    ``Produce`` carries (see :mod:`laneway.serde`).
    A consumer runs once: create a new one (on a new source) to run again.
    """

    def _construct(
        self, source: Source, handler: Callable[..., Any], options: dict[str, Any]
    ) -> None:
        self.config = ConsumerConfig.from_options(options)
        self._capabilities = check_source(source, self.config)
        check_handler(
            handler,
            self.config.engine,
            self.config.batch_size is not None,
            stateful=self.config.state is not None,
        )
        config = self.config
        check_fit(handler, config.value_deserializer, config.key_deserializer, config.batch_size)
        self._source = source
        self._handler = handler
        self._stop = threading.Event()
        self._abort = threading.Event()
        self._signalled: float | None = None  # when the first signal came
        self._plane: ControlPlane | None = None
        self._gate: ThreadGate | AsyncGate | None = None
        self._ran = False
        self._state = "new"

    def run(
        self, max_messages: int | None = None, idle_timeout: float | None = None
    ) -> ConsumerStats:
        """Consume until ``stop()``, a signal, ``max_messages`` handled or ``idle_timeout``.

        Returns the final stats once in-flight work is drained (up to ``drain_timeout``)
        and finished offsets are committed. A drain that ends first (the timeout, a second
        signal, ``stop(drain=False)``) abandons what still runs: one ERROR names each
        message still in its handler, and ``abandoned`` in the stats counts them (their
        offsets stay uncommitted).
        """
        self._prepare(max_messages, idle_timeout)
        with self._signals_installed():
            return self._execute(max_messages, idle_timeout, None)

    async def run_async(
        self, max_messages: int | None = None, idle_timeout: float | None = None
    ) -> ConsumerStats:
        """:meth:`run` inside an event loop; with ``engine="async"`` handlers run on it."""
        if self.config.event_loop is not EventLoop.AUTO:
            raise ConfigError(
                f"event_loop={self.config.event_loop.value!r} applies to run(); under "
                "run_async() handlers run on the caller's loop (leave event_loop='auto')"
            )
        self._prepare(max_messages, idle_timeout)
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        if self.config.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, self._on_signal)
                    installed.append(sig)
        try:
            return await asyncio.to_thread(self._execute, max_messages, idle_timeout, loop)
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    def stop(self, *, drain: bool = True) -> None:
        """Ask a running consumer to stop gracefully. Safe from any thread or signal handler.

        With ``drain=False`` (what a second signal does) it does not wait for the
        handlers still running: they are abandoned, counted in ``abandoned`` of the stats
        ``run()`` returns, and their offsets stay uncommitted.
        """
        if not drain:
            self._abort.set()
        self._stop.set()
        if self._plane is not None:
            self._plane.completions.wake()

    def health(self) -> Health:
        """Whether the consumer is alive and ready (see :class:`laneway.health.Health`);
        safe to call from any thread, e.g. an HTTP probe's."""
        state = self._state
        live = state in ("starting", "running", "stopping")
        stats = ConsumerStats() if self._plane is None else self._plane.stats()
        stalled = stats.stalled
        denied = None if self._plane is None else self._plane.denied
        reason = ""
        if denied is not None and live:  # the run is ending: say why
            reason = str(denied)
        elif state != "running":
            reason = f"the consumer is {state}"
        elif stalled:
            worst = max(stalled, key=lambda s: s.seconds)
            waiting = sum(s.waiting.messages for s in stalled)
            reason = (
                f"{len(stalled)} message(s) in their handler longer than stall_timeout="
                f"{self.config.stall_timeout:g} s, the oldest {worst.topic}[{worst.partition}]"
                f"@{worst.offset} for {worst.seconds:.1f} s; {waiting} message(s) wait for them"
            )
        elif stats.not_durable:
            longest = max(stats.not_durable, key=lambda n: n.seconds)
            reason = (
                f"state is not durable: the changes of {len(stats.not_durable)} partition(s) "
                f"have not reached the changelog {longest.changelog} for up to "
                f"{longest.seconds:.0f} s ({longest.topic}[{longest.partition}]: {longest.error})"
            )
        elif self._capabilities.waits:  # e.g. topics the cluster does not have (yet)
            reason = cast(WaitingSource, self._source).waiting_for()
        return Health(live, live and not reason, state, reason, stalled, stats.restoring)

    def backlog(self) -> Backlog:
        """How much work is left in the partitions this consumer owns, and how fast it goes:
        a ``laneway.Backlog`` with ``backlog`` (the lag minus the offsets known finished
        beyond the commit points), ``lag``, ``rate`` (messages finished per second over the
        last 30 s), ``drain_seconds`` (``backlog / rate``) and ``partitions``; ``None`` for
        what a share group cannot know. Sampled about once a second; safe to call from any
        thread. Before the run: nothing owned, all zeros."""
        return Backlog() if self._plane is None else self._plane.backlog

    def stats(self) -> ConsumerStats:
        """A snapshot of counters, commits and latency; safe to call from any thread."""
        if self._plane is None:
            return ConsumerStats()
        stats = self._plane.stats()
        if self._gate is not None and self._gate.limit is not None:
            stats = dataclasses.replace(stats, concurrency_limit=self._gate.limit)
        return stats

    # -- internals ------------------------------------------------------------------

    def _prepare(self, max_messages: int | None, idle_timeout: float | None) -> None:
        if max_messages is not None:
            whole_number(max_messages, "max_messages", minimum=1)
        if idle_timeout is not None:
            seconds(idle_timeout, "idle_timeout")
        if self._ran:
            raise LanewayError("a Consumer runs once; create a new Consumer to run again")
        self._ran = True

    def _execute(
        self,
        max_messages: int | None,
        idle_timeout: float | None,
        loop: asyncio.AbstractEventLoop | None,
    ) -> ConsumerStats:
        self._state = "starting"
        tracing = start_tracing(self.config.tracing, self._source)
        hooks = [] if tracing is None else [tracing.hook]
        config = engine_config(self.config, self._capabilities)
        if config.engine is not EngineKind.PROCESS:  # process workers make their own
            self._gate = gate_for(limits_of(config), config.engine is EngineKind.ASYNC)
        keeper = None if config.state is None else state_keeper(config, self._source, bool(hooks))
        try:
            handler = self._engine_handler(config, keeper)
            engine = build_engine(config, handler, self._stop, loop, hooks, self._gate)
        except BaseException:
            if keeper is not None:
                keeper.close(False)
            raise
        plane = ControlPlane(
            self._source, self._capabilities, engine, self.config, self._stop, tracing, keeper
        )
        try:
            engine.start(plane.completions)
        except BaseException:
            self._state = "stopped"
            engine.close(0.0)
            self._source.close()
            raise
        self._plane = plane
        tune = self.config.tune_gc
        sizing = sized_for(self.config.max_buffered) if tune else contextlib.nullcontext()
        with sizing:
            self._run_plane(plane, keeper, max_messages, idle_timeout)
        return self.stats()

    def _engine_handler(self, config: ConsumerConfig, keeper: StateKeeper | None) -> Any:
        """What the engine calls: the handler with its decoding and, with a store, its state."""
        in_workers = config.engine is EngineKind.PROCESS
        batched = config.batch_size is not None
        if keeper is None:
            return typed_handler(
                self._handler,
                config.value_deserializer,
                config.key_deserializer,
                in_workers=in_workers,
                batched=batched,
            )
        return keeper.handler(
            self._handler,
            config.value_deserializer,
            config.key_deserializer,
            engine=config.engine,
            batched=batched,
        )

    def _run_plane(
        self,
        plane: ControlPlane,
        keeper: StateKeeper | None,
        max_messages: int | None,
        idle_timeout: float | None,
    ) -> None:
        try:
            self._source.open(plane)
            if keeper is not None:  # nothing is assigned before the first poll
                keeper.open()
            self._state = "running"
            plane.run(max_messages, idle_timeout)
        except AccessDeniedError as denial:
            plane.refused(denial)  # at once: not ready, one ERROR; the drain may take a while
            raise
        finally:
            self._state = "stopping"
            try:
                plane.shut_down(self._abort)
            except BaseException:
                self._close_source_after_failure()
                raise
            finally:
                self._state = "stopped"

    def _close_source_after_failure(self) -> None:
        """A shutdown that failed midway (say, a refused dead-letter write raised while it
        was flushing) may not have reached the source's close: close it anyway, so that a
        Kafka member leaves its group at once instead of holding its partitions until its
        session expires (closing twice is a no-op). What this close raises is logged; the
        shutdown's own error is the one the run ends with."""
        try:
            self._source.close()
        except Exception as error:  # the shutdown's own error is the one to raise
            log.debug("closing the source after a failed shutdown: %s", error)

    def _on_signal(self, signum: int | None = None, frame: FrameType | None = None) -> None:
        now = time.monotonic()
        echo = self._signalled is not None and now - self._signalled < SAME_SIGNAL_S
        if self._stop.is_set() and not echo:
            self._abort.set()
        if self._signalled is None:
            self._signalled = now
        self.stop()

    @contextlib.contextmanager
    def _signals_installed(self) -> Iterator[None]:
        if (
            not self.config.handle_signals
            or threading.current_thread() is not threading.main_thread()
        ):
            yield
            return
        # Not signal.signal(sig, self._on_signal): stopping takes a lock the interrupted
        # control loop (the main thread, with the sync engine) may be holding.
        with SignalRelay(_SIGNALS, self._on_signal):
            yield
