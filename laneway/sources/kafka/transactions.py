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

The ``transactional.id`` is derived per member, see :func:`transactional_id`.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka import Message as KafkaMessage

from laneway.errors import TransactionError
from laneway.results import Produce
from laneway.sources.kafka.client_logs import client_logging, describe, describe_error
from laneway.sources.kafka.producer import PRODUCER_MAX_BYTES, send
from laneway.types import CommitPosition, PartitionId

log = logging.getLogger(__name__)

TRANSACTION_TIMEOUT_S = 30.0
"""Seconds one transactional call (init, send offsets, commit, abort) may take."""
RETRIES = 3
"""Times a transactional call that failed with a retriable error is tried again."""
FULL_QUEUE_WAITS = 100
"""Times ``produce`` waits 0.1 s for room in a full local queue before it counts as failed."""


def transactional_id(group: str, instance_id: object) -> str:
    """The ``transactional.id`` of a member of ``group``.

    ``laneway-<group>-<group.instance.id>`` for a static member (``group.instance.id`` in
    the KafkaSource config), the recommended set-up for exactly-once: a restarted member
    keeps its id, so it fences its crashed predecessor and aborts the transaction that one
    left open at once. Otherwise ``laneway-<group>-<host>-<pid>``: unique per process, and a
    crashed member's open transaction holds ``read_committed`` readers of its output
    partitions until the broker times it out (``transaction.timeout.ms``, 60 s).
    """
    member = instance_id if instance_id else f"{socket.gethostname()}-{os.getpid()}"
    return f"laneway-{group}-{member}"


class KafkaTransaction:
    """The :class:`~laneway.producing.transactions.Transaction` of a KafkaSource member.

    ``connection``: the source's connection settings; ``consumer``: its confluent-kafka
    consumer (for the group metadata). Settings: ``transactional.id`` (see
    :func:`transactional_id`), idempotence (implied), ``acks=all``, ``linger.ms=5``.
    Tuning: every commit is a transaction round trip (AddOffsetsToTxn, TxnOffsetCommit,
    EndTxn and the markers), a few milliseconds on a local broker; ``commit_interval``
    sets how often, and so how soon results become visible to ``read_committed`` readers.
    """

    def __init__(
        self,
        connection: Mapping[str, object],
        consumer: Consumer,
        transactional_id: str,
        name: str,
    ) -> None:
        settings = {
            **connection,
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
        client_logging(f"{name} (transactional)", settings)
        self._producer = Producer(settings)
        self._consumer = consumer
        self._id = transactional_id
        self._ready = False
        self._open = False
        self._failed: str | None = None
        self._fatal = False
        self._closed = False

    @property
    def transactional_id(self) -> str:
        return self._id

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
                return
        self._failed = f"writing to {record.topic} failed: the producer queue stayed full"

    def commit(self, positions: Mapping[PartitionId, CommitPosition]) -> None:
        if not positions and not self._open:
            return
        self._begin()
        if self._failed is not None:  # a record is missing: this transaction must not commit
            failed, self._failed = self._failed, None
            self._producer.abort_transaction(TRANSACTION_TIMEOUT_S)
            self._open = False
            raise TransactionError(f"{self._id}: aborted, {failed}")
        offsets = [
            TopicPartition(topic, partition, position.offset, metadata=position.metadata)
            for (topic, partition), position in positions.items()
        ]
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
        self._producer.poll(0)

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

    def _begin(self) -> None:
        if self._closed:
            raise TransactionError(f"{self._id}: the transaction is closed")
        try:
            if not self._ready:
                self._call(lambda: self._producer.init_transactions(TRANSACTION_TIMEOUT_S))
                self._ready = True
            if not self._open:
                self._producer.begin_transaction()
                self._open = True
        except KafkaException as exc:
            self._fail(exc)

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
        """Abort what can be aborted and raise TransactionError (the run must end)."""
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.fatal():
            self._fatal = True
        if isinstance(error, KafkaError) and error.txn_requires_abort():
            try:
                self._producer.abort_transaction(TRANSACTION_TIMEOUT_S)
            except KafkaException as abort_error:
                log.warning("%s: abort failed: %s", self._id, describe(abort_error))
        self._open = False
        raise TransactionError(f"{self._id}: {describe(exc)}") from exc

    def _delivered(self, error: KafkaError | None, message: KafkaMessage) -> None:
        if error is not None and self._failed is None:
            self._failed = f"writing to {message.topic()} failed: {describe_error(error)}"
