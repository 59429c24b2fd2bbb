"""The payments ledger: accounts per client and the rules of the five transaction types.

Rules (amounts in 1/10,000 units, see :mod:`transactions`):

* ``deposit`` adds to ``available``.
* ``withdrawal`` takes from ``available``; :class:`InsufficientFunds` if it would go below 0.
* ``dispute`` of one of the client's deposits moves its amount from ``available`` to
  ``held`` (``available`` may go negative when the money was already withdrawn, as in the
  toy engine: the bank is owed it).
* ``resolve`` moves a disputed deposit's amount from ``held`` back to ``available``.
* ``chargeback`` removes a disputed deposit's amount from ``held`` and locks the account.
* Every transaction on a locked account is rejected with :class:`AccountLocked`.

A dispute, resolve or chargeback names a deposit by its tx id; an id the client never
deposited (an unknown id, another client's transaction, or a withdrawal) is an
:class:`UnknownTransaction`. Resolving or charging back a deposit that is not under dispute,
or disputing one that already is, is an :class:`InvalidDispute`. A deposit or withdrawal
reusing a tx id of the same client is a :class:`DuplicateTransaction` (uniqueness across
clients cannot be checked with per-client state, and every other rule needs none).

Rejections are outcomes, not crashes: :meth:`Ledger.record` counts them on the account and
returns their name, so a rejected withdrawal is recorded and processing goes on, as a real
ledger keeps its declined payments.

State is strictly per client: no rule reads another client's account. That is why
laneway's ``ordering="key"`` (key = client) is all the ordering the ledger needs, and why
the result does not depend on how different clients' transactions interleave.
"""

from __future__ import annotations

from typing import NamedTuple

from transactions import Kind, Transaction, format_amount

APPLIED = "applied"
"""What :meth:`Ledger.record` returns for an accepted transaction."""
REDELIVERED = "redelivered"
"""What :meth:`Ledger.record` returns for a log offset the account already applied."""


class LedgerError(Exception):
    """A transaction the ledger rejects; the class name is the rejection reason."""


class InsufficientFunds(LedgerError):
    """A withdrawal larger than the available funds."""


class UnknownTransaction(LedgerError):
    """A dispute, resolve or chargeback naming no deposit of this client."""


class InvalidDispute(LedgerError):
    """Disputing a disputed deposit, or resolving / charging back an undisputed one."""


class AccountLocked(LedgerError):
    """Any transaction on an account frozen by a chargeback."""


class DuplicateTransaction(LedgerError):
    """A deposit or withdrawal reusing one of the client's tx ids."""


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


class Deposit:
    """A deposit kept for later disputes: its amount and whether it is under dispute."""

    __slots__ = ("amount", "disputed")

    def __init__(self, amount: int) -> None:
        self.amount = amount
        self.disputed = False


class Account:
    """One client's account, its disputable deposits and its bookkeeping.

    ``last_offset`` is the log offset of the last transaction applied to it (-1 before
    any): laneway delivers at least once, so a redelivered record (offset not above it)
    is skipped instead of being applied twice. A client's records all sit in one partition
    (the key picks it), so their offsets are comparable as long as the topic's partition
    count never changes.
    """

    __slots__ = (
        "available",
        "deposits",
        "held",
        "last_offset",
        "locked",
        "rejected",
        "withdrawals",
    )

    def __init__(self) -> None:
        self.available = 0
        self.held = 0
        self.locked = False
        self.rejected = 0
        self.last_offset = -1
        self.deposits: dict[int, Deposit] = {}
        self.withdrawals: set[int] = set()

    def balance(self) -> Balance:
        return Balance(
            self.available, self.held, self.available + self.held, self.locked, self.rejected
        )

    def apply(self, tx: Transaction) -> None:
        """Apply ``tx`` to this account or raise the :class:`LedgerError` that rejects it."""
        if self.locked:
            raise AccountLocked(f"client {tx.client} is locked")
        kind = tx.kind
        if kind is Kind.DEPOSIT or kind is Kind.WITHDRAWAL:
            if tx.tx in self.deposits or tx.tx in self.withdrawals:
                raise DuplicateTransaction(f"tx {tx.tx} was already used by client {tx.client}")
            if kind is Kind.DEPOSIT:
                self.deposits[tx.tx] = Deposit(tx.amount)
                self.available += tx.amount
                return
            if tx.amount > self.available:
                raise InsufficientFunds(
                    f"withdrawal of {format_amount(tx.amount)} with "
                    f"{format_amount(self.available)} available"
                )
            self.withdrawals.add(tx.tx)
            self.available -= tx.amount
            return
        deposit = self.deposits.get(tx.tx)
        if deposit is None:
            raise UnknownTransaction(f"client {tx.client} has no deposit {tx.tx}")
        if kind is Kind.DISPUTE:
            if deposit.disputed:
                raise InvalidDispute(f"deposit {tx.tx} is already disputed")
            deposit.disputed = True
            self.available -= deposit.amount
            self.held += deposit.amount
            return
        if not deposit.disputed:
            raise InvalidDispute(f"deposit {tx.tx} is not under dispute")
        deposit.disputed = False
        self.held -= deposit.amount
        if kind is Kind.RESOLVE:
            self.available += deposit.amount
        else:
            self.locked = True


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

        A rejection (a :class:`LedgerError`) is counted on the client's account instead of
        being raised. With ``offset`` (the record's log offset) a redelivered record is
        skipped and reported as :data:`REDELIVERED`.
        """
        account = self.account(tx.client)
        if offset is not None:
            if offset <= account.last_offset:
                return REDELIVERED
            account.last_offset = offset
        try:
            account.apply(tx)
        except LedgerError as error:
            account.rejected += 1
            return type(error).__name__
        return APPLIED

    def balances(self) -> dict[int, Balance]:
        """Every account's :class:`Balance`, by client id."""
        return {client: account.balance() for client, account in self.accounts.items()}
