"""Records deleted under a KafkaSource member before it read them, said out loud.

Records leave a partition's start without anyone reading them: retention deletes old
segments, ``DeleteRecords`` (``kafka-delete-records``) moves the log start, a topic made
anew starts from scratch. A member whose committed offset, or whose fetch position, lies
below the new log start is *out of range*; librdkafka then applies ``auto.offset.reset``
(``earliest``: on from the new start; ``latest``: on from the end) with one line that names
neither the log start nor how much was lost. laneway says it once, as a WARNING naming the
partition, the offset it was at, the log start and what ``auto.offset.reset`` decided, and
counts the records never processed (``stats().deleted_unread``, the
``laneway_records_deleted_unread_total`` counter), in two places:

* at assignment (:meth:`DeletedRecords.checked_start`): a committed offset below the log
  start is not handed to librdkafka; the partition is assigned where
  ``auto.offset.reset`` says, at once;
* while fetching: librdkafka's reset line (its ``OFFSET`` log line, which reaches laneway
  through this object as the client's ``logger``) is noted, and at the next
  :meth:`~laneway.sources.kafka.source.KafkaSource.poll` (:meth:`DeletedRecords.report`)
  the log start and end are asked of the partition's leader, so the warning says what
  happened and how many records went. If librdkafka's line ever changes shape, only this
  summary is lost: its own line still passes to the ``laneway.librdkafka`` logger.

Nothing loops: each reset is one fetch round trip of librdkafka's, reported once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

from confluent_kafka import Consumer, KafkaException, TopicPartition

from laneway.logs import get_logger
from laneway.sources.kafka.client_logs import LIBRDKAFKA_LOGGER, describe
from laneway.types import PartitionId

# The source's own logger: these lines are about the KafkaSource, not this helper.
logger = get_logger("laneway.sources.kafka.source")

RESET_LINE = re.compile(
    r"\]: (?P<topic>\S+) \[(?P<partition>\d+)\]: offset reset \(at offset (?P<offset>\d+)"
    r".*? to (?:offset )?(?P<target>BEGINNING|END)"
)
"""librdkafka's line for a fetch position reset (facility ``OFFSET``), e.g. ``[thrd:main]:
orders [3]: offset reset (at offset 5 (leader epoch -1), broker 1) to offset BEGINNING
(leader epoch -1): fetch failed due to requested offset not available on the broker``."""
WATERMARK_TIMEOUT_S = 5.0
"""Seconds to wait for a partition's log start and end after a reset."""

Deleted = Callable[[PartitionId, int, int], int]
"""Told that a partition's records from an offset up to another (where reading goes on) will
not be read: counts those never processed and returns how many (what was fetched before, and
already processed, does not count)."""


class DeletedRecords:
    """Notices and reports records deleted under one member (see the module docstring).

    Pass it as the consumer's ``logger`` (it forwards every line to
    :data:`~laneway.sources.kafka.client_logs.LIBRDKAFKA_LOGGER`); ``reset`` is the
    member's ``auto.offset.reset``; ``deleted`` is told of each loss (the offset progress's
    count)."""

    def __init__(self, name: str, reset: str) -> None:
        self._name = name
        self._reset = reset
        self._noted: list[tuple[PartitionId, int, str]] = []
        self.deleted: Deleted | None = None

    def log(self, level: int, message: str, *args: object) -> None:
        """librdkafka's log line (called inside ``consume()``, on the source's thread)."""
        LIBRDKAFKA_LOGGER.log(level, message, *args)
        if len(args) == 3 and args[0] == "OFFSET":
            found = RESET_LINE.search(str(args[2]))
            if found is not None:
                pid = (found["topic"], int(found["partition"]))
                self._noted.append((pid, int(found["offset"]), found["target"]))

    def checked_start(self, where: str, pid: PartitionId, committed: int, start: int) -> bool:
        """Whether the committed offset of ``pid`` (``where`` names it) is still in the log
        whose start is ``start``; if not, the WARNING and the count are made here (the
        caller assigns where ``auto.offset.reset`` says)."""
        if committed >= start:
            return True
        logger.warning(
            "%s: the committed offset %d is below the log start %d: records %d to %d were "
            "deleted before this group read them (retention, DeleteRecords, or the topic "
            "made anew); reading on where auto.offset.reset=%s says",
            where,
            committed,
            start,
            committed,
            start - 1,
            self._reset,
        )
        self._count(pid, committed, start)
        return False

    def report(self, consumer: Consumer, owned: Collection[PartitionId]) -> None:
        """Report the resets librdkafka made since the last call (see the module docstring)."""
        if not self._noted:
            return
        noted, self._noted = self._noted, []
        for pid, offset, target in noted:
            if pid not in owned:
                continue
            tp = TopicPartition(pid[0], pid[1])
            try:
                start, end = consumer.get_watermark_offsets(
                    tp, timeout=WATERMARK_TIMEOUT_S, cached=False
                )
            except KafkaException as error:
                logger.warning(
                    "%s: %s[%d]: fetching at offset %d found it out of range and "
                    "auto.offset.reset=%s moved the position to the %s (the log start and "
                    "end could not be read: %s)",
                    self._name, pid[0], pid[1], offset, self._reset, target.lower(),
                    describe(error),
                )  # fmt: skip
                continue
            self._reported(pid, offset, target, start, end)

    def _reported(self, pid: PartitionId, offset: int, target: str, start: int, end: int) -> None:
        where = f"{self._name}: {pid[0]}[{pid[1]}]"
        if offset >= end:
            logger.warning(
                "%s: the fetch position %d is beyond the log end %d (the log lost its tail); "
                "auto.offset.reset=%s reads on from the %s (offset %d)",
                where, offset, end, self._reset, target.lower(),
                start if target == "BEGINNING" else end,
            )  # fmt: skip
            return
        resumed = start if target == "BEGINNING" else end
        lost = self._count(pid, offset, resumed)
        logger.warning(
            "%s: records from offset %d were deleted before this member read them (the log "
            "start is %d now: retention, DeleteRecords, or the topic made anew); "
            "auto.offset.reset=%s reads on from offset %d: %d record(s) never processed",
            where, offset, start, self._reset, resumed, lost,
        )  # fmt: skip

    def _count(self, pid: PartitionId, offset: int, resumed: int) -> int:
        if self.deleted is None:
            return max(0, resumed - offset)
        return self.deleted(pid, offset, resumed)
