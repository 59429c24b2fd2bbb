"""Runs one planned benchmark run end to end and returns what it measured.

A run: create a topic and produce the backlog (not timed), build the recorded handler, start
the consumer (or the raw loop) under an optional pyinstrument profiler, watch it from a
helper thread (progress bar, ``--timeout``), then collect the records. Timing is the
consumer's own: ``ConsumerStats.elapsed`` of the stats ``run()`` returns, from the first
fetch to the final commit. Start-up (process pool start, group join, first fetch) is measured
apart: from the ``run()`` call to the first handler start.
"""

from __future__ import annotations

import contextlib
import gc
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from pyinstrument import Profiler
from pyinstrument.renderers import ConsoleRenderer
from rich.progress import Progress, TaskID

import laneway
from laneway.bench.engines.instrumentation import STATUS, instrument, status_page
from laneway.bench.engines.pipelines import (
    BATCH,
    BATCH_STATE,
    BULK_WORK,
    DEFAULT_BATCH_SIZE,
    EXACTLY_ONCE,
    PIPELINES,
    RESULTS,
    STATE,
    STATEFUL,
    AsyncBatchCounting,
    AsyncBatchHandler,
    AsyncCounting,
    AsyncTransform,
    BatchCounting,
    BatchHandler,
    Counting,
    Transform,
    changelog_topic,
    consumer_options,
    output_topic,
)
from laneway.bench.engines.raw import RawLoop
from laneway.bench.engines.recorder import (
    AsyncRecordedHandler,
    FileSink,
    MemorySink,
    Record,
    RecordedHandler,
    load_records,
)
from laneway.bench.engines.scenarios import CEILING, CLIENT_LOOPS, LANEWAY_ENGINE, RunSpec
from laneway.bench.engines.targets import Prepared, Target
from laneway.bench.engines.value_formats import deserializer
from laneway.bench.engines.workloads import (
    AsyncEchoRoundTrip,
    EchoRoundTrip,
    WorkSpec,
    make_async_work,
    make_sync_work,
)
from laneway.consumer import Consumer
from laneway.options import EventLoop, Ordering

OK, TIMEOUT, ERROR = "OK", "TIMEOUT", "ERROR"
WATCH_INTERVAL_S = 0.25
DRAIN_TIMEOUT_S = 5.0
"""How long a consumer stopped by ``--timeout`` may drain before it gives up."""


@dataclass
class Measurement:
    """The raw outcome of one run, before analysis."""

    spec: RunSpec
    status: str
    produced: int = 0
    records: list[Record] = field(default_factory=list)
    counted: int | None = None
    """Messages read, for a loop that keeps no records (``ceiling``)."""
    elapsed: float = 0.0
    startup: float | None = None
    wall: float = 0.0
    produce_s: float = 0.0
    commits: int = 0
    error: str | None = None
    profiles: list[str] = field(default_factory=list)
    other_cpu: float = 0.0


