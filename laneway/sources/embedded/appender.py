"""Appending records to the partitions of one EmbeddedLog under its ``capacity``.

A record gets the partition's next offset and, in durable mode, is written to the partition's
file (the caller flushes). When the partition already retains ``capacity`` records, the log's
``when_full`` policy decides first: wait for a commit to make room, raise, drop the new record
or drop the oldest retained one. The counts of what happened feed
:meth:`laneway.EmbeddedLog.stats`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from laneway.errors import LogFullError
from laneway.options import WhenFull
from laneway.sources.embedded.partition import PartitionLog
from laneway.sources.embedded.segment import encode_log_start, encode_record
from laneway.types import Header, Message

_WAIT_SLICE = 1.0


class Appender:
    """Appends to the partitions of an :class:`laneway.EmbeddedLog`, under the log's lock.

    :meth:`append` expects the caller to hold the lock; under ``when_full="block"`` it waits
    on that lock's condition until :meth:`room_made` (a commit trimmed records) or
    :meth:`wake_all` (the log closes: ``check_open`` then raises).
    """

    def __init__(
        self,
        lock: threading.Lock,
        capacity: int | None,
        when_full: WhenFull,
        check_open: Callable[[], None],
    ) -> None:
        self.capacity = capacity
        self._when_full = when_full
        self._check_open = check_open
        self._space = threading.Condition(lock)
        self._space_waiters = 0
        self.produced = self.dropped_newest = self.dropped_oldest = self.blocked = 0

    def append(
        self,
        part: PartitionLog,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[Header, ...],
        timestamp: int,
        deadline: float | None,
    ) -> int:
        """Append one record to ``part``; return its offset (``-1``: dropped as newest).

        ``deadline`` (``time.monotonic()``) bounds the wait of ``when_full="block"``.
        """
        full = self.capacity is not None and part.retained() >= self.capacity
        if full and not self._make_room(part, deadline):
            return -1
        offset = part.base + len(part.records)
        message = Message(part.topic, part.partition, offset, key, value, headers, timestamp)
        part.records.append(message)
        self.produced += 1
        if part.file is not None:
            part.file.write(encode_record(message))
        return offset

    def _make_room(self, part: PartitionLog, deadline: float | None) -> bool:
        """Apply ``when_full`` to a full partition; False means: drop the new record."""
        capacity = self.capacity
        assert capacity is not None
        policy = self._when_full
        if policy is WhenFull.DROP_NEWEST:
            self.dropped_newest += 1
            return False
        if policy is WhenFull.DROP_OLDEST:
            part.advance_start(part.start + 1)
            self.dropped_oldest += 1
            if part.file is not None:
                part.file.write(encode_log_start(part.start))
            return True
        where = f"topic {part.topic!r} partition {part.partition}"
        if policy is WhenFull.ERROR:
            raise LogFullError(
                f"{where} holds capacity={capacity} records not yet committed by every "
                "group (when_full='error')"
            )
        self.blocked += 1
        while part.retained() >= capacity:
            self._check_open()
            wait = _WAIT_SLICE if deadline is None else deadline - time.monotonic()
            if wait <= 0:
                raise LogFullError(
                    f"{where} stayed full (capacity={capacity}) until the produce timeout"
                )
            self._space_waiters += 1
            try:
                self._space.wait(min(wait, _WAIT_SLICE))
            finally:
                self._space_waiters -= 1
        return True

    def room_made(self) -> None:
        """Wake the appends waiting for room (records were trimmed); under the lock."""
        if self._space_waiters:
            self._space.notify_all()

    def wake_all(self) -> None:
        """Wake every waiting append, e.g. to see that the log closed; under the lock."""
        self._space.notify_all()
