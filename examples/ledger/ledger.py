"""The payments ledger: accounts per client and the rules of the five transaction types.

Rules (amounts in 1/10,000 units, see :mod:`transactions`):

* ``deposit`` adds to ``available``.
* ``withdrawal`` takes from ``available``; ``InsufficientFunds`` if it would go below 0.
* ``dispute`` of one of the client's deposits moves its amount from ``available`` to
  ``held`` (``available`` may go negative when the money was already withdrawn, as in the
  toy engine: the bank is owed it).
* ``resolve`` moves a disputed deposit's amount from ``held`` back to ``available``.
* ``chargeback`` removes a disputed deposit's amount from ``held`` and locks the account.
* Every transaction on a locked account is rejected with ``AccountLocked``.

A dispute, resolve or chargeback names a deposit by its tx id; an id the client never
deposited (an unknown id, another client's transaction, or a withdrawal) is an
``UnknownTransaction``. Resolving or charging back a deposit that is not under dispute,
or disputing one that already is, is an ``InvalidDispute``. A deposit or withdrawal
reusing a tx id of the same client is a ``DuplicateTransaction`` (uniqueness across
clients cannot be checked with per-client state, and every other rule needs none).

Rejections are outcomes, not crashes: :meth:`Ledger.record` counts them on the account and
returns their name, so a rejected withdrawal is recorded and processing goes on, as a real
ledger keeps its declined payments.

State is strictly per client: no rule reads another client's account. That is why
laneway's ``ordering="key"`` (key = client) is all the ordering the ledger needs, and why
the result does not depend on how different clients' transactions interleave.
"""

from __future__ import annotations

from sys import getsizeof
from typing import NamedTuple

from transactions import Kind, Transaction, format_amount

APPLIED = "applied"
"""What :meth:`Ledger.record` returns for an accepted transaction."""
REDELIVERED = "redelivered"
"""What :meth:`Ledger.record` returns for a log offset the account already applied."""


INSUFFICIENT_FUNDS = "InsufficientFunds"
"""A withdrawal larger than the available funds."""
UNKNOWN_TRANSACTION = "UnknownTransaction"
"""A dispute, resolve or chargeback naming no deposit of this client."""
INVALID_DISPUTE = "InvalidDispute"
"""Disputing a disputed deposit, or resolving / charging back an undisputed one."""
ACCOUNT_LOCKED = "AccountLocked"
"""Any transaction on an account frozen by a chargeback."""
DUPLICATE_TRANSACTION = "DuplicateTransaction"
"""A deposit or withdrawal reusing one of the client's tx ids."""
REJECTIONS = (
    INSUFFICIENT_FUNDS,
    UNKNOWN_TRANSACTION,
    INVALID_DISPUTE,
    ACCOUNT_LOCKED,
    DUPLICATE_TRANSACTION,
)
"""Every rejection reason :meth:`Ledger.record` may return."""

_WITHDRAWN = 0
"""What :attr:`Account.txs` holds for a withdrawal's tx id (deposits hold their amount)."""


class Balance(NamedTuple):
    """An account as reported: amounts in 1/10,000 units and the rejected-transaction count."""

    available: int
    held: int
    total: int
    locked: bool
    rejected: int

    def describe(self) -> str:
        return (
            f"available={format_amount(self.available)} held={format_amount(self.held)} "
            f"total={format_amount(self.total)} locked={self.locked} rejected={self.rejected}"
        )


