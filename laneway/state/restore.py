"""Restore: a partition's state brought up to date from the changelog, off the control thread.

On assignment each partition's :class:`~laneway.state.table.PartitionTable` is restored by
the :class:`Restorer`'s thread while the consumer goes on with its other partitions (the
keeper holds that partition's messages back, see :mod:`laneway.state.keeper`):

* from the file's checkpoint when the file is there, belongs to this group, input topic,
  changelog and partition, and is consistent with the changelog: the checkpoint lies within
  the changelog's retained offsets and is younger than :data:`MAX_CHECKPOINT_AGE`;
* else in full, from the changelog's first offset, said in a WARNING naming the reason (no
  file, another group's, a changelog that starts past the checkpoint or ends before it, a
  checkpoint older than tombstones are kept).

Records are applied highest input offset per key first-come (see
:mod:`laneway.state.records`), so reading a record twice or out of order changes nothing.
A restore that fails (a changelog offset out of range, the cluster unreachable) is made
again in full after :data:`RETRY_AFTER` seconds, for as long as it takes: the partition
waits, nothing runs on stale state and nothing crashes.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field

from laneway.errors import LanewayError
from laneway.logs import get_logger
from laneway.state.changelog import ChangelogLog
from laneway.state.records import KEYLESS, offset_in
from laneway.state.table import PartitionTable
from laneway.types import PartitionId

log = get_logger(__name__)

MAX_CHECKPOINT_AGE = 12 * 3600.0
"""Seconds after which a file's checkpoint is not trusted: a compacted topic drops
tombstones after ``delete.retention.ms`` (a day by default), so a file older than that could
keep a key the changelog deleted."""
RETRY_AFTER = 2.0
"""Seconds before a failed restore is made again (in full)."""


@dataclass
class RestoreJob:
    """One partition's restore: its progress, for logs, ``/readyz`` and metrics."""

    pid: PartitionId
    table: PartitionTable
    changelog_partition: int
    records: int = 0
    """Changelog records read so far."""
    total: int = 0
    """Changelog records to read (the span from where it starts to the end)."""
    full: bool = False
    started: float = field(default_factory=time.monotonic)
    seconds: float = 0.0
    error: str | None = None
    cancelled: bool = False


class Restorer:
    """Restores partitions one at a time on its own thread (started on first use).

    The control thread calls :meth:`restore` and :meth:`cancel`, and takes the finished
    jobs with :meth:`finished`. Tuning: none; a restore reads about as fast as the log
    hands records out and SQLite takes them (see ``laneway bench --state``).
    """

    def __init__(self, log_: ChangelogLog, changelog: str) -> None:
        self._log = log_
        self._changelog = changelog
        self._queue: queue.Queue[RestoreJob | None] = queue.Queue()
        self._done: list[RestoreJob] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.running: dict[PartitionId, RestoreJob] = {}
        """The restores not finished yet (read from other threads: replaced, not changed)."""

    def restore(self, job: RestoreJob) -> None:
        self.running = {**self.running, job.pid: job}
        self._queue.put(job)
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="laneway-state-restore", daemon=True
            )
            self._thread.start()

    def cancel(self, pid: PartitionId) -> RestoreJob | None:
        """Stop restoring ``pid`` (given up); its job, if it was restoring."""
        running = dict(self.running)
        job = running.pop(pid, None)
        if job is not None:
            job.cancelled = True
            self.running = running
        return job

    def finished(self) -> list[RestoreJob]:
        """Jobs finished (or failed: ``error``) since the last call, not cancelled."""
        with self._lock:
            done, self._done = self._done, []
        if done:
            running = dict(self.running)
            for job in done:
                running.pop(job.pid, None)
            self.running = running
        return [job for job in done if not job.cancelled]

    def close(self) -> None:
        for pid in list(self.running):
            self.cancel(pid)
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(5.0)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            if job.cancelled:
                continue
            try:
                self._restore(job)
            except (LanewayError, OSError, ValueError) as error:
                job.error = f"{type(error).__name__}: {error}"
            except Exception as error:  # sqlite3 and client errors: never end the thread
                job.error = f"{type(error).__name__}: {error}"
            job.seconds = time.monotonic() - job.started
            with self._lock:
                self._done.append(job)

    def _restore(self, job: RestoreJob) -> None:
        table, partition, topic = job.table, job.changelog_partition, self._changelog
        start, end = self._log.bounds(topic, partition)
        why = table.why_full or job.error
        checkpoint = table.checkpoint
        if why is None:
            if table.checkpoint_age > MAX_CHECKPOINT_AGE:
                why = f"its checkpoint is {table.checkpoint_age / 3600:.1f} hours old"
            elif checkpoint < start:
                why = f"the changelog starts at {start}, past its checkpoint {checkpoint}"
            elif checkpoint > end:
                why = f"the changelog ends at {end}, before its checkpoint {checkpoint}"
        job.error = None
        if why is not None:
            job.full = True
            log.warning(
                "state of %s[%d]: full restore from %s[%d] (offsets %d-%d): %s",
                job.pid[0], job.pid[1], topic, partition, start, end, why,
            )  # fmt: skip
            table.clear(why)
            first = start
        else:
            first = checkpoint
            log.info(
                "state of %s[%d]: restoring %s[%d] from checkpoint %d to %d",
                job.pid[0], job.pid[1], topic, partition, first, end,
            )  # fmt: skip
        job.total = max(0, end - first)
        skipped = 0
        for batch in self._log.read(topic, partition, first, end):
            if job.cancelled:
                return
            rows = []
            for change in batch:
                offset = offset_in(change.headers)
                if offset is None:
                    skipped += 1
                    continue
                key = change.key
                rows.append((KEYLESS if key is None else key, change.value, offset))
            table.load(rows)
            job.records += len(batch)
        if skipped:
            log.warning(
                "state of %s[%d]: %d changelog records without a %s header were skipped "
                "(not written by laneway)",
                job.pid[0], job.pid[1], skipped, "laneway.state.offset",
            )  # fmt: skip
        table.flush((), end)
        log.info(
            "state of %s[%d]: restored %d records in %.2f s (%d keys)",
            job.pid[0], job.pid[1], job.records, time.monotonic() - job.started, table.keys(),
        )  # fmt: skip
