"""The share group's own configuration: where a new group starts, and the limits it runs under.

A share group keeps its settings as *group configs* on the cluster, changed with the admin
API (``incremental_alter_configs`` on the group resource) or ``kafka-configs``, not in the
client's config. :func:`prepare_group` applies laneway's ``start_at`` choice before the
member joins and reads the two limits laneway must respect:

* the record lock (``share.record.lock.duration.ms``, 30 s by default): a record not
  acknowledged within it is delivered again, possibly to another member;
* the delivery limit (the broker's ``group.share.delivery.count.limit``, 5 by default): a
  record released, timed out or dropped by a dying member that many times is archived by
  the broker, without a dead letter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    OffsetSpec,
    ResourceType,
)

from laneway.errors import SourceError
from laneway.logs import get_logger
from laneway.sources.kafka.client_logs import describe, kafka_error
from laneway.sources.kafka.denials import Access, Request
from laneway.sources.share.settings import StartAt

log = get_logger(__name__)

RESET = "share.auto.offset.reset"
LOCK = "share.record.lock.duration.ms"
DELIVERY_LIMIT = "group.share.delivery.count.limit"
DEFAULT_LOCK_S = 30.0
DEFAULT_DELIVERY_LIMIT = 5


@dataclass(frozen=True)
class GroupLimits:
    """What a share group's configuration allows a member: ``lock_duration`` seconds per
    acquired record, ``delivery_limit`` deliveries per record."""

    lock_duration: float = DEFAULT_LOCK_S
    delivery_limit: int = DEFAULT_DELIVERY_LIMIT


def prepare_group(
    admin: AdminClient,
    group: str,
    topics: tuple[str, ...],
    start_at: StartAt,
    wanted: Mapping[str, str],
    timeout: float,
    access: Access,
) -> GroupLimits:
    """Apply ``start_at`` (see :class:`~laneway.sources.share.settings.StartAt`) and the
    ``wanted`` group configs to ``group``, and return its limits. Raises
    :class:`SourceError` when a group config cannot be read or set, and
    :class:`~laneway.errors.AccessDeniedError` naming the ACL when ``access`` (who the
    client is) lacks DESCRIBE_CONFIGS, or ALTER_CONFIGS for a change, on the group."""
    resource = ConfigResource(ResourceType.GROUP, group)
    configs = _describe(admin, resource, timeout, access, {"group": ("DESCRIBE_CONFIGS", group)})
    reset = configs.get(RESET, "latest")
    changes = {key: value for key, value in wanted.items() if configs.get(key) != value}
    if start_at is not StartAt.GROUP and reset != start_at.value:
        changes[RESET] = start_at.value
    if changes:
        _alter(admin, group, changes, timeout, access)
        configs.update(changes)
        log.info("share group %s: set %s", group, changes)
    if start_at is StartAt.GROUP and reset == "latest":
        _warn_of_backlog(admin, group, topics, timeout)
    lock = _number(configs.get(LOCK), DEFAULT_LOCK_S * 1000) / 1000.0
    return GroupLimits(lock, int(_number(_broker_setting(admin, timeout), DEFAULT_DELIVERY_LIMIT)))


def _alter(
    admin: AdminClient, group: str, changes: Mapping[str, str], timeout: float, access: Access
) -> None:
    entries = [
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        for key, value in changes.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    try:
        admin.incremental_alter_configs([resource], request_timeout=timeout)[resource].result(
            timeout
        )
    except KafkaException as error:
        _raise_refusal(error, access, {"group": ("ALTER_CONFIGS", group)})
        shown = " ".join(f"{key}={value}" for key, value in changes.items())
        hint = " (or set it yourself and pass start_at='group')" if RESET in changes else ""
        raise SourceError(
            f"share group {group!r}: setting the group config {shown} failed: "
            f"{describe(error)}; it needs the ALTER_CONFIGS permission on the group, and "
            f"values the broker allows{hint}"
        ) from error


def _describe(
    admin: AdminClient, resource: ConfigResource, timeout: float, access: Access, request: Request
) -> dict[str, str]:
    try:
        found = admin.describe_configs([resource], request_timeout=timeout)[resource]
        entries = found.result(timeout)
    except KafkaException as error:
        _raise_refusal(error, access, request)
        cause = kafka_error(error)
        if (
            resource.restype == ResourceType.GROUP
            and cause is not None
            and cause.code() == KafkaError.INVALID_REQUEST
        ):  # a broker before Kafka 4.0 knows no group configs, nor share groups
            raise SourceError(
                f"share group {resource.name!r}: the cluster does not serve share groups "
                f"(KIP-932 needs Kafka 4.2 or newer with the share.version feature on; the "
                f"broker refused a group config request: {describe(error)}); read the topics "
                f"with KafkaSource, a consumer group, instead"
            ) from error
        raise SourceError(
            f"reading the config of {resource.name!r} failed: {describe(error)}"
        ) from error
    return {name: entry.value for name, entry in entries.items() if entry.value is not None}


def _raise_refusal(error: KafkaException, access: Access, request: Request) -> None:
    """Raise the AccessDeniedError ``error`` means for ``request``, if it is a refusal."""
    cause = kafka_error(error)
    denial = None if cause is None else access.refusal(cause, request)
    if denial is not None:
        raise denial from error


def _broker_setting(admin: AdminClient, timeout: float) -> str | None:
    """The broker's delivery limit, or ``None`` when it cannot be read (no permission)."""
    try:
        nodes = admin.describe_cluster(request_timeout=timeout).result(timeout).nodes
        broker = ConfigResource(ResourceType.BROKER, str(nodes[0].id))
        request = {"cluster": ("DESCRIBE_CONFIGS", "")}
        return _describe(admin, broker, timeout, Access.unknown(), request).get(DELIVERY_LIMIT)
    except (KafkaException, SourceError, IndexError) as error:
        log.debug("the broker's %s is not readable (%s); assuming 5", DELIVERY_LIMIT, error)
        return None