class Account:
    """One client's account, the tx ids it used and its bookkeeping.

    ``txs`` maps every tx id of an applied deposit or withdrawal to one int: a deposit's
    amount (positive), the negated amount while that deposit is under dispute, or 0 for a
    withdrawal. One small dict entry per transaction and no object per deposit: at two
    million transactions this is what keeps the whole ledger near 100 MB instead of 250.

    ``last_offset`` is the log offset of the last transaction applied to it (-1 before
    any): laneway delivers at least once, so a redelivered record (offset not above it)
    is skipped instead of being applied twice. A client's records all sit in one partition
    (the key picks it), so their offsets are comparable as long as the topic's partition
    count never changes.
    """

    __slots__ = ("available", "held", "last_offset", "locked", "rejected", "txs")

    def __init__(self) -> None:
        self.available = 0
        self.held = 0
        self.locked = False
        self.rejected = 0
        self.last_offset = -1
        self.txs: dict[int, int] = {}

    def balance(self) -> Balance:
        return Balance(
            self.available, self.held, self.available + self.held, self.locked, self.rejected
        )

    def apply(self, kind: Kind, tx: int, amount: int) -> str | None:
        """Apply one transaction; return ``None``, or the rejection reason (nothing changed).

        Rejections are returned rather than raised: they are ordinary outcomes, and a
        raise and catch per declined payment would cost more than the rule itself.
        """
        if self.locked:
            return ACCOUNT_LOCKED
        txs = self.txs
        if kind is Kind.DEPOSIT or kind is Kind.WITHDRAWAL:
            if tx in txs:
                return DUPLICATE_TRANSACTION
            if kind is Kind.DEPOSIT:
                txs[tx] = amount
                self.available += amount
                return None
            if amount > self.available:
                return INSUFFICIENT_FUNDS
            txs[tx] = _WITHDRAWN
            self.available -= amount
            return None
        deposit = txs.get(tx, _WITHDRAWN)
        if deposit == _WITHDRAWN:
            return UNKNOWN_TRANSACTION
        if kind is Kind.DISPUTE:
            if deposit < 0:
                return INVALID_DISPUTE
            txs[tx] = -deposit
            self.available -= deposit
            self.held += deposit
            return None
        if deposit > 0:
            return INVALID_DISPUTE
        amount = -deposit
        txs[tx] = amount
        self.held -= amount
        if kind is Kind.RESOLVE:
            self.available += amount
        else:
            self.locked = True
        return None


class Ledger:
    """All accounts, by client id.

    Concurrency: the ledger takes no lock. Under laneway's ``ordering="key"`` with the
    client id as key, two transactions of one client never run at the same time, and each
    call touches only its own client's :class:`Account`. The only shared object is the
    ``accounts`` dict, and only to get or insert one client's entry: each of those is a
    single dict operation, atomic under the GIL (and internally locked in free-threaded
    builds), and no other handler can be inserting the same client. Do not add a
    ledger-wide counter here: ``self.n += 1`` from many threads is a read-modify-write
    race. Per-account counters (like ``rejected``) are safe for the same reason as balances.
    """

    def __init__(self) -> None:
        self.accounts: dict[int, Account] = {}

    def account(self, client: int) -> Account:
        """The client's account, created empty on first use."""
        account = self.accounts.get(client)
        if account is None:
            account = self.accounts[client] = Account()
        return account

    def record(self, tx: Transaction, offset: int | None = None) -> str:
        """Apply ``tx``; return :data:`APPLIED`, :data:`REDELIVERED` or the rejection reason.

        A rejection (one of :data:`REJECTIONS`) is counted on the client's account, not
        raised. With ``offset`` (the record's log offset) a redelivered record is skipped
        and reported as :data:`REDELIVERED`.
        """
        account = self.account(tx.client)
        if offset is not None:
            if offset <= account.last_offset:
                return REDELIVERED
            account.last_offset = offset
        rejected = account.apply(tx.kind, tx.tx, tx.amount)
        if rejected is None:
            return APPLIED
        account.rejected += 1
        return rejected

    def footprint(self) -> int:
        """Bytes this ledger's objects take: the accounts, their tx maps, and the ints in
        them (small ints, shared by the interpreter, count as 0). Its only-growing state,
        so the value at the end of a run is its peak."""
        size = getsizeof(self.accounts)
        for client, account in self.accounts.items():
            size += _int_size(client) + getsizeof(account) + getsizeof(account.txs)
            size += _int_size(account.available) + _int_size(account.held)
            for tx, amount in account.txs.items():
                size += _int_size(tx) + _int_size(amount)
        return size

    def balances(self) -> dict[int, Balance]:
        """Every account's :class:`Balance`, by client id."""
        return {client: account.balance() for client, account in self.accounts.items()}


def _int_size(value: int) -> int:
    return 0 if -5 <= value <= 256 else getsizeof(value)
