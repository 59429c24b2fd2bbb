"""The state records of one round of result groups, a key's records merged (see the
coalescing rule in :mod:`laneway.state.writer`)."""

from __future__ import annotations

from laneway.results import Produce
from laneway.types import Message

Slot = tuple[int, bytes]
"""A key's place in the changelog: its partition and key."""


class Unit:
    """The state records of one result group, on their way to the changelog: ``extras``
    are the group's other records when they go with them (exactly-once); ``ready`` once
    the group's results are acknowledged (at-least-once) or at once."""

    __slots__ = ("extras", "messages", "ready", "records", "slots")

    def __init__(
        self, messages: list[Message], records: list[Produce], extras: list[Produce], ready: bool
    ) -> None:
        self.messages = messages
        self.records = records
        self.extras = extras
        self.ready = ready
        self.slots: list[Slot] = list(dict.fromkeys((r[4], r[2]) for r in records))  # type: ignore[misc]


class Later:
    """A unit waiting for the acknowledgement of its group's other records."""

    __slots__ = ("left", "unit")

    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self.left = len(unit.messages)


class Round:
    """The groups one call hands the inner writer, a key's state records merged: a unit of
    one key joins the key's open group; a unit of several keys (a batch's) opens a group of
    its own after them."""

    __slots__ = ("groups", "open")

    def __init__(self) -> None:
        self.groups: list[tuple[list[Message], list[Produce], list[Produce]]] = []
        self.open: dict[Slot, tuple[list[Message], list[Produce], list[Produce]]] = {}

    def add_one(self, messages: list[Message], record: Produce) -> None:
        """:meth:`add` for a ready unit of one record (the common case, without the unit)."""
        slot: Slot = (record[4], record[2])  # type: ignore[assignment]
        group = self.open.get(slot)
        if group is None:
            group = self.open[slot] = ([*messages], [], [record])
            self.groups.append(group)
        else:
            group[0].extend(messages)
            group[2][0] = record

    def add(self, unit: Unit) -> None:
        if not unit.messages:
            return  # given up (see ChangelogResults._taint)
        if len(unit.slots) == 1:
            group = self.open.get(unit.slots[0])
            if group is not None:
                group[0].extend(unit.messages)
                group[1].extend(unit.extras)
                group[2][:] = unit.records
                return
            group = (list(unit.messages), list(unit.extras), list(unit.records))
            self.open[unit.slots[0]] = group
        else:
            group = (unit.messages, unit.extras, unit.records)
            for slot in unit.slots:
                self.open.pop(slot, None)
        self.groups.append(group)