def _number(value: str | None, default: float) -> float:
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default


def _warn_of_backlog(
    admin: AdminClient, group: str, topics: tuple[str, ...], timeout: float
) -> None:
    """Warn that a new group configured to start at ``latest`` skips what the topics hold."""
    try:
        held = _records_held(admin, topics, timeout)
    except KafkaException as error:
        log.debug("counting the records of %s failed: %s", topics, describe(error))
        held = -1
    if held == 0:
        return
    count = "the records" if held < 0 else f"{held:,} records"
    log.warning(
        "share group %s reads from the latest offset (%s=latest, and start_at='group' "
        "leaves it so): if the group is new, %s already in %s are skipped. Use "
        "start_at='earliest' to consume them, or set %s=earliest on the group before its "
        "first member joins",
        group,
        RESET,
        count,
        ", ".join(topics),
        RESET,
    )


def _records_held(admin: AdminClient, topics: tuple[str, ...], timeout: float) -> int:
    """Records between the earliest and the latest offset of every partition of ``topics``."""
    metadata = admin.list_topics(timeout=timeout)
    partitions = [
        TopicPartition(topic, partition)
        for topic in topics
        if topic in metadata.topics
        for partition in metadata.topics[topic].partitions
    ]
    if not partitions:
        return 0
    earliest, latest = (
        _offsets(admin, partitions, spec, timeout)
        for spec in (OffsetSpec.earliest(), OffsetSpec.latest())  # type: ignore[no-untyped-call]
    )
    return sum(max(0, latest[pid] - earliest[pid]) for pid in latest)


def _offsets(
    admin: AdminClient, partitions: list[TopicPartition], spec: OffsetSpec, timeout: float
) -> dict[tuple[str, int], int]:
    futures = admin.list_offsets({tp: spec for tp in partitions}, request_timeout=timeout)
    return {(tp.topic, tp.partition): f.result(timeout).offset for tp, f in futures.items()}
