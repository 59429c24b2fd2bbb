"""The ``members`` scenario (seed 001): members of one group as processes, and the process
engine's workers inside one consumer, each with its per-member load and scaling figures.

**Members** (1, 2, 4, 8 by default) run on Kafka: a member is its own process, and only a
broker lets processes share a group. (The embedded log cannot: it lives in one process, and
its durable directory is locked by the process that opened it, with the group coordinator
inside that process.) Each member is a spawned process running a plain ``sync`` consumer
(``ordering="partition"``) in one fresh group. The bench waits until the group is stable
(every member owns its share of the partitions), then produces the backlog, the same
number to every partition, so that the run measures consuming, not joining. A member counts
what it handled and when; the configuration's runtime spans the first handler start to the
last handler end over all members.

**Workers** (1, 2, 4, 8 by default) of the ``process`` engine in one consumer, on whichever
log the bench runs on: the same backlog, per-worker counts from each worker process.

For both, ``scaling`` is msg/s over the 1-member (1-worker) msg/s and ``efficiency`` is
scaling / members. ``delivery`` counts distinct messages handled against those produced
(duplicates are reported apart). What the machine allows is measured in the same run: the
bare busy loop on the same number of messages in 1 and in 2 processes (``bare gain``), so
the 2-member scaling can be read against it (``of bare``).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

from laneway.bench.engines.ceilings import processes
from laneway.bench.engines.workloads import CpuSpin, encode_value
from laneway.bench.members.counts import Configuration, CountingBusy, collect
from laneway.consumer import Consumer
from laneway.sources.embedded.log import EmbeddedLog

COUNTS = (1, 2, 4, 8)
"""Members (and workers) per configuration."""
PARTITIONS = 8
MESSAGES = 10_000
WORK_MS = 1.0
STABLE_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 300.0
FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}


@dataclass
class MembersReport:
    """Everything the scenario measured, for the table, the JSON and the plot."""

    members: list[Configuration] = field(default_factory=list)
    workers: list[Configuration] = field(default_factory=list)
    bare_1: float = 0.0
    bare_2: float = 0.0
    note: str = ""

    @property
    def bare_gain(self) -> float:
        return self.bare_2 / self.bare_1 if self.bare_1 else 0.0

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "bare_gain": self.bare_gain}


def measure(
    bootstrap_servers: str | None,
    topic_prefix: str,
    counts: Sequence[int] = COUNTS,
    messages: int = MESSAGES,
    work_ms: float = WORK_MS,
    say: Callable[[str], None] = print,
) -> MembersReport:
    """Run every configuration; members only with a Kafka broker (see the module)."""
    report = MembersReport()
    seconds = work_ms / 1000.0

    def bare(count: int) -> None:
        """The bare loop in ``count`` processes, timed right before that configuration."""
        if count in (1, 2):
            tps = processes(CpuSpin(seconds), messages // 4, count)
            if count == 1:
                report.bare_1 = tps
            else:
                report.bare_2 = tps
            say(f"members: bare busy loop in {count} process(es): {tps:,.0f} msg/s")

    if bootstrap_servers is None:
        report.note = (
            "members need --bootstrap-servers: processes share a group only through a "
            "broker (the embedded log lives in one process); only the process engine's "
            "workers were measured"
        )
        say(report.note)
    else:
        for count in counts:
            bare(count)
            row = _members(bootstrap_servers, topic_prefix, count, messages, seconds)
            report.members.append(row)
            say(_line("members", row))
    for count in counts:
        if bootstrap_servers is None:
            bare(count)
        row = _workers(count, messages, seconds)
        report.workers.append(row)
        say(_line("workers", row))
    _scale(report.members)
    _scale(report.workers)
    return report


def _line(kind: str, row: Configuration) -> str:
    if row.error:
        return f"members: {row.count} {kind}: {row.error}"
    loads = ", ".join(f"{n:,}" for n in row.loads)
    return (
        f"members: {row.count} {kind}: {row.tps:,.0f} msg/s in {row.runtime_s:.2f} s, "
        f"loads {loads}, delivery {row.delivery}"
    )


def _scale(rows: list[Configuration]) -> None:
    base = next((r.tps for r in rows if r.count == 1 and r.tps > 0), 0.0)
    for row in rows:
        if base and row.tps:
            row.scaling = row.tps / base
            row.efficiency = row.scaling / row.count


def _workers(count: int, messages: int, seconds: float) -> Configuration:
    directory = Path(tempfile.mkdtemp(prefix="laneway-workers-"))
    try:
        log = EmbeddedLog()
        log.create_topic("members", partitions=PARTITIONS)
        for i in range(messages):
            log.produce("members", encode_value(i), partition=i % PARTITIONS)
        handler = CountingBusy(seconds, str(directory), "worker")
        consumer = Consumer(
            log.subscribe(["members"], "workers"),
            handler,
            engine="process",
            ordering="partition",
            concurrency=count,
            handle_signals=False,
        )
        consumer.run(max_messages=messages, idle_timeout=RUN_TIMEOUT_S)
        log.close()
        return collect("workers", count, directory, messages)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def member_main(
    bootstrap: str,
    topic: str,
    group: str,
    directory: str,
    index: int,
    seconds: float,
    assigned: Synchronized[int],
    progress: Synchronized[int],
    stop: Any,
) -> None:
    """One member process: a sync consumer in ``group`` until ``stop`` is set."""
    from laneway.sources.kafka.source import KafkaSource

    source = KafkaSource(bootstrap, group, [topic], FAST_GROUP)
    handler = CountingBusy(seconds, directory, f"member{index}")
    handler.progress = progress
    consumer = Consumer(source, handler, engine="sync", ordering="partition", handle_signals=False)

    def watch() -> None:
        while not stop.wait(0.02):
            assigned.value = len(consumer.stats().assigned)
        consumer.stop()

    threading.Thread(target=watch, daemon=True).start()
    consumer.run()


def _members(
    bootstrap: str, prefix: str, count: int, messages: int, seconds: float
) -> Configuration:
    from laneway.bench.engines.targets import KafkaTarget, unique_name

    target = KafkaTarget(bootstrap, prefix)
    topic = unique_name(prefix, "members")
    group = unique_name(prefix, "group")
    target.create_topic(topic, PARTITIONS)
    directory = Path(tempfile.mkdtemp(prefix="laneway-members-"))
    spawn = multiprocessing.get_context("spawn")
    stop = spawn.Event()
    assigned = [spawn.Value("i", 0) for _ in range(count)]
    progress = spawn.Value("q", 0)
    members = [
        spawn.Process(
            target=member_main,
            args=(
                bootstrap,
                topic,
                group,
                str(directory),
                i,
                seconds,
                assigned[i],
                progress,
                stop,
            ),
            daemon=True,
        )
        for i in range(count)
    ]
    error = None
    try:
        for member in members:
            member.start()
        share = max(1, PARTITIONS // count)

        def settled() -> bool:
            owned = [a.value for a in assigned]
            return bool(min(owned) >= share and sum(owned) == PARTITIONS)

        if not _wait(settled, STABLE_TIMEOUT_S):
            error = f"the group did not settle within {STABLE_TIMEOUT_S:.0f} s"
        else:
            target.produce_to_partitions(topic, messages, PARTITIONS)
            if not _wait(lambda: progress.value >= messages, RUN_TIMEOUT_S):
                error = f"not all handled within {RUN_TIMEOUT_S:.0f} s"
    finally:
        stop.set()
        for member in members:
            member.join(30.0)
            if member.is_alive():
                member.kill()
        with contextlib.suppress(Exception):
            target.delete_topic(topic)
    try:
        return collect("members", count, directory, messages, error)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _wait(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def print_report(console: Any, report: MembersReport) -> None:
    """The seed's tables: throughput, scaling and efficiency; then each load distribution."""
    from rich.table import Table

    for kind, rows in (
        ("members (processes, one group, Kafka)", report.members),
        ("process-engine workers (one consumer)", report.workers),
    ):
        if not rows:
            continue
        table = Table(title=f"members: {kind}", header_style="bold")
        for name in (
            "configuration",
            "msg/s",
            "scaling",
            "efficiency",
            "delivery",
            "runtime s",
            "load per member / worker",
        ):
            table.add_column(name, justify="left" if name.startswith(("conf", "load")) else "right")
        for row in rows:
            table.add_row(
                f"{row.count} {row.kind[:-1] if row.count == 1 else row.kind}",
                f"{row.tps:,.0f}",
                f"{row.scaling:.2f}x" if row.scaling else "-",
                f"{row.efficiency:.0%}" if row.efficiency else "-",
                row.delivery if not row.error else f"[red]{row.error}[/red]",
                f"{row.runtime_s:.2f}",
                ", ".join(f"{n:,}" for n in row.loads),
            )
        console.print(table)
    console.print(
        f"bare busy loop ({WORK_MS:g} ms CPU per message): {report.bare_1:,.0f} msg/s in 1 "
        "process, "
        f"{report.bare_2:,.0f} in 2: the machine gives {report.bare_gain:.2f}x for 2",
        highlight=False,
    )
    for kind, rows in (("members", report.members), ("workers", report.workers)):
        two = next((r for r in rows if r.count == 2 and r.scaling), None)
        if two and report.bare_gain:
            console.print(
                f"2 {kind}: scaling {two.scaling:.2f}x = {two.scaling / report.bare_gain:.2f} of "
                "the bare loop's 2-process gain",
                highlight=False,
            )
    if report.note:
        console.print(report.note, highlight=False)


