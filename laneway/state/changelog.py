"""The changelog topic as the state store sees it: checked, created, and read for restores.

:class:`ChangelogLog` is what a :class:`~laneway.state.store.StateStore` needs of the log
its consumer reads: a topic's partition count and cleanup policy, creating the changelog,
a partition's bounds and its records. :func:`changelog_log` opens it for a source:
:class:`EmbeddedChangelog` for an embedded log, :class:`~laneway.state.kafka_changelog.
KafkaChangelog` for Kafka (imported only then).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol

from laneway.errors import ConfigError, SourceError
from laneway.logs import get_logger
from laneway.sources.embedded.log import EmbeddedLog
from laneway.state.records import Row, changelog_record
from laneway.types import Header

logger = get_logger(__name__)

READ_BATCH = 10_000
"""Changelog records read (and written to the state file) at a time during a restore."""


class Changed(NamedTuple):
    """A changelog record as a restore reads it."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[Header]


class ChangelogLog(Protocol):
    """The log behind a consumer's source, as its state store uses it (one per consumer,
    used from the control thread and the restorer's thread, never at once)."""

    where: str
    """The log, for messages."""

    def partitions(self, topic: str) -> int | None:
        """``topic``'s partition count (``None``: no such topic)."""

    def compacted(self, topic: str) -> bool | None:
        """Whether ``topic``'s ``cleanup.policy`` compacts it (``None``: the log has no
        cleanup policies: the embedded log keeps every record)."""

    def create(self, topic: str, partitions: int) -> None:
        """Create the compacted ``topic`` with ``partitions`` partitions."""

    def empty(self, topic: str) -> bool:
        """Whether no record was ever written to ``topic`` (every partition ends at 0)."""

    def mend(self, topic: str, partitions: int | None) -> bool:
        """Give the existing ``topic`` ``partitions`` partitions (more than it has; ``None``:
        as many as now) and compaction; whether this log can (``False``: the operator must,
        with :meth:`mending`)."""

    def mending(self, topic: str, partitions: int | None) -> str:
        """What an operator runs to do what :meth:`mend` does (a command line)."""

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        """The first retained offset and the end (the next offset; with exactly-once the
        last stable offset) of a partition."""

    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[list[Changed]]:
        """The records of a partition from ``start`` up to ``end``, in batches (with
        exactly-once only committed ones)."""

    def write(self, topic: str, partition: int, rows: Sequence[Row]) -> None:
        """Append a changelog record per row ``(key, value, offset)`` to a partition and
        wait until every one is acknowledged (a SourceError when one is not)."""

    def close(self) -> None: ...


class EmbeddedChangelog:
    """The changelog in an :class:`~laneway.sources.embedded.log.EmbeddedLog`: it keeps
    every record (no compaction; nobody subscribes to a changelog, so nothing is trimmed),
    and transactions append atomically, so everything up to the end is committed."""

    def __init__(self, log: EmbeddedLog) -> None:
        self._log = log
        self.where = "the embedded log"

    def partitions(self, topic: str) -> int | None:
        return self._log.partitions(topic) if topic in self._log.topics() else None

    def compacted(self, topic: str) -> bool | None:
        return None

    def create(self, topic: str, partitions: int) -> None:
        self._log.create_topic(topic, partitions)

    def empty(self, topic: str) -> bool:
        return not any(self._log.end_offsets(topic).values())

    def mend(self, topic: str, partitions: int | None) -> bool:
        return False  # an embedded topic keeps the partition count it was made with

    def mending(self, topic: str, partitions: int | None) -> str:
        return f"make the embedded log's topic {topic!r} anew with {partitions} partitions"

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        return (
            self._log.start_offsets(topic)[partition],
            self._log.end_offsets(topic)[partition],
        )

    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[list[Changed]]:
        position = start
        while position < end:
            batch = self._log.read(topic, partition, position, min(READ_BATCH, end - position))
            if not batch:
                return
            yield [Changed(m.offset, m.key, m.value, m.headers) for m in batch]
            position = batch[-1].offset + 1

    def write(self, topic: str, partition: int, rows: Sequence[Row]) -> None:
        records = [changelog_record(topic, partition, k, v, o) for k, v, o in rows]
        refused = self._log.produce_records(records)
        if refused:
            raise SourceError(f"writing to {topic}[{partition}] failed: {refused[0][1]}")

    def close(self) -> None:
        pass


def check_changelog(log: ChangelogLog, changelog: str, input_topic: str, create: bool) -> int:
    """Make sure ``changelog`` is a compacted topic with as many partitions as
    ``input_topic`` (creating it when missing and ``create``); return that count.

    A changelog of the wrong shape that holds no record yet (one a broker with Kafka's
    default ``auto.create.topics.enable=true`` made, with one partition, when another
    client asked for it) is mended where the log can: partitions added, compaction set,
    with a WARNING saying so. One that holds records is a :class:`ConfigError` naming it
    and the command that mends it: records are never moved or deleted here."""
    wanted = log.partitions(input_topic)
    if wanted is None:
        raise ConfigError(f"state: the input topic {input_topic!r} does not exist in {log.where}")
    found = log.partitions(changelog)
    if found is None:
        if not create:
            raise ConfigError(
                f"state: changelog topic {changelog!r} does not exist in {log.where} "
                "(create it compacted, or let the store create it)"
            )
        log.create(changelog, wanted)
        return wanted
    if found > wanted:
        raise ConfigError(
            f"state: changelog topic {changelog!r} has {found} partitions, but the input "
            f"topic {input_topic!r} has {wanted}; a changelog is co-partitioned with its "
            f"input and partitions cannot be removed: use another changelog topic (or, if "
            f"its state is not needed, delete it and let the store create it again)"
        )
    short = found < wanted
    compacted = log.compacted(changelog) is not False
    if not short and compacted:
        return wanted
    change = _shape_change(found, wanted, short, compacted)
    if log.empty(changelog) and log.mend(changelog, wanted if short else None):
        logger.warning(
            "state: changelog topic %s in %s %s; it held no record, so the store mended it "
            "(a broker with auto.create.topics.enable=true makes such a topic when a client "
            "asks for it first)",
            changelog,
            log.where,
            change,
        )
        return wanted
    raise ConfigError(
        f"state: changelog topic {changelog!r} {change}; mend it with: "
        f"{log.mending(changelog, wanted if short else None)}"
        + (
            " (safe: each input partition's state is written to the changelog partition "
            "of the same number, so no record moves)"
            if short
            else ""
        )
    )


def _shape_change(found: int, wanted: int, short: bool, compacted: bool) -> str:
    """What is wrong with a changelog's shape, in words."""
    wrong = []
    if short:
        wrong.append(f"has {found} partitions instead of its input's {wanted}")
    if not compacted:
        wrong.append(
            "is not compacted (cleanup.policy must include compact, or the state it keeps "
            "is deleted with old segments)"
        )
    return " and ".join(wrong)
