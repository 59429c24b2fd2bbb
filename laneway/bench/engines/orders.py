"""The order record of ``laneway bench --value-format json``, as handlers get it.

A module of its own so that process-engine workers import it by name (the consumer's
``serde.json(BenchOrder)`` pickles the class by reference) and so that msgspec is imported
only when JSON values are asked for.
"""

from __future__ import annotations

import msgspec


class BenchOrder(msgspec.Struct, gc=False):
    """One benchmark order (see :mod:`laneway.bench.engines.value_formats`).

    ``gc=False``: a record of plain fields can be in no reference cycle, so the garbage
    collector need not track it (msgspec's advice for such records)."""

    sequence: int
    account: str
    amount: float
    currency: str
    status: str
    note: str
