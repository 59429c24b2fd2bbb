"""Run the ledger on a laneway source with any engine and collect the final balances.

Where the state lives depends on the engine (see ``README.md``): ``sync``, ``thread`` and
``async`` share one in-process :class:`~ledger.Ledger`; ``process`` keeps worker-local
ledgers and reads the result back from their changelog files.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from handlers import (
    CHANGELOG_DIR,
    AsyncLedgerHandler,
    Changelog,
    LedgerHandler,
    apply_in_worker,
    read_changelog,
)
from ledger import Balance, Ledger
from transactions import Transaction, encode, key_of

import laneway
from laneway.sources.base import Source

ENGINES = ("sync", "thread", "async", "process")
TOPIC = "transactions"


class LedgerRun(NamedTuple):
    """The outcome of one consumer run over the transactions topic."""

    balances: dict[int, Balance]
    stats: laneway.ConsumerStats
    seconds: float
    """Wall time of ``Consumer.run``: worker start-up and group join included."""
    changelog: Changelog | None
    """What the process engine's workers wrote; ``None`` for the in-process engines."""


def records(transactions: Iterable[Transaction]) -> list[tuple[bytes, bytes]]:
    """``(key, value)`` pairs to produce: keyed by client, CSV-encoded."""
    return [(key_of(tx.client), encode(tx)) for tx in transactions]


def consume(
    source: Source,
    engine: str,
    count: int,
    changelog_dir: Path | None = None,
    concurrency: int | None = None,
    idle_timeout: float = 30.0,
) -> LedgerRun:
    """Consume ``count`` transactions from ``source`` with ``engine`` and ``ordering="key"``.

    The run ends once ``count`` messages are handled and committed, or after
    ``idle_timeout`` seconds without a new message (then fewer are handled: check
    ``stats.handled``). ``engine="process"`` needs ``changelog_dir``, an empty directory
    that the workers write their changelogs to.
    """
    ledger = Ledger()
    handler: Callable[[laneway.Message], Any]
    if engine == "process":
        if changelog_dir is None:
            raise ValueError("engine='process' needs a changelog_dir for the workers' state")
        handler = apply_in_worker
    elif engine == "async":
        handler = AsyncLedgerHandler(ledger)
    else:
        handler = LedgerHandler(ledger)
    consumer = laneway.Consumer(
        source, handler, engine=engine, ordering="key", concurrency=concurrency
    )
    with _changelog_env(changelog_dir if engine == "process" else None):
        start = time.perf_counter()
        stats = consumer.run(max_messages=count, idle_timeout=idle_timeout)
        seconds = time.perf_counter() - start
    if changelog_dir is not None and engine == "process":
        changelog = read_changelog(changelog_dir)
        return LedgerRun(changelog.balances, stats, seconds, changelog)
    return LedgerRun(ledger.balances(), stats, seconds, None)


def differences(expected: dict[int, Balance], actual: dict[int, Balance]) -> list[str]:
    """Every client whose balance differs, described; empty when the two agree exactly."""
    lines = []
    for client in sorted(expected.keys() | actual.keys()):
        want, got = expected.get(client), actual.get(client)
        if want != got:
            lines.append(
                f"client {client}: expected {want.describe() if want else 'no account'}, "
                f"got {got.describe() if got else 'no account'}"
            )
    return lines


@contextmanager
def _changelog_env(directory: Path | None) -> Iterator[None]:
    """Export :data:`~handlers.CHANGELOG_DIR` while the workers are spawned, then restore it."""
    if directory is None:
        yield
        return
    previous = os.environ.get(CHANGELOG_DIR)
    os.environ[CHANGELOG_DIR] = str(directory)
    try:
        yield
    finally:
        if previous is None:
            del os.environ[CHANGELOG_DIR]
        else:
            os.environ[CHANGELOG_DIR] = previous
