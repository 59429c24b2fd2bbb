"""What a fetched message weighs in memory, as ``max_buffered_bytes`` counts it.

A message's *footprint* is the bytes of its value, its key and its headers (names and
values). Python's own object overhead (about 200 bytes per message) is not counted: the
bound is about payloads, and the message-count bound ``max_buffered`` covers the rest.

:func:`footprint` runs on every polled batch (settling takes the partition's average, see
``OwnedPartition.unbuffer``), written as a few passes of C-level builtins (``map``,
``filter``, ``sum``). Its cost is mostly the first touch of each value and key object:
~0.15 us a message when they are in cache (a Kafka poll just made them), ~0.45 us when
they are not and nothing else reads them (no-op handlers on the embedded log's backlog:
the sync engine's trivial-message rate fell from ~1.3M to ~0.8M msg/s in a side-by-side
run). A handler that reads its message pays that miss anyway, and then weighing costs
little.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import NamedTuple

from laneway.types import Header, Message

_value = attrgetter("value")
_key = attrgetter("key")
_headers = attrgetter("headers")


class Footprint(NamedTuple):
    """The bytes of a batch, and an upper bound of its largest message's."""

    total: int
    largest: int


def footprint(messages: Sequence[Message]) -> Footprint:
    """The footprint of ``messages`` (``None`` keys, values and header values weigh 0)."""
    values = list(map(len, filter(None, map(_value, messages))))
    keys = list(map(len, filter(None, map(_key, messages))))
    total = sum(values) + sum(keys)
    largest = max(values, default=0) + max(keys, default=0)
    headed = list(filter(None, map(_headers, messages)))
    if headed:
        sizes = [header_bytes(headers) for headers in headed]
        total += sum(sizes)
        largest += max(sizes)
    return Footprint(total, largest)


def header_bytes(headers: Sequence[Header]) -> int:
    """Bytes of the names (UTF-8 length taken as characters) and values of ``headers``."""
    return sum(len(name) + (len(value) if value else 0) for name, value in headers)
