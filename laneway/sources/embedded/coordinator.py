"""Consumer groups, commits and trimming of one EmbeddedLog, shared by all its sources."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

from laneway.errors import SourceError
from laneway.logs import get_logger
from laneway.offsets.log_end import clip, describe_ranges, trusted_position
from laneway.sources.embedded.group import Group, Member
from laneway.sources.embedded.partition import PartitionLog
from laneway.sources.embedded.segment import LogDirectory
from laneway.types import CommitPosition, Message, PartitionId

logger = get_logger(__name__)

Events = tuple[list[PartitionId], list[PartitionId], dict[PartitionId, CommitPosition | None]]


def check_positions(positions: Mapping[PartitionId, CommitPosition]) -> None:
    """Raise SourceError for a position that is not a CommitPosition with offset >= 0."""
    for pid, position in positions.items():
        if (
            not isinstance(position, CommitPosition)
            or not isinstance(position.offset, int)
            or position.offset < 0
            or not isinstance(position.metadata, str)
        ):
            raise SourceError(
                f"cannot commit {position!r} for {pid}: expected a CommitPosition with "
                "offset >= 0 and str metadata"
            )


class GroupCoordinator:
    """Runs the consumer groups of an :class:`laneway.EmbeddedLog` under the log's lock.

    Holds the committed positions per group (persisted through the log directory in durable
    mode), which groups subscribed to which topic (they hold back trimming and count against
    capacity), and the :class:`~laneway.sources.embedded.group.Group` of every group name.
    Methods named ``*_locked`` expect the caller to hold the log's lock; the others take it.
    Pollers wait on :attr:`data`, which producers notify when :attr:`poll_waiters` is non-zero.
    """

    def __init__(
        self,
        lock: threading.Lock,
        topics: Mapping[str, list[PartitionLog]],
        counts: Mapping[str, int],
        directory: LogDirectory | None,
        on_trim: Callable[[], None],
    ) -> None:
        self._lock = lock
        self.data = threading.Condition(lock)
        self.poll_waiters = 0
        self.trimmed = 0
        self._closed = False
        self._topics = topics
        self._counts = counts
        self._directory = directory
        self._on_trim = on_trim
        self._groups: dict[str, Group] = {}
        self._interest: dict[str, set[str]] = {}
        self._commits: dict[str, dict[PartitionId, CommitPosition]] = {}
        self._versions: dict[str, int] = {}
        self._unchecked: set[PartitionId] = set()  # restored commits not checked yet

    def restore(self, commits: dict[str, dict[PartitionId, CommitPosition]]) -> None:
        """Adopt commits read from disk; their groups hold back trimming of those topics.
        Each partition's are checked against its end when it is first refloored."""
        self._commits = commits
        for group, positions in commits.items():
            for pid in positions:
                self._interest.setdefault(pid[0], set()).add(group)
                self._unchecked.add(pid)

    def subscribe_locked(self, topics: Sequence[str], group: str) -> None:
        for topic in topics:
            self._interest.setdefault(topic, set()).add(group)
        if group not in self._groups:
            self._groups[group] = Group(group, self._counts)

    def committed_locked(self, group: str, topic: str) -> dict[int, CommitPosition]:
        commits = self._commits.get(group, {})
        return {p: position for (t, p), position in sorted(commits.items()) if t == topic}

    def refloor_locked(self, part: PartitionLog) -> None:
        """Trim ``part`` up to the lowest commit among the groups subscribed to its topic."""
        pid = (part.topic, part.partition)
        if pid in self._unchecked:
            self._check_restored_locked(part)
        floor: int | None = None
        for group in self._interest.get(part.topic, ()):
            position = self._commits.get(group, {}).get(pid)
            if position is None:
                return
            if floor is None or position.offset < floor:
                floor = position.offset
        if floor is not None and floor > part.start:
            self.trimmed += part.advance_start(floor)
            self._on_trim()

    def _check_restored_locked(self, part: PartitionLog) -> None:
        """The partition was read from disk, maybe without its unsynced tail (cut off on
        open): a restored commit beyond its end becomes the end (every record the log kept
        was committed), and finished offsets at or past the end leave the metadata (see
        :mod:`laneway.offsets.log_end`), before anything is written there again. Either
        shows the log lost records: those written from the end on are of a new generation
        (see :meth:`PartitionLog.begin_generation
        <laneway.sources.embedded.partition.PartitionLog.begin_generation>`)."""
        pid = (part.topic, part.partition)
        self._unchecked.discard(pid)
        lost = False
        for group, positions in self._commits.items():
            position = positions.get(pid)
            if position is None:
                continue
            where = f"embedded:{group}: {part.topic}[{part.partition}]"
            fallback = f"the group is at the end, {part.end}, which it had committed past"
            trusted = trusted_position(where, position, part.end, fallback)
            lost = lost or trusted is not position
            positions[pid] = CommitPosition(part.end) if trusted is None else trusted
        if lost:
            part.begin_generation()

    def close_locked(self) -> None:
        self._closed = True
        self.data.notify_all()

    def _check_open(self, member: Member) -> Group:
        if self._closed:
            raise SourceError("the EmbeddedLog is closed")
        return self._groups[member.group]

    def join(self, member: Member) -> None:
        with self._lock:
            self._check_open(member).join(member, time.monotonic())
            self.data.notify_all()

    def leave(self, member: Member) -> None:
        with self._lock:
            if member.active:
                self._groups[member.group].leave(member)
                self.data.notify_all()

    def events(self, member: Member) -> Events:
        """Refresh liveness, evict silent peers, and hand out what ``member`` must be told.

        Returns (lost, to revoke, newly assigned with committed positions); the assignment
        is effective at once, revocations once :meth:`release` is called. A committed
        position is checked against the partition's end first (see
        :mod:`laneway.offsets.log_end`): one beyond it counts as nothing committed.
        """
        with self._lock:
            group = self._check_open(member)
            now = time.monotonic()
            member.last_seen = now
            if group.expire(now):
                self.data.notify_all()
            lost, member.lost = member.lost, []
            if not member.active:
                group.join(member, now)
                self.data.notify_all()
            if member.seen_epoch == group.epoch:
                return lost, [], {}
            member.seen_epoch = group.epoch
            revoke, assign = group.pending(member)
            commits = self._commits.get(member.group, {})
            assigned: dict[PartitionId, CommitPosition | None] = {}
            for pid in assign:
                part = self._topics[pid[0]][pid[1]]
                position = commits.get(pid)
                if position is not None:
                    position = trusted_position(
                        f"embedded:{member.group}: {pid[0]}[{pid[1]}]",
                        position,
                        part.end,
                        f"reading starts at the earliest retained offset, {part.start}",
                    )
                group.owner[pid] = member
                member.assign(pid, part, part.start if position is None else position.offset)
                assigned[pid] = position
            return lost, revoke, assigned

    def release(self, member: Member, pids: list[PartitionId]) -> None:
        """``member`` returned from ``on_revoked``: hand the partitions to their new owners."""
        with self._lock:
            self._groups[member.group].release(member, pids)
            member.last_seen = time.monotonic()
            self.data.notify_all()

    def fetch(
        self, member: Member, max_messages: int, deadline: float
    ) -> tuple[list[Message], bool]:
        """Records for ``member``, waiting (once, in a bounded slice) if there are none.

        Returns (records, poll again): the caller loops while records are empty and the
        second item is true — group events are pending, or the wait slice ended early.
        """
        with self._lock:
            group = self._check_open(member)
            batch = member.take(max_messages)
            if batch or member.woken:
                member.woken = False
                return batch, False
            if member.lost or not member.active or member.seen_epoch != group.epoch:
                return batch, True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return batch, False
            self.poll_waiters += 1
            try:
                self.data.wait(min(remaining, member.session_timeout / 3))
            finally:
                self.poll_waiters -= 1
            return batch, True

    def commit(self, member: Member, positions: Mapping[PartitionId, CommitPosition]) -> None:
        """Store ``positions`` for the member's group; all must be owned by ``member``."""
        with self._lock:
            saved = self.commit_locked(member, positions)
        self.persist(member, saved)

    def commit_locked(
        self, member: Member, positions: Mapping[PartitionId, CommitPosition]
    ) -> tuple[dict[PartitionId, CommitPosition], int]:
        """:meth:`commit` for a caller holding the lock (and doing more under it, as a
        transaction does); returns what :meth:`persist` must write, after the lock."""
        check_positions(positions)
        group = self._check_open(member)
        fenced = sorted(pid for pid in positions if group.owner.get(pid) is not member)
        if fenced:
            raise SourceError(
                f"commit rejected for partitions not owned by this member of group "
                f"{member.group!r} (revoked, lost or never assigned): {fenced}"
            )
        commits = self._commits.setdefault(member.group, {})
        commits.update({pid: self._claims_checked(member, pid, p) for pid, p in positions.items()})
        for topic, partition in positions:
            self.refloor_locked(self._topics[topic][partition])
        version = self._versions[member.group] = self._versions.get(member.group, 0) + 1
        return dict(commits), version

    def _claims_checked(
        self, member: Member, pid: PartitionId, position: CommitPosition
    ) -> CommitPosition:
        """``position`` without the finished offsets its metadata claims at or past the
        partition's end: no record is there yet, and the one written there later must not
        count as done (laneway never claims such offsets; a hand-made commit may)."""
        if not position.metadata:
            return position
        end = self._topics[pid[0]][pid[1]].end
        metadata, dropped = clip(position.metadata, position.offset, end)
        if not dropped:
            return position
        logger.warning(
            "embedded:%s: %s[%d]: a commit claims %s finished at or past the log end %d, where "
            "no record exists yet; dropped from its metadata",
            member.group,
            pid[0],
            pid[1],
            describe_ranges(dropped),
            end,
        )
        return CommitPosition(position.offset, metadata, position.leader_epoch)

    def persist(self, member: Member, saved: tuple[dict[PartitionId, CommitPosition], int]) -> None:
        """Write a commit to the log directory (durable mode; the lock is not held)."""
        if self._directory is not None:
            snapshot, version = saved
            try:
                self._directory.save_commits(member.group, snapshot, version)
            except OSError as exc:
                raise SourceError(f"could not persist commits of {member.group!r}: {exc}") from exc

    def set_paused(self, member: Member, pids: list[PartitionId], paused: bool) -> None:
        with self._lock:
            member.set_paused(pids, paused)

    def wakeup(self, member: Member) -> None:
        with self._lock:
            member.woken = True
            self.data.notify_all()

    def rewind(self, member: Member, positions: Mapping[PartitionId, int]) -> None:
        with self._lock:
            for pid, offset in positions.items():
                if pid in member.positions:
                    member.positions[pid] = offset

    def unread(self, member: Member, pids: list[PartitionId]) -> dict[PartitionId, int]:
        with self._lock:
            return member.unread(pids)

    def ends(self, member: Member, pids: list[PartitionId]) -> dict[PartitionId, int]:
        with self._lock:
            return member.ends(pids)

    def assignment(self, member: Member) -> list[PartitionId]:
        with self._lock:
            return sorted(member.owned)
