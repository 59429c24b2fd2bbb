"""KafkaShareSource: the Source protocol on a Kafka share group (KIP-932, queues for Kafka)."""

from __future__ import annotations

import os
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import (
    AcknowledgeType,
    IllegalStateException,
    KafkaError,
    KafkaException,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from laneway.config import ConsumerConfig
from laneway.errors import AccessDeniedError, ConfigError, SourceError
from laneway.logs import get_logger
from laneway.options import Ordering
from laneway.sources.base import RebalanceListener, SourceCapabilities
from laneway.sources.kafka.bounded_close import CLOSE_TIMEOUT_S, close_within
from laneway.sources.kafka.checks import check_reachable, check_topics
from laneway.sources.kafka.client_config import connection_subset
from laneway.sources.kafka.client_logs import (
    client_logging,
    describe,
    describe_error,
)
from laneway.sources.kafka.denials import Refusals
from laneway.sources.kafka.messages import messages_of
from laneway.sources.kafka.producer import KafkaProducer
from laneway.sources.kafka.topic_watch import TopicWatch
from laneway.sources.share.acknowledgement import Acknowledgement
from laneway.sources.share.crash_journal import CrashJournal
from laneway.sources.share.group import GroupLimits, prepare_group
from laneway.sources.share.preview_warning import install_preview_filter
from laneway.sources.share.progress import ShareProgress
from laneway.sources.share.settings import StartAt, build_share_settings
from laneway.sources.targets import CONNECT_TIMEOUT
from laneway.types import Message, PartitionId

logger = get_logger(__name__)

SHARE_GROUP = SourceCapabilities(
    orderings=frozenset({Ordering.UNORDERED}),
    why_unordered=(
        "a share group hands the records of one partition to many members at once and "
        "redelivers failed ones later, so no member can keep per-key or per-partition order"
    ),
    pauses=False,
    redelivers=True,
    events_in_poll=False,
    waits=True,
)
"""Unordered only; no pause (backpressure stops polling); retries by redelivery; topics
to wait for."""

_KINDS = {
    Acknowledgement.ACCEPT: AcknowledgeType.ACCEPT,
    Acknowledgement.RELEASE: AcknowledgeType.RELEASE,
    Acknowledgement.REJECT: AcknowledgeType.REJECT,
}
_FATAL = KafkaError._FATAL


class KafkaShareSource:
    """Consumes a Kafka share group: any number of members share the topics' partitions,
    and each record is acknowledged on its own (Kafka >= 4.2, feature ``share.version=1``).

    ``KafkaShareSource(bootstrap_servers, group, topics, config)``; ``config`` holds extra
    librdkafka settings (``share.acknowledgement.mode`` is laneway's: explicit). Use it with
    ``ordering="unordered"``, the only order a share group can keep. How each record is
    acknowledged, retried and guarded: :class:`~laneway.sources.share.progress.ShareProgress`.

    *Where a new group starts* (``start_at``): ``"earliest"`` by default, so nothing
    produced before the first member joined is skipped; see
    :class:`~laneway.sources.share.settings.StartAt`.

    *Backpressure without pause()*: a share group has no pause, and explicit
    acknowledgement forbids the next fetch until every record of the previous one is
    acknowledged. So one fetch is at most ``max.poll.records`` records (more when the
    broker rounds up to the end of a producer's record batch); records beyond what the
    consumer asks for wait here, locked for this member; and no fetch is made while the
    buffer is full or records are unacknowledged. Not fetching is safe within two limits:
    each record must be acknowledged within the group's record lock
    (``share.record.lock.duration.ms``, 30 s by default, 15-60 s allowed by the broker;
    the lock guard warns at 80%), and ``poll()`` must come within librdkafka's
    ``max.poll.interval.ms`` (300 s) or the member leaves the group. Heartbeats go on in
    librdkafka's background thread, so the session (45 s) never depends on polling.

    *Crash loops* (``crash_journal``): a record that kills the process is redelivered like
    any other, with nothing failing; see :mod:`laneway.sources.share.crash_journal`. ``True`` (the
    default) keeps the journal under the temporary directory, shared by this group's
    members on this machine; a path puts it there (a volume that survives a container's
    restart); ``False`` turns it off.

    *Topics, access, stopping*: topics are watched as a
    :class:`~laneway.sources.kafka.source.KafkaSource`'s are (``wait_for_topics``: see
    :mod:`laneway.sources.kafka.topic_watch`); a missing ACL raises
    :class:`~laneway.errors.AccessDeniedError` naming it; :meth:`close` goes on without
    librdkafka's close after :data:`~laneway.sources.kafka.bounded_close.CLOSE_TIMEOUT_S`.

    ``group_config``: share group configs laneway sets before joining, e.g.
    ``{"share.record.lock.duration.ms": 60000, "share.heartbeat.interval.ms": 1000}``
    (within the broker's ``group.share.min/max.*`` bounds; needs ALTER_CONFIGS on the group).

    Tuning: ``max.poll.records`` (librdkafka, default 500) is the fetch size: larger
    amortizes a fetch round trip (~5 ms here) over more records, smaller spreads records
    over more members and keeps a fetch well inside the lock. Producers decide the real
    grain: the broker hands out whole record batches, so a backlog written in batches of
    thousands goes to members thousands at a time (``batch.num.messages`` on the producer
    bounds that). Joining takes a heartbeat interval (``share.heartbeat.interval.ms``, a
    group config, 5 s by default).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        group: str,
        topics: Sequence[str],
        config: Mapping[str, Any] | None = None,
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
        wait_for_topics: bool = False,
        start_at: StartAt | str = StartAt.EARLIEST,
        crash_journal: bool | str | os.PathLike[str] = True,
        group_config: Mapping[str, str | int] | None = None,
    ) -> None:
        settings = build_share_settings(
            bootstrap_servers,
            group,
            topics,
            config,
            connect_timeout,
            wait_for_topics,
            start_at,
            crash_journal,
            group_config,
        )
        self._settings = settings
        self._name = f"kafka-share:{settings.bootstrap_servers}/{settings.group}"
        consumer_config = dict(settings.consumer_config)
        install_preview_filter()
        self._refusals = Refusals(consumer_config, settings.group, settings.topics)
        self._errors = client_logging(self._name, consumer_config, self._refusals.request)
        self._watch = TopicWatch(self._name, settings.topics, settings.wait_for_topics, None)
        self._admin: AdminClient | None = None
        self._connection = connection_subset(consumer_config)
        try:
            self._consumer = ShareConsumer(consumer_config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise ConfigError(f"config is not valid for librdkafka: {describe(exc)}") from exc
        self._consumer.set_acknowledgement_commit_callback(self._on_acknowledged)
        self._journal = (
            None if settings.crash_journal is None else CrashJournal(settings.crash_journal)
        )
        self._limits = GroupLimits()
        self._stash: deque[Message] = deque()
        self._unacknowledged = 0
        self._acknowledged_since_flush = False
        self._acquired_at = 0.0
        self._refused: Counter[str] = Counter()
        self._opened = False
        self._closed = False

    # -- identity and capabilities ----------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def group(self) -> str:
        return self._settings.group

    @property
    def capabilities(self) -> SourceCapabilities:
        return SHARE_GROUP

    def waiting_for(self) -> str:
        """Why not ready: the subscribed topics the cluster does not have now, if any."""
        return self._watch.waiting()

    @property
    def limits(self) -> GroupLimits:
        """The group's record lock and delivery limit (read when the source opens)."""
        return self._limits

    def progress(self, config: ConsumerConfig) -> ShareProgress:
        """Per-record acknowledgement through this source (see :class:`ShareProgress`)."""
        return ShareProgress(self, config, self._journal)

    def producer(self) -> KafkaProducer:
        """A new producer into the same cluster (dead letters, results)."""
        return KafkaProducer(dict(self._connection), f"{self._name} producer")

    # -- the Source protocol ----------------------------------------------------------

    def open(self, listener: RebalanceListener) -> None:
        """Check the cluster and topics, apply ``start_at`` to the group, read its limits,
        start the crash journal and join. The listener is never called: a share group
        assigns no partition to one member alone."""
        self._check_usable()
        if self._opened:
            raise SourceError(f"{self._name}: open() was already called")
        settings = self._settings
        admin_config = dict(self._connection)
        client_logging(f"{self._name} (admin)", admin_config)
        admin = AdminClient(admin_config)  # type: ignore[arg-type]
        timeout = settings.connect_timeout
        check_reachable(
            admin, settings.bootstrap_servers, timeout, self._errors, lambda: admin.poll(0)
        )
        access = self._refusals.access
        if not settings.wait_for_topics:
            check_topics(admin, settings.topics, timeout, access)
        else:
            self._watch.opened(admin)  # the topics it waits for: not ready meanwhile
        self._admin = admin  # the topic watch's client from now on
        self._limits = prepare_group(
            admin,
            settings.group,
            settings.topics,
            settings.start_at,
            settings.group_config,
            timeout,
            access,
        )
        if self._journal is not None:
            try:
                self._journal.open()
            except OSError as error:
                raise SourceError(
                    f"{self._name}: the crash journal {self._journal.directory} is not "
                    f"usable: {error}; pass crash_journal=<a writable directory> or False"
                ) from error
        try:
            self._consumer.subscribe(list(settings.topics))
        except KafkaException as exc:
            raise SourceError(f"{self._name}: subscribe failed: {describe(exc)}") from exc
        self._opened = True

    def poll(self, max_messages: int, timeout: float) -> list[Message]:
        """Up to ``max_messages`` records: those left from the latest fetch, else a new
        fetch, which is only possible once every record of the latest one is
        acknowledged (before that, an empty list). Waits up to ``timeout`` s for a fetch."""
        self._check_opened()
        stash = self._stash
        if stash:
            return _take(stash, max_messages)
        if self._unacknowledged:
            return []
        assert self._admin is not None
        self._watch.before_poll(self._admin)  # missing topics: looked for again, or fatal
        try:
            batch = self._consumer.poll(timeout)
        except (KafkaException, IllegalStateException) as exc:
            self._refusals.check(exc)
            raise SourceError(f"{self._name}: poll failed: {describe(exc)}") from exc
        if self._errors.denied is not None:  # reported to error_cb inside poll()
            raise AccessDeniedError(str(self._errors.denied))
        if not batch:
            return []
        self._acquired_at = time.monotonic()
        self._acknowledged_since_flush = False
        messages = messages_of(
            batch, self._skip_or_raise, count_deliveries=True, refusal=self._refusals.of
        )
        self._unacknowledged = len(messages)
        if self._watch.missing:  # records of a topic it waits for: the topic exists now
            self._watch.assigned({message.topic for message in messages})
        if len(messages) <= max_messages:
            return messages
        stash.extend(messages[max_messages:])
        return messages[:max_messages]

    def pause(self, partitions: Iterable[PartitionId]) -> None:
        """A share group cannot pause a partition: ignored (backpressure stops polling)."""

    def resume(self, partitions: Iterable[PartitionId]) -> None:
        """Nothing is ever paused: ignored."""

    def unread(self, partitions: Iterable[PartitionId]) -> dict[PartitionId, int]:
        """Unknown for a share group (its partitions' records go to every member)."""
        return {}

    def log_ends(self, partitions: Iterable[PartitionId]) -> dict[PartitionId, int]:
        """Unknown: a share group has no committed offsets, so no lag to compute."""
        return {}

    def close(self) -> None:
        """Release the records fetched but never returned, send every acknowledgement,
        leave the group (the broker releases what is still unacknowledged). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._stash:
                self.acknowledge(list(self._stash), Acknowledgement.RELEASE)
                self._stash.clear()
            if not close_within(self._consumer.close, CLOSE_TIMEOUT_S, "laneway-share-close"):
                logger.error(
                    "%s: the share consumer did not close within %.0f s; leaving without it: "
                    "the broker releases the records this member still holds, and those "
                    "whose acknowledgement was not sent are delivered again",
                    self._name,
                    CLOSE_TIMEOUT_S,
                )
                return
            refused = self.refused()  # answers to the last acknowledgements come in close()
            if refused:
                logger.warning(
                    "%s: the broker refused %d acknowledgement(s) sent at close (%s): their "
                    "record lock had expired, so they are delivered again",
                    self._name,
                    sum(refused.values()),
                    ", ".join(f"{topic}: {count}" for topic, count in sorted(refused.items())),
                )
        except KafkaException as exc:
            raise SourceError(f"{self._name}: close failed: {describe(exc)}") from exc
        finally:
            if self._journal is not None:
                self._journal.close()

    # -- RecordAcknowledger: what ShareProgress uses -------------------------------------

    def acknowledge(self, messages: list[Message], kind: Acknowledgement) -> None:
        """Acknowledge ``messages`` locally (sent with the next fetch or :meth:`flush`)."""
        acknowledge = self._consumer.acknowledge_offset
        how = _KINDS[kind]
        refused = 0
        for m in messages:
            try:
                acknowledge(m.topic, m.partition, m.offset, how)
            except (KafkaException, IllegalStateException):  # no longer held by this member
                self._refused[m.topic] += 1
                refused += 1
        self._unacknowledged -= len(messages)
        self._acknowledged_since_flush = True
        if refused:
            logger.debug("%s: %d acknowledgement(s) refused locally", self._name, refused)

    def flush(self) -> bool:
        """Send the acknowledgements made since the last fetch or flush, without waiting."""
        if not self._acknowledged_since_flush or self._closed:
            return False
        self._acknowledged_since_flush = False
        try:
            self._consumer.commit_async()
        except KafkaException as exc:
            logger.warning("%s: sending acknowledgements failed: %s", self._name, describe(exc))
            return False
        return True

    def refused(self) -> dict[str, int]:
        """Acknowledgements the broker (or the client) refused since the last call."""
        refused, self._refused = dict(self._refused), Counter()
        return refused

    @property
    def awaiting_acknowledgement(self) -> int:
        return 0 if self._stash else self._unacknowledged

    @property
    def unacknowledged(self) -> int:
        return self._unacknowledged

    @property
    def acquired_at(self) -> float:
        return self._acquired_at

    @property
    def lock_duration(self) -> float:
        return self._limits.lock_duration

    @property
    def delivery_limit(self) -> int:
        return self._limits.delivery_limit

    # -- internals ------------------------------------------------------------------

    def _on_acknowledged(
        self, offsets: dict[TopicPartition, set[int]], error: KafkaException | None
    ) -> None:
        if error is None:
            return
        for tp, acked in offsets.items():
            self._refused[tp.topic] += len(acked)
        logger.debug("%s: acknowledgements refused: %s", self._name, describe(error))

    def _skip_or_raise(self, error: KafkaError) -> None:
        if error.code() == _FATAL or error.fatal():
            raise SourceError(f"{self._name}: fatal consumer error: {describe_error(error)}")
        if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            self._watch.reported()  # a subscribed topic is missing: look at the next poll
        logger.warning("%s: consumer error (skipped): %s", self._name, describe_error(error))

    def _check_usable(self) -> None:
        if self._closed:
            raise SourceError(f"{self._name}: the source is closed")

    def _check_opened(self) -> None:
        self._check_usable()
        if not self._opened:
            raise SourceError(f"{self._name}: call open(listener) first")


def _take(stash: deque[Message], most: int) -> list[Message]:
    popleft = stash.popleft
    return [popleft() for _ in range(min(most, len(stash)))]
