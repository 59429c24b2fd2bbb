"""Transactions of the payments ledger and their compact wire encoding.

A transaction travels as one CSV line ``type,client,tx,amount`` (UTF-8, no spaces, no
header), as in the classic toy payments engine::

    deposit,7,1,2.5000
    withdrawal,7,2,1.25
    dispute,7,1,

``client`` is a u16, ``tx`` a u32 and ``amount`` a non-negative decimal with at most four
places, given for deposits and withdrawals and empty for the dispute family. Amounts are
held as integers of 1/10,000 of a unit (:data:`SCALE`), never as floats, so sums are exact.
The record key is the client id in ASCII (``b"7"``): Kafka (and the embedded log) hash it to
a partition, so every transaction of a client lands on one partition, in order.

A line that does not parse raises :class:`ValueError`: that is malformed input, not a
ledger outcome, and the handler lets it fail the message (laneway retries it and then
dead-letters it).
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

SCALE = 10_000
"""Amount units per currency unit: amounts are integers of 1/10,000."""
PLACES = 4
MAX_CLIENT = 0xFFFF
MAX_TX = 0xFFFF_FFFF


class Kind(str, Enum):
    """The five transaction types; the value is the word used on the wire."""

    DEPOSIT = "deposit"
    WITHDRAWAL = "withdrawal"
    DISPUTE = "dispute"
    RESOLVE = "resolve"
    CHARGEBACK = "chargeback"


_KINDS = {kind.value: kind for kind in Kind}
_WITH_AMOUNT = (Kind.DEPOSIT, Kind.WITHDRAWAL)


class Transaction(NamedTuple):
    """One transaction; ``amount`` is in 1/10,000 units and 0 for the dispute family."""

    kind: Kind
    client: int
    tx: int
    amount: int = 0


def parse_amount(text: str) -> int:
    """``"12.3456"`` -> ``123456``: exact, at most four decimal places, no sign, no exponent."""
    whole, dot, fraction = text.partition(".")
    if (
        not whole.isdigit()
        or not whole.isascii()
        or (dot and (not fraction.isdigit() or not fraction.isascii()))
        or len(fraction) > PLACES
    ):
        raise ValueError(f"amount {text!r} is not a decimal with at most {PLACES} places")
    return int(whole) * SCALE + int(fraction.ljust(PLACES, "0") or "0")


def format_amount(units: int) -> str:
    """``123456`` -> ``"12.3456"`` (negative balances keep their sign)."""
    sign = "-" if units < 0 else ""
    whole, fraction = divmod(abs(units), SCALE)
    return f"{sign}{whole}.{fraction:04d}"


def encode(tx: Transaction) -> bytes:
    """The wire form of ``tx``: ``b"type,client,tx,amount"``."""
    amount = format_amount(tx.amount) if tx.kind in _WITH_AMOUNT else ""
    return f"{tx.kind.value},{tx.client},{tx.tx},{amount}".encode()


def key_of(client: int) -> bytes:
    """The record key of a client's transactions: its id in ASCII."""
    return str(client).encode()


def decode(value: bytes) -> Transaction:
    """Parse one wire line; raises :class:`ValueError` when it is malformed."""
    fields = value.decode().split(",")
    if len(fields) != 4:
        raise ValueError(f"expected 'type,client,tx,amount', got {value[:80]!r}")
    name, client_text, tx_text, amount_text = fields
    kind = _KINDS.get(name)
    if kind is None:
        raise ValueError(f"unknown transaction type {name!r}")
    client, tx = _bounded(client_text, MAX_CLIENT, "client"), _bounded(tx_text, MAX_TX, "tx")
    if kind not in _WITH_AMOUNT:
        if amount_text:
            raise ValueError(f"a {name} carries no amount, got {amount_text!r}")
        return Transaction(kind, client, tx)
    amount = parse_amount(amount_text)
    if amount == 0:
        raise ValueError(f"a {name} needs a positive amount")
    return Transaction(kind, client, tx, amount)


def _bounded(text: str, maximum: int, field: str) -> int:
    if not text.isdigit() or not text.isascii() or int(text) > maximum:
        raise ValueError(f"{field} {text!r} is not an integer in 0..{maximum}")
    return int(text)
