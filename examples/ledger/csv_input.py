"""Reading the seed's CSV of transactions: streaming, validated, one row at a time.

The input is the classic toy payments engine's file::

    type,       client, tx, amount
    deposit,    1,      1,  1.0
    withdrawal, 1,      4,  1.5
    dispute,    1,      1,

A header line first (recognised and skipped; a file without one starts with data), then one
transaction per line: ``type`` (``deposit``, ``withdrawal``, ``dispute``, ``resolve``,
``chargeback``), ``client`` (u16), ``tx`` (u32) and ``amount`` (a positive decimal with at
most four places, for deposits and withdrawals; empty or missing for the dispute family).
Whitespace around fields is allowed. Blank lines are skipped.

A row that does not parse is *malformed*: :func:`read_rows` reports it with its line number
to the ``report`` callback and skips it. Nothing else stops the reading. The file is read
line by line, never whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from transactions import MAX_CLIENT, MAX_TX, PLACES, SCALE, Kind

KINDS = (Kind.DEPOSIT, Kind.WITHDRAWAL, Kind.DISPUTE, Kind.RESOLVE, Kind.CHARGEBACK)
"""Transaction kinds by their code in a packed row (see :mod:`lanes`)."""
CODES = {kind: code for code, kind in enumerate(KINDS)}
HEADER = ("type", "client", "tx", "amount")

Row = tuple[int, int, int, int]
"""A parsed transaction: ``(kind code, client, tx, amount in 1/10,000 units)``."""
Report = Callable[[int, str, str], None]
"""Called with ``(line number, line, reason)`` for every malformed row."""

_ROW = re.compile(
    r"\s*([a-z]+)\s*,\s*([0-9]+)\s*,\s*([0-9]+)\s*(?:,\s*(?:([0-9]+)(?:\.([0-9]*))?)?\s*)?",
    re.ASCII,
)
_WITH_AMOUNT = (CODES[Kind.DEPOSIT], CODES[Kind.WITHDRAWAL])
_CODE_OF = {kind.value: code for kind, code in CODES.items()}
_PAD = ("0000", "000", "00", "0", "")


def parse_row(line: str) -> Row | str:
    """The row of ``line``, or the reason it is malformed (a string)."""
    match = _ROW.fullmatch(line)
    if match is None:
        return "expected 'type,client,tx,amount'"
    name, client_text, tx_text, whole, fraction = match.groups()
    code = _CODE_OF.get(name)
    if code is None:
        return f"unknown transaction type {name!r}"
    client = int(client_text)
    if client > MAX_CLIENT:
        return f"client {client} is not in 0..{MAX_CLIENT}"
    tx = int(tx_text)
    if tx > MAX_TX:
        return f"tx {tx} is not in 0..{MAX_TX}"
    if code not in _WITH_AMOUNT:
        if whole is not None:
            return f"a {name} carries no amount"
        return (code, client, tx, 0)
    if whole is None:
        return f"a {name} needs an amount"
    amount = int(whole) * SCALE
    if fraction is not None:
        if not fraction or len(fraction) > PLACES:
            return f"amount {whole}.{fraction} is not a decimal with at most {PLACES} places"
        amount += int(fraction + _PAD[len(fraction)])
    if amount == 0:
        return f"a {name} needs a positive amount"
    return (code, client, tx, amount)


def numbered_lines(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of every non-blank line after the header (if there is one)."""
    numbered = enumerate(lines, 1)
    for number, line in numbered:
        if tuple(field.strip() for field in line.split(",")) != HEADER and line.strip():
            yield number, line
        break
    for number, line in numbered:
        if line.strip():
            yield number, line


def read_rows(lines: Iterable[str], report: Report) -> Iterator[Row]:
    """Every well-formed row of ``lines`` (a text file, header first), in order."""
    for number, line in numbered_lines(lines):
        row = parse_row(line)
        if isinstance(row, str):
            report(number, line, row)
        else:
            yield row


_NUMBERED_ROWS = re.compile(
    r"^[0-9]+\t[ \t\r]*([a-z]+)[ \t\r]*,[ \t\r]*([0-9]+)[ \t\r]*,[ \t\r]*([0-9]+)[ \t\r]*"
    r"(?:,[ \t\r]*(?:([0-9]+)(?:\.([0-9]+))?)?[ \t\r]*)?$",
    re.ASCII | re.MULTILINE,
)


def parse_block(text: str) -> tuple[list[int], list[tuple[int, str, str]]]:
    """Parse ``number<TAB>line`` lines: return flat rows (four ints each) and the malformed
    ones as ``(line number, line, reason)``.

    One regular-expression pass over the whole block, then a tight loop of conversions: about
    half the cost of :func:`parse_row` line by line. A block with any malformed line is
    parsed again line by line, so the verdicts are exactly :func:`parse_row`'s.
    """
    found = _NUMBERED_ROWS.findall(text)
    if len(found) == text.count("\n"):
        rows = _convert(found)
        if rows is not None:
            return rows, []
    rows = []
    malformed: list[tuple[int, str, str]] = []
    for numbered in text.split("\n")[:-1]:
        number, _, line = numbered.partition("\t")
        row = parse_row(line)
        if isinstance(row, str):
            malformed.append((int(number), line, row))
        else:
            rows.extend(row)
    return rows, malformed


def _convert(found: list[tuple[str, str, str, str, str]]) -> list[int] | None:
    """Flat rows of regex matches, or ``None`` if any is malformed after all."""
    code_of = _CODE_OF
    with_amount = _WITH_AMOUNT
    pad = _PAD
    rows: list[int] = []
    append = rows.append
    for name, client_text, tx_text, whole, fraction in found:
        code = code_of.get(name)
        client = int(client_text)
        tx = int(tx_text)
        if code is None or client > MAX_CLIENT or tx > MAX_TX:
            return None
        if code in with_amount:
            if not whole or len(fraction) > PLACES:
                return None
            amount = int(whole) * SCALE + (int(fraction + pad[len(fraction)]) if fraction else 0)
            if amount == 0:
                return None
        elif whole:
            return None
        else:
            amount = 0
        append(code)
        append(client)
        append(tx)
        append(amount)
    return rows
