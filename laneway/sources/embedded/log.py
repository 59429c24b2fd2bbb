"""EmbeddedLog: an in-process, optionally durable, partitioned log with consumer groups."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType

from laneway.errors import ConfigError, LanewayError, SourceError, UnknownTopicError
from laneway.options import WhenFull, choice, seconds, whole_number
from laneway.results import Produce
from laneway.sources.embedded.appender import Appender
from laneway.sources.embedded.coordinator import GroupCoordinator
from laneway.sources.embedded.group import GenerationEpochs, Member
from laneway.sources.embedded.partition import PartitionLog
from laneway.sources.embedded.partitioner import partition_for_key
from laneway.sources.embedded.producer import EmbeddedProducer
from laneway.sources.embedded.segment import LogDirectory
from laneway.sources.embedded.source import EmbeddedSource
from laneway.sources.embedded.transactions import EmbeddedTransaction
from laneway.sources.topic_names import check_topic_name, check_topic_names, unknown_topics
from laneway.types import CommitPosition, Header, Message, PartitionId

__all__ = ["EmbeddedLog", "EmbeddedLogStats", "EmbeddedSource"]


@dataclass(frozen=True)
class EmbeddedLogStats:
    """Counters of an :class:`EmbeddedLog` since it was opened.

    ``produced``: records appended. ``dropped_newest`` / ``dropped_oldest``: records
    discarded by those ``when_full`` policies. ``blocked``: produce calls that had to wait
    for room (``when_full="block"``). ``trimmed``: records released because every group had
    committed past them. ``partition_sizes``: records retained per partition (what counts
    against ``capacity``).
    """

    produced: int
    dropped_newest: int
    dropped_oldest: int
    blocked: int
    trimmed: int
    partition_sizes: Mapping[PartitionId, int]


class EmbeddedLog:
    """An in-process partitioned log with Kafka's semantics, for one machine, tests and benchmarks.

    Topics have a fixed number of partitions; ``produce`` routes a key with Kafka's default
    partitioner (murmur2), so a key lands on the partition number it would have in Kafka, and
    spreads ``key=None`` round robin. ``subscribe(topics, group)`` returns an
    :class:`EmbeddedSource`; sources of one group share the partitions (see
    :mod:`laneway.sources.embedded.group`) and commit offsets per group.

    Tuning:

    * ``capacity`` (default ``None``: unbounded) bounds the records retained per partition:
      those not yet committed by every group that subscribed to the topic. A group counts
      from its first ``subscribe`` (or its commits on disk) for the life of the log; a topic
      nobody subscribed to keeps everything, so it fills up too. ``when_full`` picks what a
      produce into a full partition does: ``"block"`` waits for a commit (bounded by
      ``produce(timeout=...)``, then :class:`LogFullError`; ``close()`` ends the wait with
      :class:`SourceError`), ``"error"`` raises :class:`LogFullError`, ``"drop_newest"``
      discards the new record (offset ``-1``), ``"drop_oldest"`` discards the oldest retained
      one (its offset disappears; readers skip the gap). Drops are counted in :meth:`stats`.
    * Records committed by every subscribed group are released from memory (in chunks).
    * ``path`` makes the log durable (format: :mod:`laneway.sources.embedded.segment`): records are
      flushed to the OS on every produce call (``produce_many``: once per call), commits are
      replaced atomically, and reopening restores topics, commits and the records above the
      committed floor. Trimming releases memory only; files are never rewritten.

    All methods are thread-safe: many threads may produce while sources poll in others.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        capacity: int | None = None,
        when_full: WhenFull | str = WhenFull.BLOCK,
    ) -> None:
        bound = None if capacity is None else whole_number(capacity, "capacity")
        policy = choice(WhenFull, when_full, "when_full")
        self._lock = threading.Lock()
        self._appender = Appender(self._lock, bound, policy, self._check_open)
        self._closed = False
        self._topics: dict[str, list[PartitionLog]] = {}
        self._counts: dict[str, int] = {}
        self._round_robin: dict[str, int] = {}
        self._directory = None if path is None else LogDirectory(Path(path))
        self._groups = GroupCoordinator(
            self._lock, self._topics, self._counts, self._directory, self._appender.room_made
        )
        if self._directory is not None:
            try:
                self._restore(self._directory)
            except BaseException:
                self.close()
                raise

    def _restore(self, directory: LogDirectory) -> None:
        self._groups.restore(directory.load_commits())
        for name, count in directory.load_topics().items():
            self._add_topic(name, count)
            for part in self._topics[name]:
                self._groups.refloor_locked(part)
        self._groups.trimmed = 0

    def _add_topic(self, name: str, count: int) -> None:
        parts: list[PartitionLog] = []
        self._topics[name] = parts
        for p in range(count):
            if self._directory is None:
                parts.append(PartitionLog(name, p))
            else:
                file, records, start, generations = self._directory.open_partition(name, p)
                parts.append(PartitionLog(name, p, records, start, file, generations))
        self._counts[name] = count
        self._round_robin[name] = 0

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create ``name`` with ``partitions`` partitions; a no-op if it exists with that count."""
        check_topic_name(name, "name")
        count = whole_number(partitions, "partitions")
        with self._lock:
            self._check_open()
            existing = self._counts.get(name)
            if existing is not None:
                if existing != count:
                    raise ConfigError(
                        f"partitions={count} conflicts with topic {name!r}, which exists "
                        f"with {existing} partitions"
                    )
                return
            self._add_topic(name, count)
            if self._directory is not None:
                self._directory.save_topics(self._counts)

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: Iterable[tuple[str, bytes | None]] | None = None,
        timestamp: int | None = None,
        partition: int | None = None,
        timeout: float | None = None,
    ) -> tuple[int, int]:
        """Append one record; return ``(partition, offset)`` (offset ``-1``: dropped as newest).

        ``timestamp`` is in ms (default: now). ``timeout`` bounds the wait of
        ``when_full="block"`` (default: wait until there is room or the log closes).
        """
        if value is not None and not isinstance(value, bytes):
            raise ConfigError(_not_bytes("value", value))
        if key is not None and not isinstance(key, bytes):
            raise ConfigError(_not_bytes("key", key))
        header_tuple: tuple[Header, ...] = ()
        if headers is not None and not (isinstance(headers, (list, tuple)) and not headers):
            header_tuple = _check_headers(headers)  # the common empty list costs nothing
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        elif isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0:
            raise ConfigError(f"timestamp={timestamp!r} is not valid; expected ms >= 0 or None")
        deadline = None if timeout is None else time.monotonic() + seconds(timeout, "timeout")
        with self._lock:
            part = self._route(topic, key, partition)
            offset = self._appender.append(part, key, value, header_tuple, timestamp, deadline)
            if part.file is not None:
                part.file.flush()
            if self._groups.poll_waiters:
                self._groups.data.notify_all()
        return part.partition, offset

    def produce_many(self, topic: str, records: Iterable[tuple[bytes | None, bytes | None]]) -> int:
        """Append ``(key, value)`` pairs with one lock and one flush; return how many were kept.

        Routing, timestamps (now) and the ``when_full`` policy are as for :meth:`produce`.
        """
        timestamp = time.time_ns() // 1_000_000
        kept = 0
        with self._lock:
            touched: set[PartitionLog] = set()
            try:
                for key, value in records:
                    if value is not None and not isinstance(value, bytes):
                        raise ConfigError(_not_bytes("value", value))
                    if key is not None and not isinstance(key, bytes):
                        raise ConfigError(_not_bytes("key", key))
                    part = self._route(topic, key, None)
                    kept += self._appender.append(part, key, value, (), timestamp, None) >= 0
                    touched.add(part)
            finally:
                for part in touched:
                    if part.file is not None:
                        part.file.flush()
                if self._groups.poll_waiters:
                    self._groups.data.notify_all()
        return kept

    def produce_records(
        self, records: Sequence[Produce], timeout: float | None = None
    ) -> list[tuple[int, str]]:
        """Append ``records`` (laneway's own writes: results, dead letters) in order, under
        one lock with one flush; return ``(position, error)`` of each record not kept (an
        unknown topic, a bad field, a full log), as :meth:`produce` would have raised or
        dropped it. ``timeout`` bounds each record's wait for room, as in :meth:`produce`."""
        refused: list[tuple[int, str]] = []
        timestamp = time.time_ns() // 1_000_000
        touched: set[PartitionLog] = set()
        with self._lock:
            try:
                for index, (topic, value, key, headers, partition) in enumerate(records):
                    deadline = None if timeout is None else time.monotonic() + timeout
                    try:
                        if value is not None and not isinstance(value, bytes):
                            raise ConfigError(_not_bytes("value", value))
                        if key is not None and not isinstance(key, bytes):
                            raise ConfigError(_not_bytes("key", key))
                        fields = () if not headers else _check_headers(headers)
                        part = self._route(topic, key, partition)
                        offset = self._appender.append(
                            part, key, value, fields, timestamp, deadline
                        )
                    except LanewayError as error:
                        refused.append((index, f"{type(error).__name__}: {error}"))
                        continue
                    touched.add(part)
                    if offset < 0:
                        refused.append((index, f"dropped: {topic} is full"))
            finally:
                for part in touched:
                    if part.file is not None:
                        part.file.flush()
                if touched and self._groups.poll_waiters:
                    self._groups.data.notify_all()
        return refused

    def _route(self, topic: str, key: bytes | None, partition: int | None) -> PartitionLog:
        self._check_open()
        parts = self._topics.get(topic)
        if parts is None:
            raise UnknownTopicError(self._unknown(topic))
        if partition is None:
            if key is not None:
                return parts[partition_for_key(key, len(parts))]
            turn = self._round_robin[topic]
            self._round_robin[topic] = turn + 1
            return parts[turn % len(parts)]
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise ConfigError(f"partition={partition!r} is not valid; expected an int or None")
        if not 0 <= partition < len(parts):
            raise ConfigError(
                f"partition={partition} is not valid; topic {topic!r} has partitions "
                f"0..{len(parts) - 1}"
            )
        return parts[partition]

    def subscribe(
        self, topics: Sequence[str] | str, group: str, *, session_timeout: float = 30.0
    ) -> EmbeddedSource:
        """A new member of consumer ``group`` reading ``topics`` (it joins on ``open``).

        ``session_timeout``: seconds without a poll after which the member's partitions are
        taken over by the group's other members (it then gets ``on_lost``). Time spent in a
        rebalance callback counts, so keep it above the consumer's ``drain_timeout``.
        """
        names = list(check_topic_names([topics] if isinstance(topics, str) else topics))
        if not isinstance(group, str) or not group:
            raise ConfigError(f"group={group!r} is not valid; expected a non-empty string")
        timeout = seconds(session_timeout, "session_timeout")
        with self._lock:
            self._check_open()
            for name in names:
                if name not in self._topics:
                    raise UnknownTopicError(self._unknown(name))
            self._groups.subscribe_locked(names, group)
        member = Member(group, tuple(sorted(set(names))), timeout)
        return EmbeddedSource(
            self._groups,
            member,
            lambda: EmbeddedProducer(self),
            partial(self._transaction, member),
            log=self,
        )

    def _transaction(self, member: Member) -> EmbeddedTransaction:
        if self._appender.capacity is not None:
            raise ConfigError(
                "exactly_once=True needs an EmbeddedLog without capacity: a transaction "
                "cannot wait for room while it holds the log"
            )
        return EmbeddedTransaction(partial(self._transact, member), GenerationEpochs(member))

    def _transact(
        self,
        member: Member,
        positions: Mapping[PartitionId, CommitPosition],
        records: Sequence[Produce],
    ) -> None:
        """Append ``records`` and commit ``positions`` for ``member`` in one step: unknown
        topics and partitions not owned are refused before anything changes."""
        timestamp = time.time_ns() // 1_000_000
        with self._lock:
            parts = [self._route(r.topic, r.key, r.partition) for r in records]
            saved = self._groups.commit_locked(member, positions)
            for part, r in zip(parts, records, strict=True):
                self._appender.append(part, r.key, r.value, tuple(r.headers or ()), timestamp, None)
            for part in set(parts):
                if part.file is not None:
                    part.file.flush()
            if self._groups.poll_waiters:
                self._groups.data.notify_all()
        self._groups.persist(member, saved)

    def end_offsets(self, topic: str) -> dict[int, int]:
        """The next offset of every partition of ``topic`` (Kafka's high watermarks)."""
        with self._lock:
            return {part.partition: part.end for part in self._parts_of(topic)}

    def start_offsets(self, topic: str) -> dict[int, int]:
        """The first retained offset of every partition of ``topic``."""
        with self._lock:
            return {part.partition: part.start for part in self._parts_of(topic)}

    def read(self, topic: str, partition: int, offset: int, limit: int) -> list[Message]:
        """Up to ``limit`` records of a partition from ``offset`` (or its first retained one),
        outside any group: what a state store's restore reads its changelog with."""
        with self._lock:
            parts = self._parts_of(topic)
            if not 0 <= partition < len(parts):
                raise ConfigError(f"partition={partition} is not valid for topic {topic!r}")
            return parts[partition].read(offset, limit)

    def committed(self, group: str, topic: str) -> dict[int, CommitPosition]:
        """Committed positions of ``group`` in ``topic`` (never committed partitions: absent)."""
        with self._lock:
            self._parts_of(topic)
            return self._groups.committed_locked(group, topic)

    def topics(self) -> list[str]:
        with self._lock:
            return sorted(self._topics)

    def partitions(self, topic: str) -> int:
        with self._lock:
            return len(self._parts_of(topic))

    def stats(self) -> EmbeddedLogStats:
        with self._lock:
            sizes = {
                (part.topic, part.partition): part.retained()
                for parts in self._topics.values()
                for part in parts
            }
            return EmbeddedLogStats(
                self._appender.produced,
                self._appender.dropped_newest,
                self._appender.dropped_oldest,
                self._appender.blocked,
                self._groups.trimmed,
                sizes,
            )

    def close(self) -> None:
        """Flush and close files; wake blocked producers and polls (they raise). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._groups.close_locked()
            self._appender.wake_all()
            for parts in self._topics.values():
                for part in parts:
                    if part.file is not None:
                        part.file.close()
        if self._directory is not None:
            self._directory.close()

    def __enter__(self) -> EmbeddedLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise SourceError("the EmbeddedLog is closed")

    def _parts_of(self, topic: str) -> list[PartitionLog]:
        parts = self._topics.get(topic)
        if parts is None:
            raise UnknownTopicError(self._unknown(topic))
        return parts

    def _unknown(self, topic: object) -> str:
        known = ", ".join(sorted(self._topics)) or "none"
        unknown = unknown_topics([str(topic)], self._topics)
        return f"{unknown}; create it with create_topic() first (topics: {known})"


def _not_bytes(name: str, data: object) -> str:
    """The error of a ``value`` or ``key`` that is neither bytes nor None."""
    return f"{name}={data!r} is not valid; expected bytes or None"


def _check_headers(headers: Iterable[tuple[str, bytes | None]]) -> tuple[Header, ...]:
    problem = ConfigError(
        f"headers={headers!r} is not valid; expected a list of (str, bytes | None) pairs"
    )
    if isinstance(headers, (str, bytes)):
        raise problem
    try:
        pairs = tuple((name, data) for name, data in headers)
    except (TypeError, ValueError):
        raise problem from None
    for name, data in pairs:
        if not isinstance(name, str) or not (data is None or isinstance(data, bytes)):
            raise problem
    return pairs