class Harness:
    """Runs specs against one target; owns the progress display and the profile directory."""

    def __init__(
        self,
        target: Target,
        progress: Progress,
        timeout: float,
        profile_dir: Path | None = None,
        echo_port: int = 0,
        event_loop: EventLoop = EventLoop.AUTO,
        batch_size: int = DEFAULT_BATCH_SIZE,
        value_format: str = "bytes",
    ) -> None:
        self.target = target
        self.value_deserializer = deserializer(value_format)
        self.batch_size = batch_size
        self.event_loop = event_loop
        self.progress = progress
        self.timeout = timeout
        self.profile_dir = profile_dir
        self.echo_port = echo_port

    def run(self, spec: RunSpec) -> Measurement:
        scenario, variant = spec.scenario, spec.variant
        label = f"{scenario.name} {variant.label} {spec.label}"
        if spec.repeat > 1:
            label += f" #{spec.repeat}"
        task = self.progress.add_task(label, total=scenario.messages)
        prepared: Prepared | None = None
        try:
            prepared = self.target.prepare(
                scenario.name, variant.partitions, scenario.messages, variant.keys, variant.spread
            )
            with frozen_heap(), _CpuWitness() as witness:
                if spec.engine in CLIENT_LOOPS:
                    result = self._run_raw(spec, prepared, task)
                else:
                    result = self._run_consumer(spec, prepared, task)
            result.produce_s = prepared.produce_s
            result.other_cpu = witness.other_share
            return result
        except Exception as error:  # one failed run must not end the whole benchmark
            produced = scenario.messages if prepared is None else prepared.produced
            reason = f"{type(error).__name__}: {error}"
            return Measurement(spec, ERROR, produced=produced, error=reason)
        finally:
            self.progress.remove_task(task)
            if prepared is not None:
                self.target.cleanup(prepared)

    def _run_raw(self, spec: RunSpec, prepared: Prepared, task: TaskID) -> Measurement:
        out = output_topic(prepared.topic) if spec.instrument == RESULTS else None
        if out is not None:
            self.target.create_output(prepared, out)
        count_only = spec.engine == CEILING
        loop: RawLoop = self.target.raw_loop(prepared, prepared.produced, out, count_only)
        watch = _Watch(lambda: loop.count, loop.stop, self._advance(task), self.timeout)
        started = time.monotonic_ns()
        with self._profiled(spec) as profiles, watch:
            result = loop.run()
        wall = (time.monotonic_ns() - started) / 1e9
        startup = None if result.first_ns is None else (result.first_ns - started) / 1e9
        status = TIMEOUT if watch.fired or result.timed_out else OK
        return Measurement(
            spec,
            status,
            produced=prepared.produced,
            records=result.records,
            counted=loop.count if count_only else None,
            elapsed=result.elapsed,
            startup=startup,
            wall=wall,
            profiles=profiles,
        )

    def _run_consumer(self, spec: RunSpec, prepared: Prepared, task: TaskID) -> Measurement:
        scenario = spec.scenario
        work_spec = WorkSpec(
            scenario.work, scenario.work_ms / 1000.0, scenario.cpu_iterations, self.echo_port
        )
        directory = tempfile.mkdtemp(prefix="laneway-bench-") if spec.engine == "process" else None
        sink = MemorySink() if directory is None else FileSink(directory)
        handler: Callable[..., object]
        closer: EchoRoundTrip | AsyncEchoRoundTrip | None = None
        twin = spec.instrument if spec.instrument in PIPELINES else ""
        out = output_topic(prepared.topic)
        if twin in (RESULTS, EXACTLY_ONCE):
            self.target.create_output(prepared, out)
        bulk = scenario.work in BULK_WORK
        if spec.engine == "async":
            async_work = make_async_work(work_spec)
            handler = AsyncRecordedHandler(async_work, sink)
            if twin == BATCH:
                handler = AsyncBatchHandler(async_work, sink, bulk)
            elif twin == BATCH_STATE:
                handler = AsyncBatchCounting(AsyncBatchHandler(async_work, sink, bulk))
            elif twin == STATE:
                handler = AsyncCounting(handler)
            elif twin:
                handler = AsyncTransform(handler, out)
            closer = async_work if isinstance(async_work, AsyncEchoRoundTrip) else None
        else:
            sync_work = make_sync_work(work_spec)
            handler = RecordedHandler(sync_work, sink)
            if twin == BATCH:
                handler = BatchHandler(sync_work, sink, bulk)
            elif twin == BATCH_STATE:
                handler = BatchCounting(BatchHandler(sync_work, sink, bulk))
            elif twin == STATE:
                handler = Counting(handler)
            elif twin:
                handler = Transform(handler, out)
            closer = sync_work if isinstance(sync_work, EchoRoundTrip) else None
        with contextlib.ExitStack() as stack:
            metrics = stack.enter_context(instrument(spec.instrument))
            options = consumer_options(twin, self.batch_size)
            if twin in STATEFUL:
                changelog = changelog_topic(prepared.topic)
                self.target.create_output(prepared, changelog, compacted=True)
                state_dir = stack.enter_context(tempfile.TemporaryDirectory())
                options["state"] = laneway.StateStore(state_dir, changelog=changelog)
            consumer = Consumer(
                self.target.source(prepared),
                handler,
                engine=LANEWAY_ENGINE[spec.engine],
                ordering=Ordering(spec.variant.ordering),
                concurrency=None if spec.engine == "baseline" else spec.concurrency,
                drain_timeout=DRAIN_TIMEOUT_S,
                handle_signals=False,
                event_loop=self.event_loop if spec.engine == "async" else EventLoop.AUTO,
                metrics=metrics,
                value_deserializer=self.value_deserializer,
                **options,
            )
            if spec.instrument == STATUS:
                stack.enter_context(status_page(consumer))
            return self._measure(spec, prepared, task, consumer, sink, directory, closer)

    def _measure(
        self,
        spec: RunSpec,
        prepared: Prepared,
        task: TaskID,
        consumer: Consumer,
        sink: MemorySink | FileSink,
        directory: str | None,
        closer: EchoRoundTrip | AsyncEchoRoundTrip | None,
    ) -> Measurement:
        watch = _Watch(
            lambda: consumer.stats().handled, consumer.stop, self._advance(task), self.timeout
        )
        started = time.monotonic_ns()
        try:
            with self._profiled(spec) as profiles, watch:
                stats = consumer.run(max_messages=prepared.produced)
            wall = (time.monotonic_ns() - started) / 1e9
            if isinstance(sink, MemorySink):
                records = sink.records()
            else:
                records = load_records(Path(sink.directory))
        finally:
            if closer is not None:
                closer.close()
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)
        first = min((r[5] for r in records), default=None)
        return Measurement(
            spec,
            TIMEOUT if watch.fired else OK,
            produced=prepared.produced,
            records=records,
            elapsed=stats.elapsed,
            startup=None if first is None else (first - started) / 1e9,
            wall=wall,
            commits=stats.commits,
            profiles=profiles,
        )

    def _advance(self, task: TaskID) -> Callable[[int], None]:
        def update(count: int) -> None:
            self.progress.update(task, completed=count)

        return update

    def _profiled(self, spec: RunSpec) -> _Profiled:
        return _Profiled(self.profile_dir, spec.name)


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Keep the bench's own objects out of the measured run's garbage collections.

    Everything alive before the run (imported modules such as matplotlib, the embedded
    log's pre-produced backlog, earlier results) is moved to the permanent generation, so
    a full collection during the run traverses only what the run allocates. Without this
    the consumer's throughput depended on what the bench had imported and kept (up to 4x
    on the trivial scenario).
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


