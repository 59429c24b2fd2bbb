"""The ``share`` bench scenario: a Kafka share group against a classic consumer group.

Two measurements on a Kafka >= 4.2 broker with ``share.version=1``:

* **members**: ``messages`` records of ``work_ms`` blocking work each, on 8 partitions,
  consumed by 1, 4 and 12 member processes (sync engine: one record at a time each), once
  as a share group (:class:`~laneway.sources.share.source.KafkaShareSource`) and once as a
  classic consumer group (:class:`~laneway.sources.kafka.source.KafkaSource`), which cannot use
  more members than partitions. The backlog is written after every member has joined (a
  share group: three heartbeats after the members are up; a classic group: once it is
  stable with every partition assigned), in record batches of ``fetch`` records, since a
  share group hands out whole batches; share members fetch ``fetch`` records at a time
  (``max.poll.records``). Runtime: produce start -> last record handled (wall clock).
* **trivial**: ``trivial_messages`` records with no work, read by a bare
  ``ShareConsumer`` loop and by a sync-engine :class:`~laneway.consumer.Consumer` on a
  share source (:mod:`laneway.bench.share.trivial`), both fetching ``trivial_fetch``
  records at a time, one after the other on the same topic (a fresh group each time),
  ``trivial_rounds`` times with the order swapped every round; the best round of each
  counts, and every round's msg/s is printed.

``--messages`` sets both ``messages`` and ``trivial_messages``; ``--work-ms`` sets
``work_ms``. One run with the defaults takes two to three minutes.

Goals printed with the results: the share source reaches 0.8 of the bare loop, and 12
share members finish the sleep workload 1.3x faster than the 8-partition classic group.
"""

from __future__ import annotations

import contextlib
import json
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.table import Table

from laneway.bench.engines.targets import BenchSetupError, KafkaTarget, unique_name
from laneway.bench.share.trivial import TrivialLoops, TrivialRow, best, fast_heartbeat

PARTITIONS = 8
MEMBER_COUNTS = (1, 4, 12)
MEMBER_TIMEOUT_S = 300.0
SOURCE_GOAL = 0.8
MEMBERS_GOAL = 1.3
_SLOT = struct.Struct("<q")


@dataclass(frozen=True)
class ShareBenchSettings:
    """What the ``share`` scenario runs (see the module docs)."""

    messages: int = 3_000
    work_ms: float = 5.0
    fetch: int = 20
    trivial_messages: int = 500_000
    trivial_fetch: int = 2_000
    trivial_rounds: int = 2


@dataclass(frozen=True)
class MembersRow:
    """One members x group-kind run."""

    kind: str
    members: int
    messages: int
    runtime_s: float
    tps: float
    active: int
    lost: int
    duplicates: int


