"""The CSV tool: transactions.csv -> an embedded log -> laneway -> accounts.csv.

:func:`run_csv` streams the file through the pipeline:

1. a *feeder* thread reads the CSV line by line (:mod:`csv_input`: malformed rows are
   reported with their line numbers and skipped), packs rows into lane records
   (:mod:`lanes`) and produces them into an in-memory :class:`laneway.EmbeddedLog`
   bounded by ``capacity`` records per partition with ``when_full="block"``: when the
   consumer falls behind, the feeder waits, so memory stays bounded whatever the file size;
2. a :class:`laneway.Consumer` (any engine, ``ordering="key"``: one lane at a time, in
   offset order) applies the records to a :class:`~ledger.Ledger`, committing every
   ``COMMIT_INTERVAL`` seconds, which is what frees room in the log;
3. once everything produced is handled, the feeder stops the consumer, which drains and
   commits, and the final balances come back (from the process engine's workers through
   their snapshots, see :class:`~lanes.LaneHandler`).

:func:`sequential` is the reference: the same rows applied in a plain loop, no laneway.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterable
from itertools import chain
from pathlib import Path
from typing import IO, NamedTuple

from csv_input import Report, numbered_lines, read_rows
from lanes import (
    AsyncLaneHandler,
    LaneHandler,
    Malformed,
    Memory,
    apply_rows,
    lane_key,
    lane_records,
    read_snapshots,
)
from ledger import Balance, Ledger
from transactions import format_amount

import laneway
from laneway.sources.embedded.log import EmbeddedSource

ENGINES = ("sync", "thread", "async", "process")
TOPIC = "transactions"
GROUP = "ledger"
COMMIT_INTERVAL = 0.02
"""Seconds between commits: each commit releases the log's room for the feeder."""
ROWS_IN_LOG = 200_000
"""About how many rows the log holds at most (``capacity`` is derived from it)."""
STOP_CHECK_S = 0.002


class ToolRun(NamedTuple):
    """What one run of the CSV tool produced."""

    balances: dict[int, Balance]
    malformed: list[Malformed]
    """Rows the handlers could not parse, by line number (the feeder reports the rest)."""
    records: int
    stats: laneway.ConsumerStats
    state_bytes: int
    """The ledger's footprint (summed over the process engine's workers)."""
    workers: list[Memory]
    """Peak memory of each process-engine worker (empty for the other engines)."""


def capacity_for(batch: int, partitions: int) -> int:
    """Records per partition the log retains: about :data:`ROWS_IN_LOG` rows in all."""
    return max(16, ROWS_IN_LOG // (batch * partitions))


def run_csv(
    lines: Iterable[str],
    report: Report,
    engine: str = "sync",
    partitions: int = 8,
    lanes: int = 64,
    batch: int = 1_000,
    concurrency: int | None = None,
) -> ToolRun:
    """Stream ``lines`` (a CSV file) through an embedded log and laneway; see the module."""
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r} is not valid; choose from {', '.join(ENGINES)}")
    log = laneway.EmbeddedLog(capacity=capacity_for(batch, partitions), when_full="block")
    try:
        log.create_topic(TOPIC, partitions=partitions)
        source = log.subscribe([TOPIC], group=GROUP)  # before producing: the log keeps
        # a record until this group has committed past it
        with tempfile.TemporaryDirectory(prefix="ledger-snapshots-") as snapshots:
            ledger = Ledger()
            applier = LaneHandler(ledger, Path(snapshots) if engine == "process" else None)
            consumer = laneway.Consumer(
                source,
                AsyncLaneHandler(applier) if engine == "async" else applier,
                engine=engine,
                ordering="key",
                concurrency=1 if engine == "sync" else concurrency,
                commit_interval=COMMIT_INTERVAL,
            )
            records = lane_records(numbered_lines(lines), lanes, batch, report)
            feeder = _Feeder(log, partitions, records, consumer, source)
            feeder.start()
            try:
                stats = consumer.run()
            finally:
                log.close()  # a feeder still waiting for room stops
                feeder.join()
            if feeder.error is not None:
                raise feeder.error
            if stats.handled != feeder.produced:
                raise RuntimeError(
                    f"{feeder.produced:,} records were produced but {stats.handled:,} handled"
                )
            workers: list[Memory] = []
            if engine == "process":
                balances, malformed, workers = read_snapshots(Path(snapshots))
                state = sum(worker.state for worker in workers)
            else:
                balances, malformed = ledger.balances(), applier.malformed
                state = ledger.footprint()
    finally:
        log.close()
    return ToolRun(balances, sorted(malformed), feeder.produced, stats, state, workers)


def sequential(lines: Iterable[str], report: Report) -> dict[int, Balance]:
    """The reference: every well-formed row applied in file order, in one plain loop."""
    ledger = Ledger()
    apply_rows(ledger, chain.from_iterable(read_rows(lines, report)))
    return ledger.balances()


def write_accounts(balances: dict[int, Balance], out: IO[str]) -> None:
    """``client,available,held,total,locked`` per client (ascending), four decimal places."""
    out.write("client,available,held,total,locked\n")
    for client in sorted(balances):
        b = balances[client]
        out.write(
            f"{client},{format_amount(b.available)},{format_amount(b.held)},"
            f"{format_amount(b.total)},{'true' if b.locked else 'false'}\n"
        )


class _Feeder(threading.Thread):
    """Produces the lane records, then stops the consumer once it has handled them all."""

    def __init__(
        self,
        log: laneway.EmbeddedLog,
        partitions: int,
        records: Iterable[tuple[int, bytes]],
        consumer: laneway.Consumer,
        source: EmbeddedSource,
    ) -> None:
        super().__init__(name="ledger-feeder", daemon=True)
        self._log = log
        self._partitions = partitions
        self._records = iter(records)
        self._consumer = consumer
        self._source = source
        self.produced = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            produce, partitions = self._log.produce, self._partitions
            for lane, value in self._records:  # lanes spread evenly over the partitions
                produce(TOPIC, value, lane_key(lane), partition=lane % partitions)
                self.produced += 1
            while self._consumer.stats().handled < self.produced:
                time.sleep(STOP_CHECK_S)
        except laneway.SourceError:
            pass  # the log was closed: the consumer stopped first and says why
        except BaseException as error:  # reported by run_csv
            self.error = error
        finally:
            self._consumer.stop()
            self._source.wakeup()  # a poll waiting for records returns now
