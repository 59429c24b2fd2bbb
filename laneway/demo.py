"""``laneway demo``: one workload on the embedded log, consumed by every engine.

The workload is ``messages`` records over ``partitions`` partitions and ``keys`` keys,
each taking ``work_ms`` of simulated I/O (``time.sleep`` / ``asyncio.sleep``). The table
shows how the engines compare when handlers wait on I/O, and checks that each run
handled every message and committed the log's end.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass

from laneway.consumer import Consumer
from laneway.options import EngineKind
from laneway.sources.embedded.log import EmbeddedLog
from laneway.types import Message

WORK_MS_VARIABLE = "LANEWAY_DEMO_WORK_MS"
WORK_SECONDS = float(os.environ.get(WORK_MS_VARIABLE, "1")) / 1000.0
"""Simulated I/O per message, from the environment so process workers see it too."""


def wait_for_io(message: Message) -> None:
    time.sleep(WORK_SECONDS)


async def wait_for_io_async(message: Message) -> None:
    await asyncio.sleep(WORK_SECONDS)


@dataclass(frozen=True)
class DemoRow:
    engine: str
    messages: int
    runtime: float
    committed_all: bool

    @property
    def rate(self) -> float:
        return self.messages / self.runtime if self.runtime > 0 else 0.0


def run_engine(engine: str, messages: int, partitions: int, keys: int) -> DemoRow:
    log = EmbeddedLog()
    log.create_topic("demo", partitions=partitions)
    for i in range(messages):
        log.produce("demo", value=str(i).encode(), key=f"key-{i % keys}".encode())
    handler = wait_for_io_async if engine == "async" else wait_for_io
    concurrency = {"sync": None, "process": None}.get(engine, 128)
    consumer = Consumer(
        log.subscribe(["demo"], group=f"demo-{engine}"),
        handler,
        engine=EngineKind(engine),
        ordering="key",
        concurrency=concurrency,
    )
    started = time.perf_counter()
    stats = consumer.run(max_messages=messages)
    runtime = time.perf_counter() - started
    committed = {p: c.offset for p, c in log.committed(f"demo-{engine}", "demo").items()}
    log.close()
    return DemoRow(engine, stats.handled, runtime, committed == log.end_offsets("demo"))


def format_table(rows: list[DemoRow]) -> str:
    header = f"{'engine':<8} {'messages':>9} {'runtime s':>10} {'msg/s':>10}  committed"
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(
            f"{row.engine:<8} {row.messages:>9,} {row.runtime:>10.2f} {row.rate:>10,.0f}  "
            f"{'all' if row.committed_all else 'INCOMPLETE'}"
        )
    return "\n".join(lines)
