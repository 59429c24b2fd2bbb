"""Throughput of the process engine against a plain one-thread loop (not a pytest module).

Run from the repository root::

    .venv/bin/python tests/support/bench_process_engine.py [--repeat 3] [--workers 2] [--profile]

Scenarios: 200,000 no-op messages and 20,000 messages of 500 x sha256, 8 partitions x
100 keys, submitted in chunks of 1,000 (as a consumer's poll would), timed from the
first submit to the last completion (the pool is started beforehand). The best of
``--repeat`` runs is printed, since other work on the machine adds noise. ``--profile``
runs pyinstrument over the parent's reader thread for one no-op run.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable

import process_handlers as handlers

from laneway.engines import process
from laneway.engines.base import Completions
from laneway.options import Ordering
from laneway.types import Message

Handler = Callable[[Message], object]


def make_messages(count: int) -> list[Message]:
    return [
        Message("bench", i % 8, i // 8, b"key-%d" % (i // 8 % 100), b"v" * 100, (), 0)
        for i in range(count)
    ]


def plain_loop(handler: Handler, batch: list[Message]) -> float:
    started = time.perf_counter()
    for message in batch:
        handler(message)
    return len(batch) / (time.perf_counter() - started)


def engine_run(handler: Handler, ordering: Ordering, workers: int, batch: list[Message]) -> float:
    engine = process.ProcessEngine(handler, ordering, workers)
    completions = Completions()
    engine.start(completions)
    try:
        started = time.perf_counter()
        for i in range(0, len(batch), 1_000):
            engine.submit(batch[i : i + 1_000])
        done = 0
        deadline = time.monotonic() + 600
        while done < len(batch) and time.monotonic() < deadline:
            completions.wait(1.0)
            finished, failed = completions.take()
            done += len(finished) + len(failed)
        elapsed = time.perf_counter() - started
    finally:
        engine.close(10.0)
    assert done == len(batch), f"only {done} of {len(batch)} completed"
    return len(batch) / elapsed


def profile_reader(workers: int, batch: list[Message]) -> None:
    from pyinstrument import Profiler

    profilers: list[Profiler] = []
    original = process.ProcessEngine._run

    def profiled(self: process.ProcessEngine) -> None:
        profiler = Profiler(interval=0.0005)
        profilers.append(profiler)
        profiler.start()
        try:
            original(self)
        finally:
            profiler.stop()

    process.ProcessEngine._run = profiled  # type: ignore[method-assign]
    main = Profiler(interval=0.0005)
    main.start()
    rate = engine_run(handlers.noop, Ordering.KEY, workers, batch)
    main.stop()
    process.ProcessEngine._run = original  # type: ignore[method-assign]
    print(f"profiled no-op run: {rate:,.0f} msg/s\n--- submitting thread ---")
    print(main.output_text(show_all=False))
    print("--- reader thread ---")
    print(profilers[0].output_text(show_all=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, {args.workers} workers, best of {args.repeat}")
    if args.profile:
        profile_reader(args.workers, make_messages(200_000))
        return
    for name, handler, count in [
        ("no-op", handlers.noop, 200_000),
        ("500 x sha256", handlers.sha256_500, 20_000),
    ]:
        batch = make_messages(count)
        loop = max(plain_loop(handler, batch) for _ in range(args.repeat))
        print(f"{name:>13} {count:>7,} msgs  plain loop, one thread: {loop:>11,.0f} msg/s")
        for ordering in Ordering:
            rate = max(
                engine_run(handler, ordering, args.workers, batch) for _ in range(args.repeat)
            )
            print(
                f"{'':>13} {'':>12}  process {ordering.value:>10}: {rate:>11,.0f} msg/s"
                f"  ({rate / loop:.2f}x)"
            )
    print(f"active threads at exit: {threading.active_count()}")


if __name__ == "__main__":
    main()
