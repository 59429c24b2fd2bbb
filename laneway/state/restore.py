"""Restore: a partition's state brought up to date from the changelog, off the control thread.

On assignment each partition's :class:`~laneway.state.table.PartitionTable` is restored by
the :class:`Restorer`'s thread while the consumer goes on with its other partitions (the
keeper holds that partition's messages back, see :mod:`laneway.state.keeper`):

* from the file's checkpoint when the file is there, belongs to this group, input topic,
  changelog and partition, and is consistent with the changelog: the checkpoint lies
  within the changelog's retained offsets and is younger than :data:`MAX_CHECKPOINT_AGE`;
  once the changelog's tail is in it, the file is read whole and checked (see
  :mod:`laneway.state.files.checks`), and restored again in full if it fails;
* else in full, from the changelog's first offset, said in a WARNING naming the reason (no
  file, another group's, one that cannot be used and was set aside, a changelog that
  starts past the checkpoint, a checkpoint older than tombstones are kept);
* except when the changelog **ends before** what a file that passes its checks holds (its
  checkpoint, or the changes the changelog acknowledged after it, which the file takes when
  the changelog's end cannot be read for a new checkpoint): the changelog lost state the
  file holds (deleted and created again, truncated,
  another cluster's). What happens is the store's ``when_changelog_behind``
  (:class:`ChangelogBehind`): by default the restore is refused (a ConfigError naming the
  partition, the checkpoint and the end ends the run: nothing is reset without a word);
  ``rebuild`` writes the file's state back into the changelog and goes on; ``start_empty``
  sets the file aside and restores from what the changelog holds.

Records are applied highest input offset per key first-come (see
:mod:`laneway.state.records`), so reading a record twice or out of order changes nothing.
A restore that fails (a changelog offset out of range, the cluster unreachable) is made
again in full after :data:`RETRY_AFTER` seconds, for as long as it takes: the partition
waits, nothing runs on stale state and nothing crashes. A file found unusable during a
restore is set aside by its table and the restore starts again at once, in full.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import logging
import queue
import threading
import time
from dataclasses import dataclass, field

from laneway.errors import ConfigError
from laneway.logs import get_logger
from laneway.state.changelog import READ_BATCH, ChangelogLog
from laneway.state.records import KEYLESS, offset_in
from laneway.state.table import FileReplaced, PartitionTable
from laneway.types import PartitionId

log = get_logger(__name__)

MAX_CHECKPOINT_AGE = 12 * 3600.0
"""Seconds after which a file's checkpoint is not trusted: a compacted topic drops
tombstones after ``delete.retention.ms`` (a day by default), so a file older than that could
keep a key the changelog deleted."""
RETRY_AFTER = 2.0
"""Seconds before a failed restore is made again (in full)."""


def _stale(table: PartitionTable, start: int, checkpoint: int) -> str | None:
    """Why the file's checkpoint cannot be restored from, if it cannot."""
    if table.checkpoint_age > MAX_CHECKPOINT_AGE:
        return f"its checkpoint is {table.checkpoint_age / 3600:.1f} hours old"
    if checkpoint < start:
        return f"the changelog starts at {start}, past its checkpoint {checkpoint}"
    return None


class ChangelogBehind(str, enum.Enum):
    """What a restore does when the changelog ends before the checkpoint of a file that
    passes its checks (the ``when_changelog_behind`` of a store, ``laneway run
    --state-changelog-behind``).

    ``refuse`` (the default): the run ends with a ConfigError naming the topic, the
    partition, the checkpoint and the end (``laneway run`` exits 2), the file left as it
    is. ``rebuild``: the file's state is written back into the changelog (after what the
    changelog still holds is read into it), and the partition goes on from the file.
    ``start_empty``: the file is set aside and the partition restored from what the
    changelog holds (state it lacks is gone).
    """

    REFUSE = "refuse"
    REBUILD = "rebuild"
    START_EMPTY = "start_empty"


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
    """Why the last attempt failed (the next is made in full)."""
    refused: ConfigError | None = None
    """Why the partition's state may not be restored at all (see :class:`ChangelogBehind`)."""
    cancelled: bool = False