_NOT_BUSY = frozenset({"idle", "iowait", "steal", "guest", "guest_nice"})
"""``cpu_times`` fields that are no process's work (guest time is already in ``user``)."""


class _CpuWitness:
    """Measures how much CPU *other* processes took while a run was measured.

    ``other_share`` is the machine's busy CPU time minus this process tree's (the bench,
    its process-engine workers, the echo server), over wall time x cores: 0 on an
    otherwise idle machine. A Kafka broker on the same machine counts as "other".
    """

    def __init__(self) -> None:
        self._me = psutil.Process()
        self.other_share = 0.0

    def _own(self) -> float:
        times = self._me.cpu_times()
        own = times.user + times.system + times.children_user + times.children_system
        for child in self._me.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child_times = child.cpu_times()
                own += child_times.user + child_times.system
        return float(own)

    @staticmethod
    def _busy() -> float:
        """CPU seconds the machine spent running processes (not idle, waiting or stolen)."""
        times: dict[str, float] = psutil.cpu_times()._asdict()
        return sum(v for k, v in times.items() if k not in _NOT_BUSY)

    def __enter__(self) -> _CpuWitness:
        self._started = time.monotonic()
        self._busy_at, self._own_at = self._busy(), self._own()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.monotonic() - self._started
        other = (self._busy() - self._busy_at) - (self._own() - self._own_at)
        capacity = wall * (psutil.cpu_count() or 1)
        self.other_share = max(0.0, other / capacity) if capacity > 0 else 0.0


class _Profiled:
    """Wraps a run in pyinstrument when a profile directory is set; collects the file names."""

    def __init__(self, directory: Path | None, name: str) -> None:
        self._directory = directory
        self._name = name
        self._profiler: Profiler | None = None
        self.files: list[str] = []

    def __enter__(self) -> list[str]:
        if self._directory is not None:
            self._profiler = Profiler(interval=0.001, async_mode="disabled")
            self._profiler.start()
        return self.files

    def __exit__(self, *exc: object) -> None:
        profiler = self._profiler
        if profiler is None or self._directory is None:
            return
        profiler.stop()
        self._directory.mkdir(parents=True, exist_ok=True)
        html = self._directory / f"{self._name}.html"
        text = self._directory / f"{self._name}.txt"
        html.write_text(profiler.output_html(), encoding="utf-8")
        text.write_text(profiler.output(_text_renderer()), encoding="utf-8")
        self.files.extend([str(html), str(text)])


def _text_renderer() -> ConsoleRenderer:
    """pyinstrument's text report, showing laneway's own frames even when laneway is
    installed in site-packages (which pyinstrument otherwise folds away as library code)."""
    package = re.escape(str(Path(laneway.__file__).resolve().parent))
    return ConsoleRenderer(
        unicode=True, color=False, processor_options={"show_regex": f"^{package}"}
    )


class _Watch:
    """A helper thread: reports progress and stops the run once ``timeout`` s have passed."""

    def __init__(
        self,
        count: Callable[[], int],
        stop: Callable[[], None],
        report: Callable[[int], None],
        timeout: float,
    ) -> None:
        self._count = count
        self._stop = stop
        self._report = report
        self._timeout = timeout
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="laneway-bench-watch", daemon=True)
        self.fired = False

    def __enter__(self) -> _Watch:
        self._deadline = time.monotonic() + self._timeout
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        while not self._done.wait(WATCH_INTERVAL_S):
            self._report(self._count())
            if time.monotonic() >= self._deadline:
                self.fired = True
                self._stop()
                return
