"""Lane records: a CSV file's lines grouped per lane, and the handlers that apply them.

One log record per transaction would make laneway's per-message cost (a few microseconds)
the whole bill for a rule that takes a fraction of one. So the CSV tool groups lines into
*lane records*: a client belongs to lane ``client % lanes``; :func:`lane_records` reads just
the client field of each line (the rest is parsed where the record is handled), appends the
line with its line number to the lane's open record and, once that holds ``batch`` lines,
emits it (key ``b"lane-<n>"``, value ``b"<number>\\t<line>\\n..."``). With ``ordering="key"``
laneway runs a lane's records one at a time in offset order, so every client's transactions
are applied in file order, as the sequential loop applies them, while different lanes run in
parallel; and the parsing, the largest cost, runs on the engine too (in the worker processes
with ``engine="process"``). ``batch=1`` gives one record per transaction.

:class:`LaneHandler` parses a record (:func:`csv_input.parse_block`) and applies its rows to
a :class:`~ledger.Ledger`, keeping malformed rows aside with their line numbers. For the
``sync``, ``thread`` and ``async`` engines one handler (and ledger) serves the whole
consumer. For the ``process`` engine each worker unpickles a handler with a ledger of its
own: laneway deals each key (lane) to one worker for the engine's life, so no client's
state is split, and ``close()`` writes the worker's accounts and malformed rows to
``<snapshots>/accounts-<pid>.csv`` when the worker stops; :func:`read_snapshots` folds them.
"""

from __future__ import annotations

import os
import resource
import tracemalloc
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from csv_input import KINDS, Report, parse_block
from ledger import Account, Balance, Ledger

from laneway import Message

SNAPSHOT_GLOB = "accounts-*.csv"
Malformed = tuple[int, str, str]
"""A malformed row: ``(line number, line, reason)``."""


def lane_key(lane: int) -> bytes:
    return b"lane-%d" % lane


def lane_records(
    numbered: Iterable[tuple[int, str]], lanes: int, batch: int, report: Report
) -> Iterator[tuple[int, bytes]]:
    """``(lane, value)`` lane records of numbered lines: full ones as they fill, then the
    rest. A line without a readable client field is reported here and left out."""
    open_records: list[list[str]] = [[] for _ in range(lanes)]
    for number, line in numbered:
        try:
            client = int(line.split(",", 2)[1])
        except (IndexError, ValueError):
            report(number, line, "expected 'type,client,tx,amount'")
            continue
        lane = client % lanes
        lines = open_records[lane]
        lines.append(f"{number}\t{line}" if line[-1] == "\n" else f"{number}\t{line}\n")
        if len(lines) >= batch:
            yield lane, "".join(lines).encode()
            open_records[lane] = []
    for lane, lines in enumerate(open_records):
        if lines:
            yield lane, "".join(lines).encode()


def apply_rows(ledger: Ledger, values: Iterable[int]) -> None:
    """Apply flat rows (four values each) in order; rejections are counted on the accounts."""
    accounts = ledger.accounts
    kinds = KINDS
    fields = iter(values)
    for code, client, tx, amount in zip(fields, fields, fields, fields, strict=True):
        account = accounts.get(client)
        if account is None:
            account = accounts[client] = Account()
        if account.apply(kinds[code], tx, amount) is not None:
            account.rejected += 1


class LaneHandler:
    """Parses lane records and applies them to a ledger; skips a redelivered record.

    ``malformed`` collects the rows that did not parse. ``snapshots`` (process engine): the
    directory each worker writes its accounts and malformed rows to when it closes.
    Redelivery is detected per lane: a lane's records all live in one partition, so a
    record at or below the lane's last applied offset was applied already.
    """

    def __init__(self, ledger: Ledger | None = None, snapshots: Path | None = None) -> None:
        self.ledger = Ledger() if ledger is None else ledger
        self.snapshots = snapshots
        self.malformed: list[Malformed] = []
        self._applied: dict[bytes | None, int] = {}

    def __call__(self, message: Message) -> None:
        if message.value is None:
            raise ValueError(f"offset {message.offset}: a lane record needs a value")
        if message.offset <= self._applied.get(message.key, -1):
            return
        rows, malformed = parse_block(message.value.decode("utf-8", "replace"))
        apply_rows(self.ledger, rows)
        if malformed:
            self.malformed.extend(malformed)
        self._applied[message.key] = message.offset

    def open(self) -> None:
        """Nothing to open: the ledger lives in memory."""

    def close(self) -> None:
        """In a process-engine worker, write this worker's accounts for the parent to read."""
        if self.snapshots is None:
            return
        path = self.snapshots / f"accounts-{os.getpid()}.csv"
        with path.open("w", encoding="utf-8") as out:
            for client, balance in self.ledger.balances().items():
                out.write(
                    f"{client},{balance.available},{balance.held},{int(balance.locked)},"
                    f"{balance.rejected}\n"
                )
            for number, line, reason in self.malformed:
                out.write(f"!{number}\t{reason}\t{line.rstrip()}\n")
            out.write(f"#{traced_peak()},{peak_rss()},{self.ledger.footprint()}\n")

    def __reduce__(self) -> tuple[type[LaneHandler], tuple[None, Path | None]]:
        """What a process-engine worker receives: a fresh ledger, the snapshot directory."""
        return (LaneHandler, (None, self.snapshots))


class AsyncLaneHandler:
    """:class:`LaneHandler` as an ``async def`` handler, for the ``async`` engine."""

    def __init__(self, apply: LaneHandler) -> None:
        self.apply = apply

    async def __call__(self, message: Message) -> None:
        self.apply(message)


class Memory(NamedTuple):
    """A worker's peak memory in bytes: traced Python allocations (-1: not traced), RSS, and
    the footprint of its ledger (:meth:`~ledger.Ledger.footprint`)."""

    traced: int
    rss: int
    state: int


def traced_peak() -> int:
    """Peak bytes allocated through Python since tracing began (-1 when not tracing)."""
    return tracemalloc.get_traced_memory()[1] if tracemalloc.is_tracing() else -1


def peak_rss() -> int:
    """This process's peak resident set size in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Snapshots(NamedTuple):
    """What the process engine's workers wrote when they stopped."""

    balances: dict[int, Balance]
    malformed: list[Malformed]
    workers: list[Memory]


def read_snapshots(directory: Path) -> Snapshots:
    """The accounts, malformed rows and peak memory every worker wrote into ``directory``."""
    balances: dict[int, Balance] = {}
    malformed: list[Malformed] = []
    workers: list[Memory] = []
    for path in sorted(directory.glob(SNAPSHOT_GLOB)):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if line.startswith("#"):
                    traced, rss, state = map(int, line[1:].split(","))
                    workers.append(Memory(traced, rss, state))
                    continue
                if line.startswith("!"):
                    number, reason, text = line[1:].rstrip("\n").split("\t", 2)
                    malformed.append((int(number), text, reason))
                    continue
                client, available, held, locked, rejected = map(int, line.split(","))
                if client in balances:
                    raise ValueError(f"client {client} was in two workers' ledgers")
                balances[client] = Balance(available, held, available + held, locked == 1, rejected)
    return Snapshots(balances, malformed, workers)
