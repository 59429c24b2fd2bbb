"""KafkaTransaction: exactly-once results and offsets for one KafkaSource member.

One transactional producer per consumer run. Results go into the open transaction as they
come; at each commit the consumed positions (with the finished-beyond-commit metadata) are
added with ``send_offsets_to_transaction`` and the consumer's *group metadata* (member id
and generation), then ``commit_transaction`` makes records and offsets visible together
(KIP-447). Readers with ``isolation.level=read_committed`` (librdkafka's default) see a
result exactly when its input's offset is committed.

Fencing. The group coordinator refuses the offsets of a member that is no longer in the
current generation (it was kicked out, or a rebalance moved its partitions away), so a
*zombie* member's transaction cannot commit: it is aborted and
:class:`~laneway.errors.TransactionError` ends its run. A restarted member with the same
``transactional.id`` fences its predecessor's producer at ``init_transactions`` and aborts
the transaction it left open.

A member killed with a transaction open (SIGKILL, a crash, a lost machine) holds every
``read_committed`` reader of the partitions it wrote to: nothing after the open
transaction's first record is visible until the transaction ends. A successor with the same
``transactional.id`` ends it at once; otherwise the broker aborts it once it is older than
``transaction.timeout.ms``. laneway sets that to 10 s (:data:`EXACTLY_ONCE_DEFAULTS`), as
Kafka Streams does under exactly-once, instead of librdkafka's 60 s.

The ``transactional.id`` is derived per member, see :func:`transactional_id` and
:func:`member_transactional_id`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from typing import Protocol

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import Message as KafkaMessage

from laneway.errors import AccessDeniedError, ConfigError, TransactionError
from laneway.logs import get_logger
from laneway.results import Produce
from laneway.sources.kafka.client_logs import (
    client_logging,
    describe,
    describe_error,
    kafka_error,
)
from laneway.sources.kafka.denials import Access, Request, is_permanent
from laneway.sources.kafka.positions import committed_partition
from laneway.sources.kafka.producer import PRODUCER_MAX_BYTES, send
from laneway.types import CommitPosition, PartitionId, RecordEpochs

log = get_logger(__name__)

TRANSACTION_TIMEOUT_S = 30.0
"""Seconds one transactional call (init, send offsets, commit, abort) may take."""
RETRIES = 3
"""Times a transactional call that failed with a retriable error is tried again."""
FULL_QUEUE_WAITS = 100
"""Times ``produce`` waits 0.1 s for room in a full local queue before it counts as failed."""

EXACTLY_ONCE_DEFAULTS: Mapping[str, object] = {
    # The broker aborts a transaction that has been open this long; until then it hides
    # everything written after it from read_committed readers. librdkafka's default (60 s)
    # measured 39-60 s of invisible results after a member was SIGKILLed. Kafka Streams
    # uses 10 s under exactly-once ("for quicker pending offset expiration"); the broker
    # looks for expired transactions every 10 s (transaction.abort.timed.out.transaction.
    # cleanup.interval.ms), so readers wait at most about 20 s. laneway's own transactions
    # last one commit_interval (1 s by default); one open longer than this (a sync-engine
    # handler call, a revocation draining a slow handler, a broker outage that outlasts
    # the timeout) is aborted and ends the run with TransactionError: its inputs run again.
    # librdkafka derives message.timeout.ms and socket.timeout.ms from it.
    "transaction.timeout.ms": 10_000,
}
"""Producer settings laneway chooses under ``exactly_once=True``; the user's own (the
KafkaSource ``config`` or the ``[kafka]`` table) win."""

TRANSACTION_SETTINGS = tuple(EXACTLY_ONCE_DEFAULTS)
"""Producer-only settings a user may give in the KafkaSource ``config``: taken out of the
consumer's settings (librdkafka would warn that a consumer ignores them) and given to the
transactional producer."""


def transaction_settings(consumer_config: dict[str, object]) -> dict[str, object]:
    """Remove the :data:`TRANSACTION_SETTINGS` from ``consumer_config``; return them."""
    return {key: consumer_config.pop(key) for key in TRANSACTION_SETTINGS if key in consumer_config}


def check_isolation(consumer_config: Mapping[str, object]) -> None:
    """Refuse ``isolation.level=read_uncommitted`` for an exactly-once consumer: it would
    run handlers on records of aborted transactions (an upstream exactly-once writer's
    failed attempts) and write their results, which exactly-once promises never to do."""
    level = str(consumer_config.get("isolation.level", "read_committed")).strip().lower()
    if level != "read_committed":
        raise ConfigError(
            f"config['isolation.level']={consumer_config['isolation.level']!r} is not valid "
            "with exactly_once=True: the consumer would read records of aborted "
            "transactions and write results for them; leave it out (read_committed, "
            "librdkafka's default)"
        )


def transactional_id(group: str, instance_id: object) -> str:
    """The ``transactional.id`` of a member of ``group``.

    ``laneway-<group>-<group.instance.id>`` for a static member (``group.instance.id`` in
    the KafkaSource config): a restarted member keeps its id, so it fences its crashed
    predecessor and aborts the transaction that one left open at once. Otherwise
    ``laneway-<group>-<host>-<pid>``: unique per process, and a crashed member's open
    transaction holds ``read_committed`` readers of its output partitions until the broker
    times it out (``transaction.timeout.ms``, 10 s under laneway, and up to 10 s more until
    the broker's next check).
    """
    member = instance_id if instance_id else f"{socket.gethostname()}-{os.getpid()}"
    return f"laneway-{group}-{member}"


def member_transactional_id(group: str, member: int | None, given: str | None) -> str | None:
    """The ``transactional.id`` of a ``laneway run`` process (``None``: the library's
    default, :func:`transactional_id`).

    ``given`` (``--transactional-id``) as it is for a single process, with ``-<index>``
    appended for member *index* of ``--members``. Without it a member's id is
    ``laneway-<group>-<host>-member-<index>``: stable across the supervisor's restarts of
    that member, so a restarted member fences the one it replaces and ends its open
    transaction at once, and distinct between hosts (supervisors on two machines never
    fence each other). Two supervisors of one group on one host must be told apart with
    ``--transactional-id``.
    """
    if given:
        return given if member is None else f"{given}-{member}"
    if member is None:
        return None
    return f"laneway-{group}-{socket.gethostname()}-member-{member}"


class GroupMember(Protocol):
    """What a transaction needs of its member's consumer: the group metadata it sends with
    the offsets (a confluent-kafka ``Consumer``, or the KafkaSource that owns one)."""

    def consumer_group_metadata(self) -> object: ...


class KafkaTransaction:
    """The :class:`~laneway.producing.transactions.Transaction` of a KafkaSource member.

    ``connection``: the source's connection settings; ``consumer``: its confluent-kafka
    consumer (for the group metadata); ``overrides``: the user's producer settings (see
    :func:`transaction_settings`). Settings: ``transactional.id`` (see
    :func:`transactional_id`), idempotence (implied), ``acks=all``, ``linger.ms=5``,
    ``transaction.timeout.ms`` from :data:`EXACTLY_ONCE_DEFAULTS` unless overridden.
    Tuning: every commit is a transaction round trip (AddOffsetsToTxn, TxnOffsetCommit,
    EndTxn and the markers), a few milliseconds on a local broker; ``commit_interval``
    sets how often, and so how soon results become visible to ``read_committed`` readers.
    Keep ``drain_timeout`` and the longest handler call (sync engine) below
    ``transaction.timeout.ms``, or raise it: a transaction open longer is aborted.
    """

    def __init__(
        self,
        connection: Mapping[str, object],
        consumer: GroupMember,
        transactional_id: str,
        name: str,
        overrides: Mapping[str, object] | None = None,
        group: str = "",
        record_epochs: RecordEpochs | None = None,
    ) -> None:
        settings = {
            **connection,
            **EXACTLY_ONCE_DEFAULTS,
            **(overrides or {}),
            "transactional.id": transactional_id,
            "linger.ms": 5,
            "acks": "all",
            "message.max.bytes": PRODUCER_MAX_BYTES,
            # Only failures are reported: a success says nothing the commit does not
            # (it fails if any record of the transaction did), and a Python call per
            # record is a good part of what a result costs.
            "delivery.report.only.error": True,
            "on_delivery": self._delivered,
        }
        self._id = transactional_id
        self._group = group
        self._access = Access(settings)
        self._denied: AccessDeniedError | None = None
        client_logging(f"{name} (transactional)", settings)
        self._settings = settings
        try:
            self._producer = Producer(settings)
        except KafkaException as exc:  # e.g. socket.timeout.ms above transaction.timeout.ms
            raise ConfigError(
                f"{transactional_id}: the transactional producer's settings are not valid: "
                f"{describe(exc)} (transaction.timeout.ms="
                f"{settings['transaction.timeout.ms']}; set it in the config to change it)"
            ) from exc
        self._consumer = consumer
        self._record_epochs = record_epochs
        self._ready = False
        self._open = False
        self._failed: str | None = None
        # Why a transactional call failed, once one has: the run must end, and nothing may
        # commit after it (the failed transaction's results are gone, its inputs must run
        # again), so later commits raise at once instead of waiting on a dead producer.
        self._ended: str | None = None
        self._fatal = False
        self._closed = False

    @property
    def transactional_id(self) -> str:
        return self._id

    @property
    def record_epochs(self) -> RecordEpochs | None:
        """The leader epochs of the records the member's consumer polls."""
        return self._record_epochs

    @property
    def client_config(self) -> dict[str, object]:
        """The librdkafka settings the producer runs with (callbacks included)."""
        return dict(self._settings)

    def produce(self, record: Produce) -> None:
        self._begin()
        for _ in range(FULL_QUEUE_WAITS):
            try:
                send(self._producer, record)
                return
            except BufferError:
                self._producer.poll(0.1)
            except KafkaException as error:
                self._failed = f"writing to {record.topic} failed: {describe(error)}"
                self._note_refusal(kafka_error(error), record.topic)
                return
        self._failed = f"writing to {record.topic} failed: the producer queue stayed full"

    def commit(self, positions: Mapping[PartitionId, CommitPosition]) -> None:
        if not positions and not self._open:
            return
        if self._ended is not None:
            raise TransactionError(f"{self._id}: not committed, a call failed: {self._ended}")
        self._begin()
        if self._failed is not None:  # a record is missing: this transaction must not commit
            failed, self._failed = self._failed, None
            self._open = False
            try:
                self._producer.abort_transaction(TRANSACTION_TIMEOUT_S)
            except KafkaException as exc:  # fenced, or its records timed out (an epoch bump)
                self._ended = describe(exc)
                self._fatal = True
                if self._denied is not None:
                    raise self._denied from exc
                raise TransactionError(
                    f"{self._id}: {failed}, and aborting failed: {self._ended}"
                ) from exc
            if self._denied is not None:
                raise self._denied
            raise TransactionError(f"{self._id}: aborted, {failed}")
        offsets = [committed_partition(pid, position) for pid, position in positions.items()]
        try:
            if offsets:
                metadata = self._consumer.consumer_group_metadata()
                self._call(
                    lambda: self._producer.send_offsets_to_transaction(
                        offsets, metadata, TRANSACTION_TIMEOUT_S
                    )
                )
            self._call(lambda: self._producer.commit_transaction(TRANSACTION_TIMEOUT_S))
        except KafkaException as exc:
            self._fail(exc)
        self._open = False

    def poll(self) -> None:
        """Serve the producer; the first call (the consumer's first loop turn, right after
        it subscribed) also initialises the transactions, which fences a predecessor with
        the same ``transactional.id`` and ends the transaction it left open, before this
        member is given any partition."""
        if not self._ready and not self._closed:
            self._init()
        try:
            self._producer.poll(0)
        except KafkaException as exc:  # a fatal error, e.g. the coordinator lost mid-commit
            self._fail(exc)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._open:
            self._open = False
            try:
                self._producer.abort_transaction(TRANSACTION_TIMEOUT_S)
            except KafkaException as exc:
                log.warning("%s: aborting the open transaction failed: %s", self._id, describe(exc))
        if self._fatal:
            return  # fenced or failed for good: nothing queued can ever commit
        try:
            self._producer.flush(1.0)
        except KafkaException as exc:  # a fenced producer refuses even this
            log.warning("%s: closing: %s", self._id, describe(exc))
        except SystemError as exc:
            # confluent-kafka raises this when a fatal error (a fence) arrives during flush
            # while it runs a delivery callback: the KafkaException is its __cause__.
            log.warning("%s: closing: %s", self._id, exc.__cause__ or exc)

    def _init(self) -> None:
        try:
            self._call(lambda: self._producer.init_transactions(TRANSACTION_TIMEOUT_S))
        except KafkaException as exc:
            self._fail(exc)
        self._ready = True

    def _begin(self) -> None:
        if self._closed:
            raise TransactionError(f"{self._id}: the transaction is closed")
        if not self._ready:
            self._init()
        if not self._open:
            try:
                self._producer.begin_transaction()
            except KafkaException as exc:
                self._fail(exc)
            self._open = True

    def _call(self, step: Callable[[], None]) -> None:
        """Run a transactional call, again (up to ``RETRIES`` times) on a retriable error."""
        for attempt in range(RETRIES + 1):
            try:
                step()
                return
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if not isinstance(error, KafkaError) or not error.retriable() or attempt == RETRIES:
                    raise
                log.info("%s: %s; trying again", self._id, describe(exc))

    def _fail(self, exc: KafkaException) -> None:
        """Abort what can be aborted and raise TransactionError (the run must end), or
        AccessDeniedError when the cluster refused (an ACL is missing)."""
        error = exc.args[0] if exc.args else None
        self._ended = describe(exc)
        if isinstance(error, KafkaError) and error.fatal():
            self._fatal = True
        if isinstance(error, KafkaError) and error.txn_requires_abort():
            try:
                self._producer.abort_transaction(TRANSACTION_TIMEOUT_S)
            except KafkaException as abort_error:
                log.warning("%s: abort failed: %s", self._id, describe(abort_error))
        self._open = False
        if isinstance(error, KafkaError) and is_permanent(error):
            self._fatal = True
            denial = self._access.refusal(error, self._request(None, "READ"))
            raise denial or AccessDeniedError(describe(exc)) from exc
        raise TransactionError(f"{self._id}: {describe(exc)}") from exc

    def _delivered(self, error: KafkaError | None, message: KafkaMessage) -> None:
        if error is not None and self._failed is None:
            self._failed = f"writing to {message.topic()} failed: {describe_error(error)}"
        if error is not None:
            self._note_refusal(error, message.topic())

    def _note_refusal(self, error: KafkaError | None, topic: str | None) -> None:
        """Keep the first permanent refusal of a write, for :meth:`commit` to raise."""
        if error is None or self._denied is not None or not is_permanent(error):
            return
        self._denied = self._access.refusal(error, self._request(topic))

    def _request(self, topic: str | None, topic_operation: str = "WRITE") -> Request:
        """What this producer asks the cluster for (to name a missing ACL)."""
        return {
            "transactional id": ("WRITE", self._id),
            "topic": (topic_operation, topic or "(the topic written)"),
            "group": ("READ", self._group or "(the consumer's group)"),
            "cluster": ("IDEMPOTENT_WRITE", ""),
        }
