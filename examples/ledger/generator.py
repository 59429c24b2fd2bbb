"""A deterministic, seeded generator of realistic ledger traffic, and the sequential reference.

The mix, per transaction: 48% deposits, 34% withdrawals (drawn up to 1.4x what the client
roughly has, so about one in four is declined for insufficient funds), 8% disputes, 6%
resolves, 0.5% chargebacks and 3.5% "noise" that a real feed also carries: deposits
reusing a tx id and disputes naming unknown ids, other clients' deposits or withdrawals.
Disputes mostly name the client's own deposits, resolves and chargebacks mostly deposits
the generator believes disputed, so every rule and every rejection reason is exercised,
and a chargeback locks the account so its later transactions are declined (a frozen
client goes quiet: most of its later traffic goes to other clients, a trickle remains).

Clients are spread over the u16 range and picked with a skewed (Zipf-like) weight, so a
few clients are far busier than most, as in real payment traffic; deposit and withdrawal
tx ids count up from 1 and are globally unique. The same ``seed`` gives the same list.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from ledger import Ledger
from transactions import MAX_CLIENT, MAX_TX, SCALE, Kind, Transaction

ZIPF_EXPONENT = 0.7
"""How skewed client activity is (0 = uniform)."""
LOCKED_TRAFFIC_MOVES = 0.9
"""Share of a locked client's picks given to a random client: frozen accounts go quiet."""
MAX_DEPOSIT = 2_000 * SCALE


class _Client:
    """What the generator believes about a client (it does not run the ledger's rules)."""

    __slots__ = ("balance", "deposits", "disputed", "locked", "withdrawals")

    def __init__(self) -> None:
        self.balance = 0
        self.locked = False
        self.deposits: list[int] = []
        self.withdrawals: list[int] = []
        self.disputed: list[int] = []


class _Generator:
    def __init__(self, count: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.count = count
        self.next_tx = 1
        self.all_deposits: list[int] = []

    def new_id(self) -> int:
        tx = self.next_tx
        self.next_tx += 1
        return tx

    def unknown_id(self) -> int:
        return self.rng.randrange(self.count + 1, MAX_TX + 1)

    def one(self, client: int, state: _Client) -> Transaction:
        rng = self.rng
        roll = rng.random()
        if roll < 0.48:
            amount = rng.randrange(1, MAX_DEPOSIT)
            tx = self.new_id()
            state.deposits.append(tx)
            self.all_deposits.append(tx)
            state.balance += amount
            return Transaction(Kind.DEPOSIT, client, tx, amount)
        if roll < 0.82:
            amount = rng.randrange(1, max(2, state.balance * 14 // 10))
            tx = self.new_id()
            if amount <= state.balance:
                state.balance -= amount
                state.withdrawals.append(tx)
            return Transaction(Kind.WITHDRAWAL, client, tx, amount)
        if roll < 0.90:
            tx = rng.choice(state.deposits) if state.deposits else self.unknown_id()
            state.disputed.append(tx)
            return Transaction(Kind.DISPUTE, client, tx)
        if roll < 0.96:
            if state.disputed and rng.random() < 0.85:
                tx = state.disputed.pop(rng.randrange(len(state.disputed)))
            else:
                tx = rng.choice(state.deposits) if state.deposits else self.unknown_id()
            return Transaction(Kind.RESOLVE, client, tx)
        if roll < 0.965:
            if state.disputed and rng.random() < 0.8:
                tx = rng.choice(state.disputed)
                state.locked = True
            else:
                tx = rng.choice(state.deposits) if state.deposits else self.unknown_id()
            return Transaction(Kind.CHARGEBACK, client, tx)
        return self.noise(client, state)

    def noise(self, client: int, state: _Client) -> Transaction:
        rng = self.rng
        roll = rng.random()
        if roll < 0.15 and state.deposits:
            return Transaction(Kind.DEPOSIT, client, rng.choice(state.deposits), SCALE)
        if roll < 0.45:
            return Transaction(Kind.DISPUTE, client, self.unknown_id())
        if roll < 0.75 and self.all_deposits:
            return Transaction(Kind.DISPUTE, client, rng.choice(self.all_deposits))
        if state.withdrawals:
            return Transaction(Kind.DISPUTE, client, rng.choice(state.withdrawals))
        return Transaction(Kind.RESOLVE, client, self.unknown_id())


def generate(count: int, clients: int, seed: int = 0) -> list[Transaction]:
    """``count`` transactions over ``clients`` distinct client ids, the same for the same seed."""
    return list(stream(count, clients, seed))


def stream(count: int, clients: int, seed: int = 0) -> Iterator[Transaction]:
    """:func:`generate`, one transaction at a time (for files larger than memory should hold)."""
    if not 1 <= clients <= MAX_CLIENT:
        raise ValueError(f"clients={clients} is not valid; expected 1..{MAX_CLIENT}")
    if count >= MAX_TX // 2:
        raise ValueError(f"count={count} is not valid; expected fewer than {MAX_TX // 2}")
    gen = _Generator(count, seed)
    ids = gen.rng.sample(range(1, MAX_CLIENT + 1), clients)
    weights = [1.0 / (rank**ZIPF_EXPONENT) for rank in range(1, clients + 1)]
    picks = gen.rng.choices(ids, weights=weights, k=count)
    states = {client: _Client() for client in ids}
    for client in picks:
        if states[client].locked and gen.rng.random() < LOCKED_TRAFFIC_MOVES:
            client = gen.rng.choice(ids)
        yield gen.one(client, states[client])


def reference(transactions: list[Transaction]) -> tuple[Ledger, dict[str, int]]:
    """The sequential run: every transaction in order, in one plain loop, without laneway.

    Returns the ledger and how many transactions had each outcome (``applied`` or a
    rejection reason).
    """
    ledger = Ledger()
    outcomes: dict[str, int] = {}
    for tx in transactions:
        outcome = ledger.record(tx)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return ledger, outcomes
