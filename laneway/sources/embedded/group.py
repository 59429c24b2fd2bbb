"""Consumer-group coordination of the embedded log: membership, assignment and handover.

Everything here is plain bookkeeping; the :class:`laneway.EmbeddedLog` calls it while holding
its lock. The protocol mirrors Kafka's cooperative-sticky rebalancing:

* Each topic's partitions are balanced over the members subscribed to it (counts differ by at
  most one); members keep what they have where the balance allows, so a join or a leave only
  moves the partitions it must.
* A partition moves in two steps. Its old owner is told ``on_revoked`` in its next poll and
  keeps ownership (and may commit) until the callback has returned; only then is the
  partition free, and its new owner receives ``on_assigned`` in its own next poll. No
  partition is ever owned by two members.
* A member that leaves (``close``) frees its partitions at once, without a callback: the
  consumer commits before closing.
* A member that has not polled for ``session_timeout`` seconds is evicted by the next poll of
  another member of its group: its partitions are freed, commits for them are rejected
  (fencing), and its own next poll reports them through ``on_lost`` and then re-joins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from laneway.sources.embedded.partition import PartitionLog
from laneway.types import Message, PartitionId


class Member:
    """One :class:`EmbeddedSource` in its group: owned partitions, fetch positions, pauses."""

    def __init__(self, group: str, topics: tuple[str, ...], session_timeout: float) -> None:
        self.group = group
        self.topics = topics
        self.session_timeout = session_timeout
        self.last_seen = 0.0
        self.active = False
        self.seen_epoch = -1
        self.woken = False
        self.lost: list[PartitionId] = []
        self.owned: dict[PartitionId, PartitionLog] = {}
        self.positions: dict[PartitionId, int] = {}
        self.paused: set[PartitionId] = set()
        self._readable: list[tuple[PartitionId, PartitionLog]] = []
        self._rotation = 0

    def assign(self, pid: PartitionId, part: PartitionLog, position: int) -> None:
        self.owned[pid] = part
        self.positions[pid] = position
        self._refresh()

    def forget(self, pids: list[PartitionId]) -> None:
        for pid in pids:
            self.owned.pop(pid, None)
            self.positions.pop(pid, None)
            self.paused.discard(pid)
        self._refresh()

    def set_paused(self, pids: list[PartitionId], paused: bool) -> None:
        for pid in pids:
            if pid not in self.owned:
                continue
            if paused:
                self.paused.add(pid)
            else:
                self.paused.discard(pid)
        self._refresh()

    def unread(self, pids: list[PartitionId]) -> dict[PartitionId, int]:
        """Records beyond the fetch position, for each owned partition of ``pids``."""
        return {
            pid: self._behind(pid, part)
            for pid in pids
            if (part := self.owned.get(pid)) is not None
        }

    def ends(self, pids: list[PartitionId]) -> dict[PartitionId, int]:
        """The log end offset of each owned partition of ``pids``."""
        return {pid: part.end for pid in pids if (part := self.owned.get(pid)) is not None}

    def _behind(self, pid: PartitionId, part: PartitionLog) -> int:
        """Records of ``part`` from this member's fetch position to its end."""
        return max(0, part.end - max(self.positions[pid], part.start))

    def _refresh(self) -> None:
        self._readable = sorted(
            (item for item in self.owned.items() if item[0] not in self.paused),
            key=lambda item: item[0],
        )

    def take(self, max_messages: int) -> list[Message]:
        """Up to ``max_messages`` records, shared fairly over the readable partitions.

        The first partition (among those with records) rotates from call to call; each round
        gives every partition with records an equal share of what is left, so one busy
        partition cannot starve the others.
        """
        positions = self.positions
        pending = [(pid, part) for pid, part in self._readable if self._behind(pid, part)]
        if not pending:
            return []
        self._rotation += 1
        turn = self._rotation % len(pending)
        pending = pending[turn:] + pending[:turn]
        batch: list[Message] = []
        budget = max_messages
        while budget > 0 and pending:
            share = max(1, budget // len(pending))
            still: list[tuple[PartitionId, PartitionLog]] = []
            for pid, part in pending:
                chunk = part.read(positions[pid], min(share, budget))
                batch += chunk
                budget -= len(chunk)
                position = chunk[-1].offset + 1
                positions[pid] = position
                if budget == 0:
                    break
                if part.end > position:
                    still.append((pid, part))
            pending = still
        return batch


class GenerationEpochs:
    """The generations of the records a member polls (the
    :class:`~laneway.types.RecordEpochs` of an embedded-log source): looked up
    by offset in the partition's generations, so the batch itself need not be kept."""

    __slots__ = ("_member",)

    def __init__(self, member: Member) -> None:
        self._member = member

    def runs(self, start: int, messages: Sequence[Message]) -> list[tuple[int, int]] | None:
        if not messages:
            return None
        part = self._member.owned.get((messages[0].topic, messages[0].partition))
        if part is None:
            return None
        return part.generation_runs(messages[0].offset, messages[-1].offset)


class Group:
    """The members of one consumer group and who owns / should own each partition."""

    def __init__(self, name: str, partition_counts: Mapping[str, int]) -> None:
        self.name = name
        self.members: list[Member] = []
        self.owner: dict[PartitionId, Member] = {}
        self.target: dict[PartitionId, Member] = {}
        self.epoch = 0
        self._counts = partition_counts

    def join(self, member: Member, now: float) -> None:
        member.active = True
        member.last_seen = now
        self.members.append(member)
        self._rebalance()

    def leave(self, member: Member) -> list[PartitionId]:
        """Remove ``member``; free its partitions (returned) and rebalance."""
        freed = sorted(member.owned)
        for pid in freed:
            if self.owner.get(pid) is member:
                del self.owner[pid]
        member.forget(freed)
        member.active = False
        self.members.remove(member)
        self._rebalance()
        return freed

    def expire(self, now: float) -> bool:
        """Evict the members that have been silent for longer than their session timeout."""
        silent = [m for m in self.members if now - m.last_seen > m.session_timeout]
        for member in silent:
            member.lost.extend(self.leave(member))
        return bool(silent)

    def pending(self, member: Member) -> tuple[list[PartitionId], list[PartitionId]]:
        """(partitions ``member`` must revoke, free partitions it should now be assigned)."""
        target = self.target
        revoke = sorted(pid for pid in member.owned if target.get(pid) is not member)
        assign = sorted(pid for pid, m in target.items() if m is member and pid not in self.owner)
        return revoke, assign

    def release(self, member: Member, pids: list[PartitionId]) -> None:
        """``member`` has returned from ``on_revoked``: the partitions are free for their target."""
        mine = [pid for pid in pids if self.owner.get(pid) is member]
        for pid in mine:
            del self.owner[pid]
        member.forget(mine)
        self.epoch += 1

    def _rebalance(self) -> None:
        target: dict[PartitionId, Member] = {}
        topics = sorted({t for m in self.members for t in m.topics})
        for topic in topics:
            subscribers = [m for m in self.members if topic in m.topics]
            target.update(self._balance(topic, subscribers))
        self.target = target
        self.epoch += 1

    def _balance(self, topic: str, subscribers: list[Member]) -> dict[PartitionId, Member]:
        """Sticky balanced assignment of one topic's partitions over ``subscribers``."""
        pids = [(topic, p) for p in range(self._counts[topic])]
        kept: dict[Member, list[PartitionId]] = {m: [] for m in subscribers}
        pool: list[PartitionId] = []
        for pid in pids:
            current = self.target.get(pid)
            if current is not None and current in kept:
                kept[current].append(pid)
            else:
                pool.append(pid)
        even, extra = divmod(len(pids), len(subscribers))
        quota = {m: even + (1 if i < extra else 0) for i, m in enumerate(subscribers)}
        for member, held in kept.items():
            pool.extend(held[quota[member] :])
            del held[quota[member] :]
        pool.sort(reverse=True)
        result: dict[PartitionId, Member] = {}
        for member in subscribers:
            held = kept[member]
            while len(held) < quota[member]:
                held.append(pool.pop())
            result.update((pid, member) for pid in held)
        return result
