"""The process engine's stateful handler: each message's state shipped with it, the new
state shipped back.

The parent owns the tables; workers get, with each message of a batch, its key's entry as
it is when the batch is *sent* (:meth:`ShippedState.ship`: three headers added to the row,
taken off again before the handler sees the message) and return the new entry as the
changelog record among the message's results, which the parent applies to its table as
soon as it reads the reply (:meth:`ShippedState.harvested`), before it sends more.

A worker holds up to two batches, so a batch may be sent before the reply to the one
ahead of it is read: its entries can be older than what the worker itself wrote while
running that one. So each worker keeps the entries it wrote during its current and its
previous batch and takes, per key, whichever has the higher offset (:class:`_Written`). A
worker that replaces a dead or detached one starts empty, and everything it runs is sent
to it anew, with the parent's entries of that moment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from laneway.engines.base import ResultGroup
from laneway.serde.decoding import Decoding
from laneway.serde.typed_handlers import DecodingHandler, WorkerViews
from laneway.state.codec import StateCodec
from laneway.state.handler import BatchStates, States, Tables, changes
from laneway.state.records import KEYLESS, Entry, change_of
from laneway.state.state import State
from laneway.types import Message

VALUE = "laneway.state.value"
OFFSET = "laneway.state.offset-applied"
BATCH = "laneway.state.batch"
"""The headers a shipped row carries its key's entry and its batch's id in (last three)."""
_ABSENT: Entry = (None, -1)


class ShippedState(DecodingHandler):
    """A stateful handler for the process engine (see the module docs). In the parent it
    holds the ``tables``; it pickles without them."""

    def __init__(
        self,
        handler: Callable[..., Any],
        value: Callable[[bytes], object] | None,
        key: Callable[[bytes], object] | None,
        codec: StateCodec,
        changelog: str,
        tables: Tables | None = None,
    ) -> None:
        super().__init__(handler, value, key)
        self.codec = codec
        self.changelog = changelog
        self._tables = tables

    def __reduce__(self) -> tuple[Any, ...]:
        return ShippedState, (self.handler, self.value, self.key, self.codec, self.changelog)

    # -- the parent's side ------------------------------------------------------------

    def ship(self, batch_id: int, messages: list[Message]) -> list[tuple[object, ...]]:
        """The rows of a batch being sent: each message with its key's entry now."""
        tables = self._tables or {}
        batch = (BATCH, b"%d" % batch_id)
        rows: list[tuple[object, ...]] = []
        for message in messages:
            table = tables.get((message[0], message[1]))
            key = message[3]
            data, last = _ABSENT if table is None else table.get(KEYLESS if key is None else key)
            headers = (*message[5], (VALUE, data), (OFFSET, b"%d" % last), batch)
            rows.append((*message[:5], headers, *message[6:]))
        return rows

    def harvested(self, groups: list[ResultGroup]) -> None:
        """Replies just read: the new entries their changelog records carry."""
        tables, changelog = self._tables or {}, self.changelog
        for messages, records in groups:
            for record in records:
                if record[0] != changelog:
                    continue
                change = change_of(record)
                table = tables.get((messages[0][0], change.partition))
                if table is not None and table.get(change.key)[1] < change.offset:
                    table.put(change.key, (change.value, change.offset))

    # -- a worker's side ----------------------------------------------------------------

    def in_worker(  # type: ignore[override]
        self, batched: bool
    ) -> tuple[Callable[..., Any], Decoding | None, WorkerViews]:
        views = WorkerViews()
        typed = self.value is not None or self.key is not None
        decoding = Decoding(self.value, self.key) if typed else None
        written = _Written()
        handler, codec, changelog = self.handler, self.codec, self.changelog
        decode = codec.decode

        def unshipped(given: Any) -> Any:
            """The message (its view) without the shipped headers."""
            found = views.by_position[given[:3]] if typed else given
            return found._replace(headers=found[5][:-3])

        def entry_of(given: Any, key: bytes) -> Entry:
            headers = given[5]
            written.batch(headers[-1][1])
            shipped: Entry = (headers[-3][1], int(headers[-2][1]))
            mine = written.get(given[1], key)
            return mine if mine is not None and mine[1] > shipped[1] else shipped

        if batched:

            def call_batch(given: list[Any]) -> Any:
                batch = BatchStates(decode)
                batch.take(given, entry_of)
                if not batch.fresh:
                    return None
                result = handler([unshipped(m) for m in batch.fresh], States(batch.by_position))
                return batch.changes(result, codec, changelog, written.put)

            return call_batch, decoding, views

        def call(given: Any) -> Any:
            key = given[3]
            if key is None:
                key = KEYLESS
            data, last = entry_of(given, key)
            if given[2] <= last:
                return None
            state: State[Any] = State(None if data is None else decode(data))
            result = handler(unshipped(given), state)
            if not state.changed:
                return result
            returned, entry = changes(result, state, codec.encode, changelog, given, key)
            written.put(given[1], key, entry)
            return returned

        return call, decoding, views


class _Written:
    """The entries a worker wrote during its current and its previous batch."""

    __slots__ = ("_batch", "current", "previous")

    def __init__(self) -> None:
        self._batch: bytes | None = None
        self.current: dict[tuple[int, bytes], Entry] = {}
        self.previous: dict[tuple[int, bytes], Entry] = {}

    def batch(self, batch_id: bytes | None) -> None:
        if batch_id != self._batch:
            self._batch = batch_id
            self.previous, self.current = self.current, {}

    def get(self, partition: int, key: bytes) -> Entry | None:
        found = self.current.get((partition, key))
        return found if found is not None else self.previous.get((partition, key))

    def put(self, partition: int, key: bytes, entry: Entry) -> None:
        self.current[partition, key] = entry
