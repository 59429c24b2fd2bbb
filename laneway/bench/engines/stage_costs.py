"""Where a consumer's own time goes per message, stage by stage: the table of the benchmarking
guide ("Where the time goes").

    python -m laneway.bench.engines.stage_costs [--engines sync,thread,async,process]
        [--messages 300000] [--results] [--source embedded|kafka --bootstrap-servers B]
        [--rate 500] [--top N] [--json FILE]

The workload is ``laneway bench``'s trivial one (8 partitions, 100 keys, ordering by key):
the handler does nothing, or with ``--results`` returns one :class:`laneway.Produce` of the
message into ``<topic>.out``. Each engine, and the bare client loop (``laneway bench``'s
``raw`` engine, :mod:`laneway.bench.engines.raw`) for reference, runs twice, each time
over a fresh backlog:

* **Metered**, nothing attached: the CPU seconds per message of the consumer's Python
  threads — the process's CPU time during ``Consumer.run`` (every thread), plus its
  process-engine workers' from their first message on (their start-up is not per-message
  work), less the client library's own threads (librdkafka's ``rdk:`` threads, which fetch
  in parallel; printed apart as *client threads*).
* **Sampled**: ``py-spy record --gil --nonblocking`` attached to the process and its
  workers: ``--rate`` times a second, the stack of the thread holding the GIL in each
  process, read without stopping it. Each counted sample is given to a stage (below); a
  stage's *share* is its samples over all counted ones, its *us/msg* that share of the
  metered CPU per message. CPU spent outside Python (system calls, C code that released
  the GIL, handing the GIL over) is in the total and so spread over the stages in
  proportion. ``--rate 0`` only meters.

Why a sampler: the functions on the per-message path take tens to hundreds of nanoseconds
each, about what a deterministic profiler (cProfile) adds to every call, so it would
inflate the stages with the most calls; callgrind counts the interpreter's instructions,
not Python functions' (Python 3.11 has no perf map). A sampler adds nothing per call; py-spy
runs in its own process, which on a 2-core machine takes part of a core (hence the total
from the run without it).

Counted samples: a main thread inside ``Consumer.run`` (``RawLoop.run``, a process worker's
serving loop), and every other thread with a laneway frame (engine threads, the process
engine's reader, the stall watch). A sample's stage is that of its innermost laneway frame,
by module (time in C code and the standard library counts for the laneway code that called
it), unless a frame further out says otherwise; the first rule that matches wins:

* *commit*: anything under ``ControlPlane._commit_or_warn``; ``sources/kafka/commits``.
* *produce*: anything under ``producing/*`` or a source's ``producer`` or ``transactions``
  module; the bare loop's writes.
* *tally/stats*: anything under ``ControlPlane._sample``; ``control/tally``, ``backlog``,
  ``stalls``, ``stats``, ``metrics``, ``observability/*``.
* *fetch*: ``sources/*`` (the client's or the embedded log's poll, building each Message),
  ``types``; the bare Kafka loop's ``consume()`` line.
* *lane assignment*: ``engines/lanes``, ``engines/process/placement``.
* *dispatch*: ``engines/sync``, ``thread``, ``async_engine`` (and asyncio's loop under it),
  ``event_loops``, ``engines/process/*`` but ``reply``, ``rows`` and ``revocable``
  (batching, pickling and pipes, on both sides).
* *handler call/completion*: the rest of ``engines/*`` (invoker, attempts, ``Completions``,
  admission, circuit), ``process/reply``, ``rows`` and ``revocable`` (a worker running a
  batch's rows), ``results``, ``retry``, the handler itself.
* *offset tracking*: ``offsets/*``.
* *control loop*: any other laneway module (``control/plane``, ``backpressure``,
  ``stopping``, ``codecs``, ``consumer``).
* *loop bookkeeping* (the bare loop only): recording each message (``raw``, ``workloads``).

The compiled core (:mod:`laneway.compiled`: offset tracking, lanes and claims) has no
Python frames for py-spy to see, so with it its time counts in the stage of the Python code
calling it (offset tracking mostly in the control loop's and dispatch's). The machine line
says which code ran; ``LANEWAY_PURE_PYTHON=1`` runs the Python source and shows every
stage apart.

Tuning: ``--messages`` sets how many samples a stage gets (a share p from n samples is good
to about ``sqrt(p / n)``); compare engines within one run, since a shared machine drifts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laneway import compiled
from laneway.bench.engines.cpu_meter import CpuMeter
from laneway.bench.engines.harness import frozen_heap
from laneway.bench.engines.pipelines import output_topic
from laneway.bench.engines.scenarios import concurrency_for
from laneway.bench.engines.stack_samples import (
    Sampler,
    py_spy_version,
)
from laneway.bench.engines.stage_table import RAW, EngineCost, render
from laneway.bench.engines.targets import (
    BenchSetupError,
    EmbeddedTarget,
    KafkaTarget,
    Prepared,
    Target,
)
from laneway.bench.reporting.rows import machine_line
from laneway.consumer import Consumer
from laneway.options import EngineKind, Ordering
from laneway.results import Produce
from laneway.types import Message

ENGINES = ("sync", "thread", "async", "process")
PARTITIONS, KEYS = 8, 100
DRAIN_TIMEOUT_S = 30.0


def handle(message: Message) -> None:
    """The trivial handler: nothing to do."""


async def handle_async(message: Message) -> None:
    """The trivial handler of the async engine."""


class Results:
    """The trivial handler with ``--results``: the message, as is, into ``topic``."""

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def __call__(self, message: Message) -> Produce:
        return Produce(self.topic, message.value, message.key)


class AsyncResults:
    """:class:`Results` for the async engine."""

    def __init__(self, topic: str) -> None:
        self.topic = topic

    async def __call__(self, message: Message) -> Produce:
        return Produce(self.topic, message.value, message.key)


@dataclass
class Settings:
    """What every run of one table shares."""

    target: Target
    messages: int
    results: bool
    rate: int


def _handler(engine: str, out: str | None) -> Callable[..., Any]:
    if out is None:
        return handle_async if engine == "async" else handle
    return AsyncResults(out) if engine == "async" else Results(out)


def measure(settings: Settings, engine: str) -> EngineCost:
    """``engine`` (or ``raw``) metered, then sampled, each over a fresh backlog."""
    cost = _once(settings, engine, None)
    if settings.rate:
        sampler = Sampler(settings.rate)
        _once(settings, engine, sampler)
        cost.samples = sampler.counts
    return cost


def _once(settings: Settings, engine: str, sampler: Sampler | None) -> EngineCost:
    target = settings.target
    prepared = target.prepare("stage-costs", PARTITIONS, settings.messages, KEYS)
    try:
        out = output_topic(prepared.topic) if settings.results else None
        if out is not None:
            target.create_output(prepared, out)
        if engine == RAW:
            run = _bare(target, prepared, out)
        else:
            run = _consumer(engine, prepared, out, target)
        sampling = sampler if sampler is not None else contextlib.nullcontext()
        with frozen_heap(), sampling, CpuMeter(run.started) as meter:
            handled, elapsed = run.execute()
        if handled != prepared.produced:
            raise RuntimeError(f"{engine}: handled {handled} of {prepared.produced} messages")
        python = meter.process - meter.client + meter.workers
        return EngineCost(engine, handled, python, elapsed, meter.client, meter.workers)
    finally:
        target.cleanup(prepared)


@dataclass
class _Run:
    """How to run one engine: ``execute()`` returns the messages handled and the seconds
    taken; ``started()`` says whether the first message was handled."""

    execute: Callable[[], tuple[int, float]]
    started: Callable[[], bool]


def _bare(target: Target, prepared: Prepared, out: str | None) -> _Run:
    loop = target.raw_loop(prepared, prepared.produced, out)

    def execute() -> tuple[int, float]:
        result = loop.run()
        return len(result.records), result.elapsed

    return _Run(execute, lambda: loop.count > 0)


def _consumer(engine: str, prepared: Prepared, out: str | None, target: Target) -> _Run:
    kind = EngineKind(engine)
    consumer = Consumer(
        target.source(prepared),
        _handler(engine, out),
        engine=kind,
        ordering=Ordering.KEY,
        concurrency=None if kind is EngineKind.SYNC else concurrency_for(engine, None),
        drain_timeout=DRAIN_TIMEOUT_S,
        handle_signals=False,
    )

    def execute() -> tuple[int, float]:
        stats = consumer.run(max_messages=prepared.produced)
        return stats.processed, stats.elapsed

    return _Run(execute, lambda: consumer.stats().handled > 0)


def machine(rate: int) -> str:
    """The machine line printed above the table, with the sampler."""
    sampler = f"py-spy {py_spy_version()} at {rate} Hz" if rate else "not sampled"
    if rate and compiled.active():
        sampler += " (the compiled core's time counts in its callers' stages)"
    return f"{machine_line()}; {sampler}"


def _engines(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in ENGINES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"--engines {text!r}: {', '.join(unknown) or 'none named'} "
            f"(choose from {','.join(ENGINES)})"
        )
    return names


def _positive(text: str) -> int:
    return _whole(text, 1)


def _whole(text: str, minimum: int = 0) -> int:
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        what = "a positive" if minimum else "a non-negative"
        raise argparse.ArgumentTypeError(f"{text!r} is not {what} whole number")
    return value


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(
        prog="python -m laneway.bench.engines.stage_costs",
        description="Where a consumer's own time goes per message, stage by stage (py-spy).",
    )
    made.add_argument("--engines", type=_engines, default=list(ENGINES))
    made.add_argument("--messages", type=_positive, default=300_000)
    made.add_argument("--results", action="store_true", help="handler returns one Produce")
    made.add_argument("--source", choices=("embedded", "kafka"), default="embedded")
    made.add_argument("--bootstrap-servers", help="the broker of --source kafka")
    made.add_argument("--rate", type=_whole, default=500, help="samples per second (0: meter only)")
    made.add_argument(
        "--top", type=_whole, default=0, help="also print each engine's N busiest functions"
    )
    made.add_argument("--json", type=Path, help="write every figure to this file")
    return made


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        _main(args)
    except (BenchSetupError, RuntimeError) as error:  # no broker, no py-spy, a lost message
        raise SystemExit(f"stage_costs: {error}") from error


def _main(args: argparse.Namespace) -> None:
    target: Target
    if args.source == "kafka":
        if not args.bootstrap_servers:
            parser().error("--source kafka needs --bootstrap-servers HOST:PORT")
        kafka = KafkaTarget(args.bootstrap_servers, topic_prefix="laneway-stage-costs")
        kafka.check()
        target = kafka
    else:
        target = EmbeddedTarget()
    settings = Settings(target, args.messages, args.results, args.rate)
    line = machine(args.rate)
    raw = measure(settings, RAW)
    costs = [measure(settings, engine) for engine in args.engines]
    workload = "handler returns one Produce" if args.results else "handler does nothing"
    where = "embedded log" if args.source == "embedded" else f"Kafka {args.bootstrap_servers}"
    title = (
        f"{where}, trivial ({workload}), {args.messages:,} messages, {PARTITIONS} partitions, "
        f"{KEYS} keys\n{line}"
    )
    print(render(title, costs, raw, args.top))
    if args.json is not None:
        figures = {
            "source": args.source,
            "results": args.results,
            "machine": line,
            "engines": [c.as_dict() for c in costs],
            "raw": raw.as_dict(),
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
