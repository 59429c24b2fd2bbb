"""laneway handlers for the ledger: in-process state, or worker-local state with a changelog.

* ``sync``, ``thread``: :class:`LedgerHandler` applies each message to a shared in-process
  :class:`~ledger.Ledger` (no lock needed under ``ordering="key"``; see that class).
* ``async``: :class:`AsyncLedgerHandler`, the same as an ``async def`` handler.
* ``process``: :func:`apply_in_worker`, a module-level function the worker processes import
  by name. Each worker keeps a module-level ``Ledger`` of the clients pinned to it (laneway
  pins a key's lane to one worker for the engine's life, so no client's state is split) and
  appends one changelog line per transaction to its own file in the directory named by the
  :data:`CHANGELOG_DIR` environment variable, which must be set before the consumer starts
  so that the spawned workers inherit it. :func:`read_changelog` folds those files into the
  final balances: per client, the line with the highest offset wins.

Every handler checks that the record key is the client id of the value: the key is what
keeps a client's transactions in order, so a record keyed otherwise is malformed and fails
(raises) like an unparsable one. Ledger rejections never raise; they are counted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple, TextIO

from ledger import REDELIVERED, Balance, Ledger
from transactions import Transaction, decode

from laneway import Message

CHANGELOG_DIR = "LEDGER_CHANGELOG_DIR"
"""Environment variable: the directory where process-engine workers write their changelogs."""
CHANGELOG_GLOB = "changelog-*.csv"


def transaction_of(message: Message) -> Transaction:
    """Decode a message's transaction; :class:`ValueError` if malformed or keyed wrongly."""
    if message.value is None:
        raise ValueError(f"offset {message.offset}: a ledger record needs a value")
    tx = decode(message.value)
    if message.key is None or message.key != str(tx.client).encode():
        raise ValueError(
            f"offset {message.offset}: key {message.key!r} is not client {tx.client}; "
            "transactions must be keyed by client to stay in order"
        )
    return tx


class LedgerHandler:
    """The handler for the ``sync`` and ``thread`` engines: applies messages to ``ledger``."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def __call__(self, message: Message) -> None:
        self.ledger.record(transaction_of(message), message.offset)


class AsyncLedgerHandler:
    """The handler for the ``async`` engine: applies messages to ``ledger`` on the event loop.

    The ledger work is pure computation, so nothing is awaited; a handler that also called
    a fraud-scoring service would await it here, and other clients' transactions would run
    meanwhile while this client's next transaction waited its turn.
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def __call__(self, message: Message) -> None:
        self.ledger.record(transaction_of(message), message.offset)


_worker_ledger = Ledger()
_changelog: list[TextIO] = []


def apply_in_worker(message: Message) -> None:
    """The ``process`` engine handler: worker-local ledger plus one changelog line per record.

    The line is ``client,partition,offset,available,held,locked,rejected`` (amounts in
    1/10,000 units), written and flushed before the handler returns, so it survives the
    worker being stopped right after. A redelivered record changes nothing and writes
    nothing.
    """
    tx = transaction_of(message)
    if _worker_ledger.record(tx, message.offset) == REDELIVERED:
        return
    if not _changelog:
        path = Path(os.environ[CHANGELOG_DIR]) / f"changelog-{os.getpid()}.csv"
        _changelog.append(path.open("a", encoding="ascii"))
    account = _worker_ledger.accounts[tx.client]
    out = _changelog[0]
    out.write(
        f"{tx.client},{message.partition},{message.offset},{account.available},"
        f"{account.held},{int(account.locked)},{account.rejected}\n"
    )
    out.flush()


class Changelog(NamedTuple):
    """What a changelog directory holds: the latest balance per client, and record counts."""

    balances: dict[int, Balance]
    records: int
    positions: int
    """Distinct ``(partition, offset)`` pairs: equals ``records`` when none was written twice."""
    files: int


def read_changelog(directory: Path) -> Changelog:
    """Fold every worker's changelog in ``directory``: per client, the highest offset wins."""
    records = files = 0
    positions: set[tuple[int, int]] = set()
    latest: dict[int, tuple[int, Balance]] = {}
    for path in sorted(directory.glob(CHANGELOG_GLOB)):
        files += 1
        with path.open(encoding="ascii") as lines:
            for line in lines:
                client, partition, offset, available, held, locked, rejected = map(
                    int, line.split(",")
                )
                records += 1
                positions.add((partition, offset))
                seen = latest.get(client)
                if seen is None or offset > seen[0]:
                    balance = Balance(available, held, available + held, locked == 1, rejected)
                    latest[client] = (offset, balance)
    balances = {client: balance for client, (_, balance) in latest.items()}
    return Changelog(balances, records, len(positions), files)
