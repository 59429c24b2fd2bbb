"""The ledger with its balances in a :class:`laneway.StateStore`: they survive a crash.

``python examples/ledger/stateful.py LOG_DIR STATE_DIR`` consumes the ``transactions``
topic of the durable embedded log in ``LOG_DIR`` (see :func:`produce_file`) with each
client's account as its key's :class:`laneway.State`, kept in ``STATE_DIR`` and in the
compacted changelog topic ``transactions.balances``, until nothing new comes for a few
seconds; then prints the accounts as the CSV tool does (``client,available,held,total,
locked``). Killed at any point (``kill -9``) and run again, it goes on where the committed
offsets say, and ends with exactly the balances of one uninterrupted run: each message is
finished only once its account's new state is in the changelog, and a message replayed
after the crash that its account already reflects is not applied again (laneway's store
compares the offsets, so the handler needs no ``last_offset`` of its own).

An account is stored as ``[available, held, locked, rejected, [[tx, amount], ...]]``
(JSON, the store's default serializer): what :class:`~ledger.Account` holds.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

from handlers import transaction_of
from ledger import Account, Balance
from transactions import Transaction

import laneway
from laneway.state.changelog import EmbeddedChangelog
from laneway.state.reading import latest_states

TOPIC = "transactions"
CHANGELOG = f"{TOPIC}.balances"
PROGRESS_EVERY = 0.1
"""Seconds between the progress lines (``handled N``) a run prints on stderr."""


def account_of(value: Any) -> Account:
    """The account a state value holds (a new one for ``None``)."""
    account = Account()
    if value is not None:
        account.available, account.held, locked, account.rejected, txs = value
        account.locked = bool(locked)
        account.txs = {tx: amount for tx, amount in txs}
    return account


def value_of(account: Account) -> list[Any]:
    """``account`` as a state value (see the module docs)."""
    txs = [[tx, amount] for tx, amount in account.txs.items()]
    return [account.available, account.held, int(account.locked), account.rejected, txs]


def balance_of(value: Any) -> Balance:
    """The balance of the account a state value holds."""
    return account_of(value).balance()


def apply(message: laneway.Message, state: laneway.State[list[Any]]) -> None:
    """Apply one transaction to its client's account (the key's state)."""
    tx = transaction_of(message)
    account = account_of(state.value)
    if account.apply(tx.kind, tx.tx, tx.amount) is not None:
        account.rejected += 1
    state.value = value_of(account)


def produce_file(log_dir: Path, transactions: list[Transaction], partitions: int = 4) -> None:
    """Write ``transactions`` into a new durable embedded log at ``log_dir``, keyed by client."""
    from service import records

    log = laneway.EmbeddedLog(log_dir)
    try:
        log.create_topic(TOPIC, partitions=partitions)
        log.produce_many(TOPIC, records(transactions))
    finally:
        log.close()


def run(log_dir: Path, state_dir: Path, idle_timeout: float = 3.0) -> dict[int, Balance]:
    """Consume until ``idle_timeout`` seconds pass without a message; the balances."""
    log = laneway.EmbeddedLog(log_dir)
    try:
        consumer = laneway.Consumer(
            log.subscribe([TOPIC], "ledger"),
            apply,
            state=laneway.StateStore(state_dir, changelog=CHANGELOG),
            engine="thread",
            ordering="key",
            commit_interval=0.2,
        )
        done = threading.Event()

        def progress() -> None:
            while not done.wait(PROGRESS_EVERY):
                print(json.dumps({"handled": consumer.stats().handled}), file=sys.stderr)
                sys.stderr.flush()

        threading.Thread(target=progress, daemon=True).start()
        consumer.run(idle_timeout=idle_timeout)
        done.set()
        found = latest_states(EmbeddedChangelog(log), CHANGELOG)
        codec = laneway.StateStore(None, changelog=CHANGELOG).codec
        return {
            int(state.key): balance_of(codec.decode(state.value))
            for state in found.states.values()
            if state.value is not None
        }
    finally:
        log.close()


def main(argv: list[str]) -> int:
    from tool import write_accounts

    balances = run(Path(argv[0]), Path(argv[1]))
    write_accounts(balances, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