class ShareBench:
    """Runs the scenario against ``target`` and prints its tables to ``console``."""

    def __init__(self, target: KafkaTarget, settings: ShareBenchSettings, console: Console) -> None:
        self._target = target
        self._settings = settings
        self._console = console
        self._admin = AdminClient({"bootstrap.servers": target.bootstrap_servers})

    def run(self) -> dict[str, Any]:
        """Every run, printed; the results (rows, ratios, goals met) as a dict."""
        settings = self._settings
        members = [
            self._members(kind, count) for count in MEMBER_COUNTS for kind in ("share", "classic")
        ]
        trivial = self._trivial()
        result = _summary(members, trivial)
        self._print(members, trivial, result)
        return {"settings": asdict(settings), **result}

    # -- members --------------------------------------------------------------------

    def _members(self, kind: str, count: int) -> MembersRow:
        settings, target = self._settings, self._target
        topic = unique_name(target.topic_prefix, f"share-{kind}")
        group = unique_name(target.topic_prefix, f"{kind}-group")
        target.create_topic(topic, PARTITIONS)
        heartbeat = fast_heartbeat(self._admin, group) if kind == "share" else 0
        with tempfile.NamedTemporaryFile() as counter:
            counter.write(bytes(_SLOT.size * count))
            counter.flush()
            processes = [
                self._start_member(kind, topic, group, counter.name, index)
                for index in range(count)
            ]
            try:
                for process in processes:
                    assert process.stdout is not None
                    if process.stdout.readline().strip() != "ready":
                        raise BenchSetupError(f"a {kind} member failed to start")
                self._wait_until_joined(kind, group, count, heartbeat)
                started = time.time()
                produced = target.produce(topic, settings.messages, 100, settings.fetch)
                _wait_for_count(counter.name, count, produced)
                reports = _stop(processes)
            finally:
                for process in processes:
                    if process.poll() is None:
                        process.kill()
        target.delete_topic(topic)
        handled = [tuple(pair) for report in reports for pair in report["handled"]]
        runtime = max(report["last"] for report in reports) - started
        distinct = len(set(handled))
        return MembersRow(
            kind=kind,
            members=count,
            messages=produced,
            runtime_s=runtime,
            tps=produced / runtime if runtime > 0 else 0.0,
            active=sum(1 for report in reports if report["handled"]),
            lost=produced - distinct,
            duplicates=len(handled) - distinct,
        )

    def _start_member(
        self, kind: str, topic: str, group: str, counter: str, index: int
    ) -> subprocess.Popen[str]:
        settings = {
            "kind": kind,
            "bootstrap": self._target.bootstrap_servers,
            "topic": topic,
            "group": group,
            "fetch": self._settings.fetch,
            "work_ms": self._settings.work_ms,
            "counter": counter,
            "index": index,
        }
        return subprocess.Popen(
            [sys.executable, "-m", "laneway.bench.share.member", json.dumps(settings)],
            stdout=subprocess.PIPE,
            text=True,
        )

    def _wait_until_joined(self, kind: str, group: str, count: int, heartbeat_ms: int) -> None:
        if kind == "share":
            # No admin call describes a share group's members here: three heartbeats.
            time.sleep(3 * heartbeat_ms / 1000.0)
            return
        wanted = min(count, PARTITIONS)
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline:
            with contextlib.suppress(KafkaException):
                future = self._admin.describe_consumer_groups([group])[group]
                described = future.result(30)
                owners = [m for m in described.members if m.assignment.topic_partitions]
                assigned = sum(len(m.assignment.topic_partitions) for m in owners)
                if (
                    len(described.members) == count
                    and len(owners) == wanted
                    and assigned == PARTITIONS
                ):
                    return
            time.sleep(0.2)
        raise BenchSetupError(f"the classic group of {count} members did not settle in 120 s")

    # -- trivial --------------------------------------------------------------------

    def _trivial(self) -> list[TrivialRow]:
        settings, target = self._settings, self._target
        topic = unique_name(target.topic_prefix, "share-trivial")
        target.create_topic(topic, PARTITIONS)
        loops = TrivialLoops(target, settings.trivial_fetch, MEMBER_TIMEOUT_S)
        bare: list[TrivialRow] = []
        source: list[TrivialRow] = []
        try:
            messages = target.produce(topic, settings.trivial_messages, 100)
            for round_ in range(settings.trivial_rounds):
                if round_ % 2 == 0:
                    bare.append(loops.bare(topic, messages))
                    source.append(loops.source(topic, messages))
                else:
                    source.append(loops.source(topic, messages))
                    bare.append(loops.bare(topic, messages))
        finally:
            target.delete_topic(topic)
        return [best(bare), best(source)]

    # -- report -----------------------------------------------------------------------

    def _print(
        self, members: list[MembersRow], trivial: list[TrivialRow], result: dict[str, Any]
    ) -> None:
        settings, console = self._settings, self._console
        table = Table(
            title=(
                f"share: {settings.messages:,} msgs x ~{settings.work_ms:g} ms blocking work, "
                f"{PARTITIONS} partitions, sync-engine members, fetch {settings.fetch}"
            ),
            header_style="bold",
        )
        for name in (
            "members",
            "group",
            "active",
            "runtime s",
            "msg/s",
            "vs classic",
            "lost",
            "dup",
        ):
            table.add_column(name, justify="left" if name == "group" else "right")
        classic = {row.members: row for row in members if row.kind == "classic"}
        for row in members:
            base = classic[row.members].runtime_s
            speedup = f"{base / row.runtime_s:.2f}x" if row.kind == "share" else "-"
            table.add_row(
                str(row.members), row.kind, str(row.active), f"{row.runtime_s:.2f}",
                f"{row.tps:,.0f}", speedup, str(row.lost), str(row.duplicates),
            )  # fmt: skip
        console.print(table)
        bare, source = trivial
        lines = [
            f"trivial, no work ({bare.expected:,} msgs, fetch {settings.trivial_fetch}, best "
            f"of {settings.trivial_rounds} rounds):",
            f"  {bare.loop}: {bare.tps:,.0f} msg/s (rounds: {_rounds(bare)})",
            f"  {source.loop}: {source.tps:,.0f} msg/s (rounds: {_rounds(source)})",
            f"goals: the share source at {result['source_vs_bare']:.2f} of the bare loop "
            f"(goal >= {SOURCE_GOAL}); 12 share members "
            f"{result['members_12_speedup']:.2f}x faster than the 8-partition classic group "
            f"(goal >= {MEMBERS_GOAL})",
        ]
        for line in lines:
            console.print(line, highlight=False)


def _rounds(row: TrivialRow) -> str:
    return " / ".join(f"{tps:,.0f}" for tps in row.tps_runs)


def _summary(members: list[MembersRow], trivial: list[TrivialRow]) -> dict[str, Any]:
    bare, source = trivial
    runtime = {(row.kind, row.members): row.runtime_s for row in members}
    speedup = runtime[("classic", 12)] / runtime[("share", 12)]
    ratio = source.tps / bare.tps if bare.tps else 0.0
    clean = all(row.lost == 0 and row.duplicates == 0 for row in members)
    return {
        "members": [asdict(row) for row in members],
        "trivial": [asdict(row) for row in trivial],
        "source_vs_bare": ratio,
        "members_12_speedup": speedup,
        "goals_met": ratio >= SOURCE_GOAL and speedup >= MEMBERS_GOAL,
        "valid": clean and all(row.messages == row.expected for row in trivial),
    }


def _wait_for_count(path: str, members: int, total: int) -> None:
    deadline = time.monotonic() + MEMBER_TIMEOUT_S
    with open(path, "rb") as counter:
        while time.monotonic() < deadline:
            counter.seek(0)
            data = counter.read(_SLOT.size * members)
            if sum(_SLOT.unpack_from(data, i * _SLOT.size)[0] for i in range(members)) >= total:
                return
            time.sleep(0.05)
    raise BenchSetupError(f"members did not handle {total} records in {MEMBER_TIMEOUT_S:g} s")


def _stop(processes: list[subprocess.Popen[str]]) -> list[dict[str, Any]]:
    for process in processes:
        process.terminate()
    reports = []
    for process in processes:
        output, _ = process.communicate(timeout=60)
        lines = [line for line in output.splitlines() if line.startswith("{")]
        if process.returncode != 0 or not lines:
            raise BenchSetupError(f"a member exited with {process.returncode}: {output[-500:]}")
        reports.append(json.loads(lines[-1]))
    return reports
