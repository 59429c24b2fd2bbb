"""A group's positions and the log ends on a Kafka cluster, read with an admin client.

The admin client never joins the group, so reading a group does not disturb it. Every
request waits at most the ``connect_timeout`` setting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    OffsetSpec,
)

from laneway.errors import ConfigError, LanewayError, SourceError
from laneway.sources.kafka.checks import check_reachable, check_topics
from laneway.sources.kafka.client_config import connection_subset
from laneway.sources.kafka.client_logs import client_logging, describe
from laneway.sources.kafka.denials import Access
from laneway.sources.targets import Target
from laneway.types import CommitPosition, PartitionId


def new_admin(target: Target, name: str) -> AdminClient:
    """A reachable admin client of ``target``'s cluster, with its connection settings
    and laneway's client logging: :class:`ConfigError` for settings librdkafka refuses,
    :class:`SourceError` when no broker answers in time."""
    config: dict[str, object] = {
        **connection_subset(target.kafka),
        "bootstrap.servers": target.bootstrap_servers,
    }
    errors = client_logging(name, config)
    try:
        admin = AdminClient(config)  # type: ignore[arg-type]
    except (KafkaException, ValueError, TypeError) as exc:
        raise ConfigError(f"the [kafka] settings are not valid for librdkafka: {exc}") from exc
    check_reachable(
        admin,
        str(target.bootstrap_servers),
        target.connect_timeout,
        errors,
        lambda: admin.poll(0),
    )
    return admin


class KafkaPositions:
    """The :class:`~laneway.sources.targets.Positions` of a Kafka cluster: an admin client
    (never a group member). Each request waits up to the ``connect_timeout`` setting
    (``LANEWAY_CONNECT_TIMEOUT``)."""

    def __init__(self, target: Target) -> None:
        self.where = str(target.bootstrap_servers)
        self._timeout = target.connect_timeout
        self._admin = new_admin(target, f"laneway ops {self.where}")
        self._access = Access(target.kafka)
        self._group = "(the group)"
        self._topics: Sequence[str] = ()

    def check_topics(self, topics: Sequence[str]) -> None:
        self._topics = topics
        check_topics(self._admin, topics, self._timeout, self._access, "DESCRIBE")

    def _listing(self, group: str) -> Any | None:
        result = self._wait(
            lambda: self._admin.list_consumer_groups(request_timeout=self._timeout), "groups"
        )
        for listing in result.valid:
            if listing.group_id == group:
                return listing
        return None

    def group_exists(self, group: str) -> bool:
        return self._listing(group) is not None

    def committed(self, group: str, topics: Sequence[str]) -> dict[PartitionId, CommitPosition]:
        self._group = group
        wanted = [TopicPartition(t, p) for t, p in self.partitions(topics)] if topics else None
        request = ConsumerGroupTopicPartitions(group, wanted)

        def ask() -> Any:
            futures = self._admin.list_consumer_group_offsets(
                [request], request_timeout=self._timeout
            )
            return futures[group]

        answer = self._wait(ask, f"the committed offsets of group {group!r}")
        positions: dict[PartitionId, CommitPosition] = {}
        for tp in answer.topic_partitions or []:
            if tp.error is not None:
                raise self._failure(KafkaException(tp.error), f"{tp.topic}[{tp.partition}]")
            if tp.offset >= 0:
                positions[(tp.topic, tp.partition)] = CommitPosition(tp.offset, tp.metadata or "")
        return positions

    def assigned(self, group: str) -> set[PartitionId]:
        futures = self._admin.describe_consumer_groups([group], request_timeout=self._timeout)
        try:
            description = futures[group].result(self._timeout)
        except KafkaException as exc:
            if _code(exc) in (KafkaError.GROUP_ID_NOT_FOUND, KafkaError._UNKNOWN_GROUP):
                return set()
            raise self._failure(exc, f"describing group {group!r}") from exc
        return {
            (tp.topic, tp.partition)
            for member in description.members or []
            if member.assignment is not None
            for tp in member.assignment.topic_partitions or []
        }

    def partitions(self, topics: Sequence[str]) -> list[PartitionId]:
        found: list[PartitionId] = []
        for topic in topics:
            try:
                metadata = self._admin.list_topics(topic=topic, timeout=self._timeout)
            except KafkaException as exc:
                raise self._failure(exc, f"reading the partitions of {topic!r}") from exc
            described = metadata.topics.get(topic)
            if described is not None and described.error is None:
                found += [(topic, p) for p in sorted(described.partitions)]
        return found

    def ends(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        return self._offsets(partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]

    def starts(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        return self._offsets(partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]

    def _offsets(self, partitions: Sequence[PartitionId], spec: Any) -> dict[PartitionId, int]:
        if not partitions:
            return {}
        request = {TopicPartition(t, p): spec for t, p in partitions}
        try:
            futures = self._admin.list_offsets(
                request,
                isolation_level=IsolationLevel.READ_UNCOMMITTED,
                request_timeout=self._timeout,
            )
            return {
                (tp.topic, tp.partition): int(future.result(self._timeout).offset)
                for tp, future in futures.items()
            }
        except KafkaException as exc:
            raise self._failure(exc, "reading the log ends") from exc

    def close(self) -> None:
        """Nothing to release: the admin client closes when collected."""

    def _wait(self, ask: Callable[[], Any], what: str) -> Any:
        try:
            return ask().result(self._timeout)
        except KafkaException as exc:
            raise self._failure(exc, f"reading {what}") from exc

    def _failure(self, exc: KafkaException, what: str) -> LanewayError:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError):
            topics = ", ".join(self._topics) or "(the group's topics)"
            request = {"group": ("DESCRIBE", self._group), "topic": ("DESCRIBE", topics)}
            denial = self._access.refusal(error, request)
            if denial is not None:
                return denial
        return SourceError(f"{what} on {self.where} failed: {describe(exc)}")


def _code(exc: KafkaException) -> int | None:
    error = exc.args[0] if exc.args else None
    return error.code() if isinstance(error, KafkaError) else None