class Restorer:
    """Restores partitions one at a time on its own thread (started on first use), and
    makes each failed restore again after :data:`RETRY_AFTER` seconds.

    :meth:`restore` may be called from any thread (a table in use asks for its own restore
    when its file had to be replaced); the control thread calls :meth:`cancel` and takes
    the finished jobs with :meth:`finished`. Tuning: none; a restore reads about as fast
    as the log hands records out and the file takes them (see ``laneway bench --state``).
    """

    def __init__(
        self,
        log_: ChangelogLog,
        changelog: str,
        when_behind: ChangelogBehind = ChangelogBehind.REFUSE,
    ) -> None:
        self._log = log_
        self._changelog = changelog
        self._when_behind = when_behind
        self._queue: queue.Queue[RestoreJob | None] = queue.Queue()
        self._later: list[tuple[float, int, RestoreJob]] = []
        """Failed restores to make again, by when (the restorer's thread only)."""
        self._order = itertools.count()
        self._done: list[RestoreJob] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.running: dict[PartitionId, RestoreJob] = {}
        """The restores not finished yet, waiting ones included (read from other threads:
        replaced, not changed)."""

    def restore(self, job: RestoreJob) -> None:
        """Restore ``job``'s table (nothing new when that table is being restored already:
        a restore under way starts again by itself when its file is replaced)."""
        with self._lock:
            known = self.running.get(job.pid)
            if known is not None and known.table is job.table and not known.cancelled:
                return
            self.running = {**self.running, job.pid: job}
            self._queue.put(job)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="laneway-state-restore", daemon=True
                )
                self._thread.start()

    def cancel(self, pid: PartitionId) -> RestoreJob | None:
        """Stop restoring ``pid`` (given up); its job, if it was restoring."""
        with self._lock:
            running = dict(self.running)
            job = running.pop(pid, None)
            if job is not None:
                job.cancelled = True
                self.running = running
        return job

    def finished(self) -> list[RestoreJob]:
        """Jobs finished (restored, or ``refused``) since the last call, not cancelled."""
        with self._lock:
            done, self._done = self._done, []
            if done:
                running = dict(self.running)
                for job in done:
                    if running.get(job.pid) is job:
                        del running[job.pid]
                self.running = running
        return [job for job in done if not job.cancelled]

    def close(self) -> None:
        for pid in list(self.running):
            self.cancel(pid)
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(5.0)

    def _next(self) -> RestoreJob | None:
        """The next job: one whose retry is due, else one asked for (waiting for either)."""
        while True:
            now = time.monotonic()
            if self._later and self._later[0][0] <= now:
                job = heapq.heappop(self._later)[2]
                job.records = 0
                return job
            wait = self._later[0][0] - now if self._later else None
            try:
                return self._queue.get(timeout=wait)
            except queue.Empty:
                continue

    def _run(self) -> None:
        while True:
            job = self._next()
            if job is None:
                return
            if job.cancelled:
                continue
            try:
                self._restore(job)
            except FileReplaced:
                job.records = 0
                self._queue.put(job)  # its table has a new file: in full, at once
                continue
            except ConfigError as refusal:
                job.refused = refusal
            except Exception as error:  # sqlite3 and client errors: never end the thread
                if job.cancelled:
                    continue  # given up while it ran: its table was closed under it
                job.error = f"{type(error).__name__}: {error}"
                log.error(
                    "state of %s[%d]: restore failed (%s); restoring again in full in %g s",
                    job.pid[0], job.pid[1], job.error, RETRY_AFTER,
                )  # fmt: skip
                when = time.monotonic() + RETRY_AFTER
                heapq.heappush(self._later, (when, next(self._order), job))
                continue
            job.seconds = time.monotonic() - job.started
            with self._lock:
                self._done.append(job)

    def _restore(self, job: RestoreJob) -> None:
        table, partition, topic = job.table, job.changelog_partition, self._changelog
        start, end = self._log.bounds(topic, partition)
        why = table.why_full
        rebuilding = why is None and table.rebuilding
        checkpoint = table.checkpoint
        if why is None and not rebuilding:
            why = job.error or _stale(table, start, checkpoint)
        held = table.held
        if why is None and (rebuilding or held > end):
            table.verify()  # only a file that passes its checks counts (else FileReplaced)
            why = self._behind(job, start, end, checkpoint, held)
            if why is None:
                return
        job.error = None
        generation = table.generation
        if why is not None:
            job.full = True
            # A full restore that reads nothing (a first start) is no news.
            log.log(
                logging.WARNING if end > start else logging.INFO,
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
        if not self._load(job, first, end):
            return
        if why is None:
            table.verify()  # the whole file, its new tail too (else FileReplaced: in full)
        table.restored(end, generation)
        log.info(
            "state of %s[%d]: restored %d records in %.2f s (%d keys)",
            job.pid[0], job.pid[1], job.records, time.monotonic() - job.started, table.keys(),
        )  # fmt: skip

    def _load(self, job: RestoreJob, first: int, end: int) -> bool:
        """Read the changelog from ``first`` to ``end`` into the table (False: cancelled)."""
        table, partition, topic = job.table, job.changelog_partition, self._changelog
        job.total = max(0, end - first)
        skipped = 0
        for batch in self._log.read(topic, partition, first, end):
            if job.cancelled:
                return False
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
        return True

    def _behind(
        self, job: RestoreJob, start: int, end: int, checkpoint: int, held: int
    ) -> str | None:
        """The changelog ends before what the file holds (or a rebuild was under way): what
        :class:`ChangelogBehind` says; the reason for a full restore, or ``None`` when the
        rebuild is done (or cancelled)."""
        table, partition, topic = job.table, job.changelog_partition, self._changelog
        what = (
            f"the changelog {topic}[{partition}] in {self._log.where} ends at {end}, before "
            f"the checkpoint {checkpoint} of its state file {table.path}"
        )
        if held > checkpoint:
            what = (
                f"the changelog {topic}[{partition}] in {self._log.where} ends at {end}, before "
                f"what its state file {table.path} holds: the checkpoint {checkpoint} and "
                f"changes the changelog acknowledged after it, to offset {held} at least"
            )
        if table.rebuilding or self._when_behind is ChangelogBehind.REBUILD:
            self._rebuild(job, start, end, what)
            return None
        if self._when_behind is ChangelogBehind.START_EMPTY:
            why = f"{what} (state_changelog_behind=start_empty)"
            table.set_aside(why)
            return why
        raise ConfigError(
            f"state of {job.pid[0]}[{job.pid[1]}]: {what}: the changelog lost state the file "
            "holds (deleted and created again, cut short, or another cluster's), so nothing "
            "of the partition runs. Set state_changelog_behind=rebuild to write the file's "
            "state back into the changelog, or state_changelog_behind=start_empty to set "
            "the file aside and start from what the changelog holds"
        )

    def _rebuild(self, job: RestoreJob, start: int, end: int, what: str) -> None:
        """Read what the changelog holds into the file, then write every row of the file
        back into the changelog (marked in the file until done, so that a rebuild cut
        short is made again, not taken for a restored file)."""
        table, partition, topic = job.table, job.changelog_partition, self._changelog
        log.warning(
            "state of %s[%d]: %s: writing the file's state back into the changelog "
            "(state_changelog_behind=rebuild)",
            job.pid[0], job.pid[1], what,
        )  # fmt: skip
        generation = table.generation
        table.mark_rebuilding()
        if not self._load(job, start, end):
            return
        written = 0
        for rows in table.rows(READ_BATCH):
            if job.cancelled:
                return
            self._log.write(topic, partition, rows)
            written += len(rows)
        _, end = self._log.bounds(topic, partition)
        table.restored(end, generation)
        log.warning(
            "state of %s[%d]: rebuilt the changelog %s[%d] from its file: %d records written, "
            "it ends at %d",
            job.pid[0], job.pid[1], topic, partition, written, end,
        )  # fmt: skip
