"""KafkaSource: the Source protocol on a confluent-kafka (librdkafka) consumer."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from laneway.config import ConsumerConfig
from laneway.errors import AccessDeniedError, ConfigError, SourceError
from laneway.logs import get_logger
from laneway.offsets.offset_progress import OffsetProgress
from laneway.sources.base import RebalanceListener, SourceCapabilities
from laneway.sources.kafka.assignment import Assignment
from laneway.sources.kafka.bounded_close import CLOSE_TIMEOUT_S, close_within
from laneway.sources.kafka.checks import check_reachable, check_topics
from laneway.sources.kafka.client_config import build_settings, connection_config, prefetch_settings
from laneway.sources.kafka.client_logs import (
    client_logging,
    describe,
    describe_error,
    kafka_error,
)
from laneway.sources.kafka.commits import commit_failure, commit_offsets
from laneway.sources.kafka.deleted_records import DeletedRecords
from laneway.sources.kafka.denials import Refusals
from laneway.sources.kafka.group_protocol import Rejoins
from laneway.sources.kafka.join_watch import FALL_BACK, JoinWatch
from laneway.sources.kafka.messages import PolledEpochs, messages_of
from laneway.sources.kafka.positions import cached_log_ends, committed_partition, unread_counts
from laneway.sources.kafka.producer import KafkaProducer
from laneway.sources.kafka.topic_watch import TopicWatch
from laneway.sources.kafka.transactions import (
    KafkaTransaction,
    check_isolation,
    transaction_settings,
    transactional_id,
)
from laneway.sources.targets import CONNECT_TIMEOUT
from laneway.types import CommitPosition, Message, PartitionId

logger = get_logger(__name__)

_PARTITION_EOF = KafkaError._PARTITION_EOF
_FATAL = KafkaError._FATAL

KAFKA_GROUP = SourceCapabilities(transactions=True, prefetches=True, waits=True, rewinds=True)
"""What a Kafka consumer-group source can do."""


class KafkaSource:
    """Reads a Kafka consumer group's partitions in batches and commits offsets synchronously.

    ``KafkaSource(bootstrap_servers, group, topics, config)`` where ``config`` holds extra
    librdkafka settings. :meth:`open` fails with :class:`~laneway.errors.SourceError` when
    no broker answers within ``connect_timeout`` seconds (default
    :data:`~laneway.sources.targets.CONNECT_TIMEOUT`) and with
    :class:`~laneway.errors.UnknownTopicError` for a topic the cluster does not have,
    unless ``wait_for_topics=True``. librdkafka's own log lines and errors go to the
    ``laneway.librdkafka`` and ``laneway.kafka`` loggers (see
    :mod:`laneway.sources.kafka.client_logs`). Offsets are committed only through :meth:`commit`:
    ``enable.auto.commit`` and ``enable.auto.offset.store`` are forced off (asking for them
    is a :class:`~laneway.errors.ConfigError`). Defaults the user may override:
    ``auto.offset.reset=earliest`` and ``group.protocol=consumer`` (KIP-848; classic on
    request, for a config written for it, or on a cluster without it, and then
    ``partition.assignment.strategy=cooperative-sticky``: see
    :mod:`laneway.sources.kafka.group_protocol`).
    ``transactional_id`` names this member's transactional producer under
    ``exactly_once=True`` (see :meth:`transaction`).

    Threading: every method must be called from one thread. The rebalance callbacks run on
    that thread too: librdkafka invokes them from inside ``consume()`` (so from
    :meth:`poll`) and from ``close()``. The listener may therefore call :meth:`commit`
    from ``on_revoked`` and the commit completes, with the partitions still owned, before
    librdkafka gives them up.

    On assignment the source reads the group's committed offsets (and metadata) for the new
    partitions and checks them against the log ends (finished offsets at or past the end
    are dropped from the metadata; a committed offset past the end is not used, see
    :mod:`laneway.sources.kafka.starts`), starts fetching exactly there
    (``auto.offset.reset`` applies where nothing is committed), resumes them in case
    librdkafka kept an earlier pause, and reports the positions to the listener's
    ``on_assigned``.

    Tuning: ``poll`` converts each record into a :class:`~laneway.types.Message` (seven
    C calls and one object, about 0.7 us per message on top of ``consume()``). Measured on a
    local broker with 200,000 small messages on 8 partitions and ``max_messages=1000``:
    end to end ~890k msg/s for ``poll`` vs ~1.56M msg/s for a bare ``consume()`` loop
    (ratio ~0.57); with everything already prefetched ~0.95M vs ~2.55M msg/s (ratio
    ~0.37). Pass ``max_messages`` in the thousands to amortize each call, and keep
    ``timeout`` short when latency matters: ``consume()`` waits for a *full* batch until
    the timeout expires. librdkafka prefetches up to ``queued.max.messages.kbytes`` per
    consumer; the consumer sizes that from its ``max_buffered_bytes`` (:meth:`bound_prefetch`:
    64 MiB for the default 256 MiB). The fetch
    defaults chosen here are explained in :mod:`laneway.sources.kafka.client_config`. For fast
    group joins in tests lower ``heartbeat.interval.ms`` (and ``session.timeout.ms`` to the
    broker's ``group.min.session.timeout.ms``).
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
        transactional_id: str | None = None,
    ) -> None:
        if transactional_id is not None and (
            not isinstance(transactional_id, str) or not transactional_id
        ):
            raise ConfigError(
                f"transactional_id={transactional_id!r} is not valid; expected a non-empty "
                "string naming this member's producer for exactly_once=True, or None"
            )
        self._transactional_id = transactional_id
        settings = build_settings(
            bootstrap_servers, group, topics, config, connect_timeout, wait_for_topics
        )
        self._settings = settings
        self._topics = list(settings.topics)
        self._name = f"kafka:{settings.bootstrap_servers}/{settings.group}"
        self._connection = connection_config(settings)
        self._consumer_config = dict(settings.consumer_config)
        self._transaction_config = transaction_settings(self._consumer_config)
        self._refusals = Refusals(self._consumer_config, settings.group, self._topics)
        reset = str(self._consumer_config.get("auto.offset.reset", "earliest"))
        self._deleted = DeletedRecords(self._name, reset)
        self._consumer_config.setdefault("logger", self._deleted)  # librdkafka's lines
        self._errors = client_logging(self._name, self._consumer_config, self._refusals.request)
        self._consumer = self._new_client()
        self._assignment = Assignment(self._name, settings.incremental, reset, self._deleted)
        lose = self._assignment.lose_topics
        self._watch = TopicWatch(self._name, self._topics, settings.wait_for_topics, lose)
        self._assignment.watch = self._watch
        self._epochs = PolledEpochs()
        self._rejoins = Rejoins(self._name, settings.protocol_chosen)
        self._rejoin_at: float | None = None
        chosen = settings.protocol_chosen
        self._joins = JoinWatch(self._name, settings.group, self._connection, chosen)
        self._closed = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def group(self) -> str:
        return self._settings.group

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics subscribed to."""
        return tuple(self._topics)

    @property
    def connection(self) -> dict[str, object]:
        """The settings another client of the same cluster connects with (a state store's
        changelog reader)."""
        return dict(self._connection)

    @property
    def assignment(self) -> frozenset[PartitionId]:
        """Partitions currently owned (as reported to the listener)."""
        return frozenset(self._assignment.owned)

    def producer(self) -> KafkaProducer:
        """A new producer into the same cluster (see :class:`KafkaProducer`)."""
        return KafkaProducer(self._connection, f"{self._name} producer")

    def transaction(self) -> KafkaTransaction:
        """A transactional producer for ``exactly_once=True`` (see
        :mod:`laneway.sources.kafka.transactions`). Its ``transactional.id`` is the
        ``transactional_id`` given, else ``laneway-<group>-<group.instance.id>``, else
        ``laneway-<group>-<host>-<pid>``: give one that a restarted member reuses (a slot
        number, a pod name) so that it fences its crashed predecessor at once.
        ``transaction.timeout.ms`` in ``config`` goes to this producer (10 s by default);
        ``isolation.level=read_uncommitted`` is a ConfigError here."""
        check_isolation(self._consumer_config)
        instance = self._settings.consumer_config.get("group.instance.id")
        tid = self._transactional_id or transactional_id(self._settings.group, instance)
        return KafkaTransaction(
            self._connection,
            self,
            tid,
            self._name,
            self._transaction_config,
            group=self._settings.group,
            record_epochs=self._epochs,
        )

    @property
    def capabilities(self) -> SourceCapabilities:
        """Every ordering, pausable partitions, retries in place, transactions, a prefetch
        (librdkafka's queue, see :meth:`bound_prefetch`), topics to wait for, rewinds."""
        return KAFKA_GROUP

    def waiting_for(self) -> str:
        """Why not ready: the subscribed topics the cluster does not have now, or a join the
        group coordinator has not taken in (see :mod:`laneway.sources.kafka.join_watch`)."""
        return self._watch.waiting() or self._joins.waiting()

    def progress(self, config: ConsumerConfig) -> OffsetProgress:
        """Progress by committed offsets, through :meth:`commit`, checked against the leader
        epochs of the records polled (see :class:`~laneway.sources.kafka.messages.PolledEpochs`)."""
        progress = OffsetProgress(
            self, config.metadata_max_bytes, self._epochs, read_positions=self.read_positions
        )
        self._deleted.deleted = progress.records_deleted
        return progress

    def bound_prefetch(self, max_bytes: int) -> None:
        """Size librdkafka's prefetch for ``max_bytes`` (see
        :func:`~laneway.sources.kafka.client_config.prefetch_settings`); before :meth:`open` only.

        The consumer calls it with its share of ``max_buffered_bytes``. When a setting
        changes, the (not yet subscribed) librdkafka client is created anew with it.
        """
        self._check_usable()
        if self._assignment.listener is not None:
            raise SourceError(f"{self._name}: bound_prefetch() must come before open()")
        changed = prefetch_settings(max_bytes, self._consumer_config)
        if changed:
            logger.debug("%s: prefetch bounded by %s", self._name, changed)
            self._consumer_config.update(changed)
            self._consumer.close()
            self._consumer = self._new_client()

    @property
    def client_config(self) -> dict[str, object]:
        """The librdkafka settings the client runs with (callbacks included)."""
        return dict(self._consumer_config)

    def consumer_group_metadata(self) -> object:
        """The group metadata of the member now (for its transactions: the client is new
        when the source fell back to the classic protocol)."""
        return self._consumer.consumer_group_metadata()

    def open(self, listener: RebalanceListener) -> None:
        """Subscribe to the topics; assignments arrive through ``listener`` during :meth:`poll`."""
        self._check_usable()
        if self._assignment.listener is not None:
            raise SourceError(f"{self._name}: open() was already called")
        settings = self._settings
        consumer = self._consumer
        check_reachable(
            consumer,
            settings.bootstrap_servers,
            settings.connect_timeout,
            self._errors,
            lambda: self._refusals.check_events(consumer.consume(1, 0)),
        )
        assignment = self._assignment
        if not settings.wait_for_topics:
            timeout, access = settings.connect_timeout, self._refusals.access
            check_topics(self._consumer, self._topics, timeout, access)
        else:
            self._watch.opened(consumer)  # the topics it waits for: not ready meanwhile
        assignment.listener = listener
        self._subscribe()

    def _subscribe(self) -> None:
        assignment = self._assignment
        try:
            self._consumer.subscribe(
                self._topics,
                on_assign=assignment.on_assign,
                on_revoke=assignment.on_revoke,
                on_lost=assignment.on_lost,
            )
        except KafkaException as exc:
            raise SourceError(f"{self._name}: subscribe failed: {describe(exc)}") from exc
        self._joins.subscribed(str(self._consumer_config["group.protocol"]), time.monotonic())

    def _rejoin_later(self, error: KafkaError) -> bool:
        """After a fatal error at join: whether to join again (see
        :class:`~laneway.sources.kafka.group_protocol.Rejoins`), with a new client made now
        and subscribed by :meth:`poll` once the delay is over."""
        plan = self._rejoins.plan(
            error, self._consumer_config, bool(self._assignment.owned), time.monotonic()
        )
        if plan is None:
            return False
        self._consumer_config, delay = plan
        self._replace_client(delay)
        return True

    def _replace_client(self, delay: float) -> None:
        """Close the client and make a new one on the current settings, subscribed by
        :meth:`poll` after ``delay`` seconds."""
        failed, self._consumer = self._consumer, self._new_client()
        with contextlib.suppress(KafkaException, RuntimeError):
            failed.close()
        self._rejoin_at = time.monotonic() + delay

    def _rejoin_when_due(self, timeout: float) -> bool:
        """Subscribe the new client once its delay is over; whether it is (else this
        waits up to ``timeout`` s of the delay, and the poll returns nothing)."""
        if self._rejoin_at is None:
            return True
        left = self._rejoin_at - time.monotonic()
        if left > 0:
            time.sleep(min(left, timeout))
            return False
        self._rejoin_at = None
        self._subscribe()
        return True

    def poll(self, max_messages: int, timeout: float) -> list[Message]:
        """Return up to ``max_messages`` messages, in offset order per partition.

        Returns as soon as any message is available: what is already fetched comes back at
        once, and only when nothing is there does it wait, up to ``timeout`` seconds, for the
        first message (librdkafka's ``consume(n, timeout)`` alone would wait for a full
        batch of ``n``, adding the whole timeout to every short batch, e.g. right after a
        partition is resumed). Rebalance callbacks run inside this call (what the listener
        raises there is raised once the callback is over). Partition-EOF events and
        non-fatal errors are logged and skipped; a fatal error (e.g. this static member
        was fenced) reports the owned partitions to ``on_lost`` and raises
        :class:`SourceError`.
        """
        self._check_opened()
        if not self._rejoin_when_due(timeout):
            return []
        self._watch.before_poll(self._consumer)  # missing topics: looked for again, or fatal
        joins = self._joins
        if not joins.joined and joins.check(self._consumer, time.monotonic()) == FALL_BACK:
            why = "the group coordinator never took this member in"
            self._consumer_config = self._rejoins.fall_back(self._consumer_config, why)
            self._replace_client(0.0)
            return []
        consume = self._consumer.consume
        try:
            batch = consume(max_messages, 0)
            if not batch and timeout > 0:
                batch = consume(1, timeout)
                if batch and max_messages > 1:
                    batch += consume(max_messages - 1, 0)
        except KafkaException as exc:
            self._refusals.check(exc)
            raise SourceError(f"{self._name}: consume failed: {describe(exc)}") from exc
        self._assignment.raise_failure()  # what a rebalance callback raised, if anything
        if self._errors.denied is not None:  # reported to error_cb inside consume()
            raise AccessDeniedError(str(self._errors.denied))
        messages = messages_of(batch, self._skip_or_raise, refusal=self._refusals.of)
        self._deleted.report(self._consumer, self._assignment.owned)
        self._epochs.polled(batch, messages)
        if self._assignment.owned:
            self._rejoins.joined()
            joins.assigned()
        return messages

    def commit(self, positions: Mapping[PartitionId, CommitPosition]) -> None:
        """Commit ``positions`` synchronously; any failed partition raises :class:`SourceError`.

        Only owned partitions may be committed (a commit for a partition another member now
        owns would overwrite its progress); inside ``on_revoked`` the revoked partitions are
        still owned. A commit that raced a new member epoch (``group.protocol=consumer``)
        is made again with it (see :mod:`laneway.sources.kafka.commits`).
        """
        self._check_opened()
        if not positions:
            return
        foreign = sorted(set(positions) - self._assignment.owned)
        if foreign:
            raise SourceError(f"{self._name}: cannot commit partitions not owned: {foreign}")
        offsets = [committed_partition(pid, pos) for pid, pos in positions.items()]
        try:
            results = commit_offsets(self._consumer, offsets)
        except KafkaException as exc:
            self._refusals.check(exc)
            self._watch.screen(kafka_error(exc))  # a topic deleted?
            raise SourceError(commit_failure(self._name, exc, positions)) from exc
        failed = [(tp.topic, tp.partition, tp.error) for tp in results if tp.error is not None]
        for topic, _, error in failed:
            self._refusals.check(error, topic)
        self._watch.screen(*(error for _, _, error in failed))
        if failed:
            detail = ", ".join(f"{t}[{p}]: {describe_error(e)}" for t, p, e in failed)
            raise SourceError(f"{self._name}: commit failed for {detail}")

    def pause(self, partitions: Iterable[PartitionId]) -> None:
        """Stop fetching ``partitions`` (owned ones only; others are ignored). Idempotent."""
        self._check_opened()
        owned, paused = self._assignment.owned, self._assignment.paused
        todo = [p for p in set(partitions) if p in owned and p not in paused]
        if todo:
            self._call_partitions(self._consumer.pause, todo, "pause")
            paused.update(todo)

    def resume(self, partitions: Iterable[PartitionId]) -> None:
        """Undo :meth:`pause` for ``partitions`` (owned ones only). Idempotent."""
        self._check_opened()
        todo = [p for p in set(partitions) if p in self._assignment.paused]
        if todo:
            self._call_partitions(self._consumer.resume, todo, "resume")
            self._assignment.paused.difference_update(todo)

    def rewind(self, positions: Mapping[PartitionId, int]) -> None:
        """Seek owned partitions back to ``positions`` (librdkafka drops what it fetched
        of them beyond that and fetches again from there)."""
        self._check_opened()
        for (topic, partition), offset in positions.items():
            if (topic, partition) in self._assignment.owned:
                try:
                    self._consumer.seek(TopicPartition(topic, partition, offset))
                except KafkaException as exc:
                    raise SourceError(f"{self._name}: rewind failed: {describe(exc)}") from exc

    def unread(self, partitions: Iterable[PartitionId]) -> dict[PartitionId, int]:
        """Messages of each owned partition beyond the last one ``poll`` returned, from the
        high watermark librdkafka saw in its latest fetch response (no request is made;
        0 until the partition has been fetched once)."""
        self._check_opened()
        owned = [pid for pid in partitions if pid in self._assignment.owned]
        return unread_counts(self._consumer, owned, self._assignment.starts) if owned else {}

    def read_positions(self, partitions: Iterable[PartitionId]) -> dict[PartitionId, int]:
        """How far librdkafka has handed out each owned partition: the offset after the last
        record :meth:`poll` returned, past the transaction markers and aborted records it
        read and skipped (no request is made; partitions not read yet are left out)."""
        self._check_opened()
        owned = [TopicPartition(t, p) for t, p in partitions if (t, p) in self._assignment.owned]
        if not owned:
            return {}
        try:
            found = self._consumer.position(owned)
        except KafkaException:
            return {}  # a commit at the last record's end instead: safe, only not at the marker
        return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}

    def log_ends(self, partitions: Iterable[PartitionId]) -> dict[PartitionId, int]:
        """High watermarks of owned partitions from librdkafka's latest fetch responses (no
        request; partitions not fetched yet are left out)."""
        self._check_opened()
        owned = [pid for pid in partitions if pid in self._assignment.owned]
        return cached_log_ends(self._consumer, owned)

    def close(self) -> None:
        """Revoke owned partitions through the listener, leave the group, free the client.

        Idempotent. The listener's ``on_revoked`` runs first, while this member still owns
        its partitions, so commits made there count. (librdkafka's own revocation inside
        ``Consumer.close()`` can come after it has already left the group — when an earlier
        assignment event was still pending — where a commit fails with UNKNOWN_MEMBER_ID.)
        The client's close is bounded (see :mod:`laneway.sources.kafka.bounded_close`).
        """
        if self._assignment.closing:
            return
        self._joins.close()
        try:
            self._assignment.close()
        finally:
            self._closed = True
            try:
                if not close_within(self._consumer.close, CLOSE_TIMEOUT_S, "laneway-kafka-close"):
                    logger.error(
                        "%s: the Kafka client did not close within %.0f s; leaving without it "
                        "(the group hands this member's partitions on when its session ends)",
                        self._name,
                        CLOSE_TIMEOUT_S,
                    )
            except KafkaException as exc:
                raise SourceError(f"{self._name}: close failed: {describe(exc)}") from exc

    def _skip_or_raise(self, error: KafkaError) -> None:
        # A consumer's fatal error arrives as an _FATAL event whose own fatal() flag is unset.
        if (error.code() == _FATAL or error.fatal()) and self._rejoin_later(error):
            return
        if error.code() == _FATAL or error.fatal():
            # The client is unusable and another member may own our partitions already
            # (e.g. a fenced static member): tell the listener they are lost, then fail.
            self._assignment.lose_all()
            raise SourceError(f"{self._name}: fatal consumer error: {describe_error(error)}")
        if error.code() == _PARTITION_EOF:
            logger.debug("%s: %s", self._name, error.str())
        elif error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            self._watch.reported()  # a subscribed topic is missing
        else:
            logger.warning("%s: consumer error (skipped): %s", self._name, describe_error(error))

    def _call_partitions(
        self,
        method: Callable[[list[TopicPartition]], None],
        partitions: list[PartitionId],
        what: str,
    ) -> None:
        try:
            method([TopicPartition(t, p) for t, p in partitions])
        except KafkaException as exc:
            raise SourceError(f"{self._name}: {what} {partitions} failed: {describe(exc)}") from exc

    def _new_client(self) -> Consumer:
        try:
            return Consumer(self._consumer_config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise ConfigError(f"config is not valid for librdkafka: {describe(exc)}") from exc

    def _check_usable(self) -> None:
        if self._closed:
            raise SourceError(f"{self._name}: the source is closed")

    def _check_opened(self) -> None:
        self._check_usable()
        if self._assignment.listener is None:
            raise SourceError(f"{self._name}: call open(listener) first")