def is_valid(report: MembersReport) -> bool:
    return all(row.error is None for row in report.members + report.workers)


def plot(report: MembersReport, directory: Path) -> Path:
    """``members.png``: scaling against members / workers, with the ideal line and the bare
    loop's 2-process gain (on 2 cores the curve flattens there: no cores are left)."""
    from matplotlib.figure import Figure

    from laneway.bench.reporting.plots import DPI, save, scaling_axes  # matplotlib: only when asked

    figure = Figure(figsize=(7.5, 4.8), dpi=DPI)
    ax = figure.add_subplot()
    counts = sorted({r.count for r in report.members + report.workers})
    ax.plot(counts, counts, ":", color="#999999", label="ideal (scaling = count)")
    for rows, label, color in (
        (report.members, "members (processes, Kafka)", "#1f77b4"),
        (report.workers, "process-engine workers", "#d62728"),
    ):
        points = [(r.count, r.scaling) for r in rows if r.scaling]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", label=label, color=color)
    if report.bare_gain:
        ax.axhline(
            report.bare_gain,
            color="#2ca02c",
            ls="--",
            label=f"bare loop, 2 processes ({report.bare_gain:.2f}x): the cores",
        )
    scaling_axes(ax, counts, "members / workers", "scaling (msg/s over 1)")
    ax.set_title(f"members: {MESSAGES:,} msgs x {WORK_MS:g} ms CPU, {os.cpu_count()} cores")
    directory.mkdir(parents=True, exist_ok=True)
    return save(figure, directory / "members.png")
