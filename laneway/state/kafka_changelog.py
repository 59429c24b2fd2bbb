"""KafkaChangelog: the changelog topic of a Kafka cluster (see :mod:`laneway.state.changelog`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from laneway.errors import SourceError
from laneway.logs import get_logger
from laneway.state.changelog import READ_BATCH, Changed
from laneway.state.records import OFFSET_HEADER, Row

log = get_logger(__name__)

TIMEOUT = 10.0
"""Seconds to wait for the cluster's metadata, a topic creation, or a batch of a restore."""
WRITE_TIMEOUT = 30.0
"""Seconds a rebuild of a changelog partition waits for its records' acknowledgement."""
READ_WAIT = 0.1
"""Seconds one read of a restore waits for its batch to fill before taking what came."""


class KafkaChangelog:
    """The changelog of a Kafka cluster reached with ``connection`` (the source's
    connection settings). With ``committed_only`` (exactly-once) restores read
    ``read_committed`` up to the last stable offset."""

    def __init__(self, connection: Mapping[str, object], committed_only: bool) -> None:
        self._connection: dict[str, Any] = dict(connection)
        self._committed_only = committed_only
        self._admin = AdminClient(self._connection)
        self.where = f"the Kafka cluster {self._connection.get('bootstrap.servers')}"

    def partitions(self, topic: str) -> int | None:
        try:
            found = self._admin.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
        except KafkaException as error:
            raise SourceError(f"reading the metadata of {topic!r} failed: {error}") from error
        if found is None or found.error is not None:
            return None
        return len(found.partitions)

    def compacted(self, topic: str) -> bool | None:
        resource = ConfigResource("topic", topic)
        try:
            described = self._admin.describe_configs([resource])[resource].result(TIMEOUT)
        except KafkaException as error:
            raise SourceError(f"reading the config of {topic!r} failed: {error}") from error
        entry = described.get("cleanup.policy")
        return entry is not None and "compact" in str(entry.value)

    def create(self, topic: str, partitions: int) -> None:
        new = NewTopic(topic, num_partitions=partitions, config={"cleanup.policy": "compact"})
        try:
            self._admin.create_topics([new], request_timeout=TIMEOUT)[topic].result(TIMEOUT)
            log.info("created changelog topic %s (%d partitions, compacted)", topic, partitions)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise SourceError(f"creating changelog topic {topic!r} failed: {error}") from error
        self._wait_for_leaders(topic, partitions)

    def _wait_for_leaders(self, topic: str, partitions: int) -> None:
        """Wait (up to :data:`TIMEOUT`) until every partition of a topic just made has a
        leader, so the first restores read its bounds instead of failing once (an ERROR and
        a retry on a normal first start); after that the restores' own retries take over."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                found = self._admin.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
            except KafkaException:
                found = None
            if (
                found is not None
                and found.error is None
                and len(found.partitions) >= partitions
                and all(p.leader >= 0 for p in found.partitions.values())
            ):
                return
            time.sleep(0.05)

    def empty(self, topic: str) -> bool:
        count = self.partitions(topic) or 0
        reader = self._reader()
        try:
            for partition in range(count):
                tp = TopicPartition(topic, partition)
                if reader.get_watermark_offsets(tp, timeout=TIMEOUT, cached=False)[1] > 0:
                    return False
            return True
        except KafkaException as error:
            raise SourceError(f"reading the end offsets of {topic!r} failed: {error}") from error
        finally:
            reader.close()

    def mend(self, topic: str, partitions: int | None) -> bool:
        try:
            if partitions is not None:
                grown = NewPartitions(topic, partitions)
                self._admin.create_partitions([grown], request_timeout=TIMEOUT)[topic].result(
                    TIMEOUT
                )
            if self.compacted(topic) is False:
                compact = ConfigResource(
                    "topic",
                    topic,
                    incremental_configs=[
                        ConfigEntry(
                            "cleanup.policy",
                            "compact",
                            incremental_operation=AlterConfigOpType.SET,
                        )
                    ],
                )
                self._admin.incremental_alter_configs([compact])[compact].result(TIMEOUT)
        except KafkaException as error:
            raise SourceError(f"mending changelog topic {topic!r} failed: {error}") from error
        return True

    def mending(self, topic: str, partitions: int | None) -> str:
        servers = self._connection.get("bootstrap.servers")
        commands = []
        if partitions is not None:
            commands.append(
                f"kafka-topics.sh --bootstrap-server {servers} --alter --topic {topic} "
                f"--partitions {partitions}"
            )
        if self.compacted(topic) is False:
            commands.append(
                f"kafka-configs.sh --bootstrap-server {servers} --alter --entity-type topics "
                f"--entity-name {topic} --add-config cleanup.policy=compact"
            )
        return " && ".join(commands)

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        reader = self._reader()
        try:
            tp = TopicPartition(topic, partition)
            low, high = reader.get_watermark_offsets(tp, timeout=TIMEOUT, cached=False)
            if self._committed_only:
                # The last stable offset: where a read_committed reader stops.
                reader.assign([TopicPartition(topic, partition, high)])
                reader.consume(1, 0.0)
                position = reader.position([tp])[0].offset
                high = position if position >= 0 else high
            return low, high
        except KafkaException as error:
            raise SourceError(
                f"reading the bounds of {topic}[{partition}] failed: {error}"
            ) from error
        finally:
            reader.close()

    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[list[Changed]]:
        if start >= end:
            return
        reader = self._reader()
        try:
            reader.assign([TopicPartition(topic, partition, start)])
            position = start
            idle_until = time.monotonic() + TIMEOUT
            while position < end:
                # A short wait per call: consume() waits out its timeout unless the batch
                # fills, and a partition's last records (or its end) rarely fill one.
                batch = reader.consume(READ_BATCH, READ_WAIT)
                if not batch:
                    if time.monotonic() < idle_until:
                        continue
                    raise SourceError(
                        f"restoring from {topic}[{partition}]: nothing read for {TIMEOUT:g} s "
                        f"at offset {position} (end {end})"
                    )
                idle_until = time.monotonic() + TIMEOUT
                records: list[Changed] = []
                for message in batch:
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            if records:
                                yield records
                            return
                        raise SourceError(f"restoring from {topic}[{partition}]: {error}")
                    offset = cast(int, message.offset())
                    if offset >= end:
                        break
                    headers = cast(Sequence[tuple[str, bytes | None]], message.headers() or ())
                    records.append(Changed(offset, message.key(), message.value(), headers))
                    position = offset + 1
                if records:
                    yield records
                if batch[-1].error() is None and cast(int, batch[-1].offset()) >= end - 1:
                    return
        except KafkaException as error:
            raise SourceError(f"restoring from {topic}[{partition}] failed: {error}") from error
        finally:
            reader.close()

    def write(self, topic: str, partition: int, rows: Sequence[Row]) -> None:
        producer = Producer(
            {**self._connection, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
        )
        failures: list[str] = []

        def delivered(error: KafkaError | None, _message: object) -> None:
            if error is not None:
                failures.append(str(error))

        try:
            for key, value, offset in rows:
                headers: list[tuple[str, str | bytes | None]] = [(OFFSET_HEADER, b"%d" % offset)]
                while True:
                    try:
                        producer.produce(topic, value, key, partition, delivered, headers=headers)
                        break
                    except BufferError:  # the queue is full: let it drain
                        producer.poll(0.1)
            left = producer.flush(WRITE_TIMEOUT)
        except KafkaException as error:
            raise SourceError(f"writing to {topic}[{partition}] failed: {error}") from error
        if failures or left:
            why = failures[0] if failures else f"{left} not acknowledged in {WRITE_TIMEOUT:g} s"
            raise SourceError(f"writing to {topic}[{partition}] failed: {why}")

    def _reader(self) -> Consumer:
        return Consumer(
            {
                **self._connection,
                "group.id": f"laneway-state-restore-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed" if self._committed_only else "read_uncommitted",
                "fetch.max.bytes": 52_428_800,
                "queued.min.messages": 100_000,
            }
        )

    def close(self) -> None:
        pass
