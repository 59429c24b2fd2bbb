"""KafkaSource's options, the validation of its arguments and the librdkafka configuration
laneway runs with.

laneway commits offsets itself, synchronously, and only for finished work. Every setting
that would let librdkafka commit or store offsets on its own is therefore forced off, and
asking for it is a :class:`laneway.errors.ConfigError` rather than a silent override.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from laneway.errors import ConfigError
from laneway.options import OptionSpec, duration, flag, optional_text, seconds
from laneway.sources.kafka.group_protocol import (
    CONSUMER,
    DEFAULT_ASSIGNMENT_STRATEGY,
    chosen_protocol,
)
from laneway.sources.targets import CONNECT_TIMEOUT
from laneway.sources.topic_names import check_topic_names

KAFKA_OPTIONS: dict[str, tuple[object, OptionSpec]] = {
    "connect_timeout": (
        CONNECT_TIMEOUT,
        OptionSpec("seconds to wait for a Kafka broker at start-up", duration(), "seconds"),
    ),
    "wait_for_topics": (
        False,
        OptionSpec("wait for topics that do not exist yet instead of failing", flag, "bool"),
    ),
    "transactional_id": (
        None,
        OptionSpec(
            "with exactly_once, the transactional.id of the results producer (with --members: "
            "this, a dash and the member index); by default each member slot has its own "
            "stable id, laneway-GROUP-HOST-member-INDEX, and a single process one per process",
            optional_text,
            "text",
        ),
    ),
}
"""The keyword options of :class:`~laneway.sources.kafka.source.KafkaSource` (the first two
also :class:`~laneway.sources.share.source.KafkaShareSource`'s), declared once: name ->
(default, spec). ``laneway run`` takes each as a setting (flag, ``LANEWAY_*`` variable, TOML
key); see :func:`laneway.sources.backends.source_options`."""


DEFAULTS: Mapping[str, object] = {
    # A new group reads a topic from its start: nothing produced before the first run is lost.
    "auto.offset.reset": "earliest",
    # Once the local prefetch queue is above queued.min.messages, librdkafka waits this long
    # before fetching again (default 1000 ms). A consumer that is slower than the fetcher,
    # which laneway is as soon as it does any work per message, then drains the queue and
    # starves until the backoff ends. Measured on a local broker (200,000 small messages, 8
    # partitions, KafkaSource.poll in a loop): ~175k msg/s with 1000 ms, ~890k msg/s with
    # 50 ms (~400-570k on a busy machine, still 2.5x). Unlike a larger queued.min.messages,
    # this does not raise the prefetch memory.
    "fetch.queue.backoff.ms": 50,
    # How long the broker may hold a fetch request open when it has nothing new (default
    # 500 ms). librdkafka keeps one fetch in flight per broker, so a partition that is
    # resumed after backpressure waits for that request to return before it is fetched
    # again. Measured (100,000 small messages, 8 partitions, process engine, no-op
    # handler): ~37k msg/s with 500 ms, ~168k with 50 ms, ~216-228k with 20 ms. The cost
    # is more fetch requests while a topic is idle (about 50 a second per broker).
    "fetch.wait.max.ms": 20,
    # librdkafka's consumer default, said here because a broker with Kafka's own default
    # (auto.create.topics.enable=true) would otherwise make a misspelt topic, with one
    # partition, the moment a client asked for its metadata (see NO_AUTO_CREATE).
    "allow.auto.create.topics": False,
}
"""Settings laneway chooses but the user may override through ``config``.

Other fetch settings stay at librdkafka's defaults: ``fetch.min.bytes=1`` already answers as
soon as any record is available. The prefetch memory is bounded by :func:`prefetch_settings`.
"""

METADATA_REFRESH_MS = 300_000
"""librdkafka's default ``topic.metadata.refresh.interval.ms`` (5 minutes): how often a
client refreshes the metadata of its topics unless an error makes it look sooner. A topic
created later, partitions added to a topic, and a topic deleted without an error reaching
this member are noticed at that pace; lower the setting in ``config`` (the ``[kafka]``
table) for sooner, at the cost of one metadata request per interval and member."""
WAITING_DEFAULTS: Mapping[str, object] = {"topic.metadata.refresh.interval.ms": 5_000}
"""With ``wait_for_topics=True`` laneway refreshes metadata every 5 s instead of
:data:`METADATA_REFRESH_MS` (unless ``config`` says otherwise), so that a topic created
while the consumer waits, or partitions added later, are consumed within seconds."""

FETCH_MAX_BYTES = 52_428_800
"""librdkafka's default ``fetch.max.bytes`` (50 MiB): the most one fetch response holds."""
PARTITION_FETCH_MAX_BYTES = 1_048_576
"""librdkafka's default ``max.partition.fetch.bytes`` (1 MiB)."""
MESSAGE_MAX_BYTES = 1_000_000
"""librdkafka's default ``message.max.bytes``, below which ``fetch.max.bytes`` may not go."""
PREFETCH_DEFAULTS: Mapping[str, int] = {
    "queued.max.messages.kbytes": 65_536,
    "fetch.max.bytes": FETCH_MAX_BYTES,
    "max.partition.fetch.bytes": PARTITION_FETCH_MAX_BYTES,
}
"""librdkafka's defaults of the settings :func:`prefetch_settings` derives."""


def prefetch_settings(max_bytes: int, config: Mapping[str, object]) -> dict[str, int]:
    """The prefetch settings to change in ``config`` (empty: none) for a budget of
    ``max_bytes`` (given by the consumer's
    ``max_buffered_bytes``, see :class:`laneway.control.backpressure.Backpressure`).

    The local queue (``queued.max.messages.kbytes``) gets the budget; one fetch response
    (``fetch.max.bytes``) at most the budget, not below ``message.max.bytes`` (librdkafka
    refuses that), and one partition's share of it (``max.partition.fetch.bytes``) at most
    1 MiB. So the client holds about the budget plus one response. A smaller value the
    user set in ``config`` is kept; a larger one is lowered to these. For the default
    ``max_buffered_bytes`` (256 MiB) these are librdkafka's own defaults.
    """
    floor = int(str(config.get("message.max.bytes", MESSAGE_MAX_BYTES)))
    derived = {
        "queued.max.messages.kbytes": max(1, max_bytes // 1024),
        "fetch.max.bytes": max(floor, min(FETCH_MAX_BYTES, max_bytes)),
        "max.partition.fetch.bytes": min(PARTITION_FETCH_MAX_BYTES, max(floor, max_bytes)),
    }
    for key, value in derived.items():
        if key in config:
            derived[key] = min(value, int(str(config[key])))
    return {
        key: value
        for key, value in derived.items()
        if value != int(str(config.get(key, PREFETCH_DEFAULTS[key])))
    }


FORCED: Mapping[str, object] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
}
"""Settings laneway must own; a user value that contradicts them is a ConfigError."""

_WHY_FORCED = {
    "enable.auto.commit": (
        "laneway commits offsets itself, only once a message and every earlier message of "
        "its partition are finished; librdkafka's auto-commit would commit offsets of "
        "messages still in flight and lose them on a crash"
    ),
    "enable.auto.offset.store": (
        "laneway passes explicit offsets (with metadata) to every commit; the offset store "
        "would advance on delivery, not on completion, and is never used"
    ),
}

_OWN_ARGUMENTS = {
    "bootstrap.servers": "bootstrap_servers",
    "metadata.broker.list": "bootstrap_servers",
    "group.id": "group",
}

_TRUE = frozenset({"true", "t", "1"})
_FALSE = frozenset({"false", "f", "0"})


@dataclass(frozen=True)
class KafkaSettings:
    """Validated KafkaSource arguments: what to subscribe to and the full librdkafka config."""

    bootstrap_servers: str
    group: str
    topics: tuple[str, ...]
    consumer_config: dict[str, object]
    incremental: bool
    """Whether the group rebalances incrementally (cooperative assignor or KIP-848 protocol):
    decides between ``incremental_assign`` and ``assign`` in the assignment callback."""
    connect_timeout: float = CONNECT_TIMEOUT
    """Seconds ``open()`` waits for a broker to answer before it fails."""
    wait_for_topics: bool = False
    """Whether ``open()`` accepts subscribed topics the cluster does not have yet."""
    protocol_chosen: bool = False
    """Whether laneway chose ``group.protocol`` (the user did not set it): see
    :mod:`laneway.sources.kafka.group_protocol`."""


def build_settings(
    bootstrap_servers: object,
    group: object,
    topics: object,
    config: object,
    connect_timeout: object = CONNECT_TIMEOUT,
    wait_for_topics: object = False,
) -> KafkaSettings:
    """Check every argument and merge defaults, user config and forced settings."""
    servers = non_empty_text(bootstrap_servers, "bootstrap_servers", "e.g. '127.0.0.1:9092'")
    group_id = non_empty_text(group, "group", "the consumer group id, e.g. 'billing'")
    names = topic_names(topics)
    user = user_config(config, FORCED, _WHY_FORCED, "KafkaSource")
    wait = flag(wait_for_topics, "wait_for_topics")

    merged: dict[str, object] = dict(DEFAULTS)
    if wait:
        merged.update(WAITING_DEFAULTS)
    protocol, chosen = chosen_protocol(user)
    if protocol != CONSUMER:
        # KIP-848 (group.protocol=consumer) assigns on the broker and rejects this setting.
        merged["partition.assignment.strategy"] = DEFAULT_ASSIGNMENT_STRATEGY
    merged.update(user)
    merged["group.protocol"] = protocol
    merged.update(FORCED)
    merged["bootstrap.servers"] = servers
    merged["group.id"] = group_id
    return KafkaSettings(
        bootstrap_servers=servers,
        group=group_id,
        topics=names,
        consumer_config=merged,
        incremental=_is_incremental(merged),
        connect_timeout=seconds(connect_timeout, "connect_timeout"),
        wait_for_topics=wait,
        protocol_chosen=chosen,
    )


def non_empty_text(value: object, option: str, expected: str) -> str:
    """``value`` stripped, or a ConfigError naming ``option`` unless it is non-empty text."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(
            f"{option}={value!r} is not valid; expected a non-empty string, {expected}"
        )
    return value.strip()


def topic_names(topics: object) -> tuple[str, ...]:
    """The distinct topic names of ``topics``, each a legal Kafka topic name or a ``^...``
    pattern (see :mod:`laneway.sources.topic_names`), or a ConfigError unless it lists some."""
    return check_topic_names(topics, "topics", patterns=True)


def user_config(
    config: object, forced: Mapping[str, object], why_forced: Mapping[str, str], source: str
) -> dict[str, object]:
    """The user's librdkafka settings, checked: a mapping of names to values, none of the
    settings passed as ``source``'s own arguments, none contradicting ``forced`` (boolean
    or text settings laneway must own, each with its reason in ``why_forced``)."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ConfigError(
            f"config={config!r} is not valid; expected a mapping of librdkafka setting names "
            "to values, e.g. {'fetch.min.bytes': 1}"
        )
    user: dict[str, object] = {}
    for key, value in config.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"config key {key!r} is not valid; keys are librdkafka setting names")
        if value is None:
            raise ConfigError(f"config[{key!r}]=None is not valid; leave the setting out instead")
        if key in _OWN_ARGUMENTS:
            raise ConfigError(
                f"config[{key!r}] is not allowed; pass it as {source}({_OWN_ARGUMENTS[key]}=...)"
            )
        if key in forced and _differs(key, value, forced[key]):
            raise ConfigError(f"config[{key!r}]={value!r} is not allowed: {why_forced[key]}")
        user[key] = value
    return user


def _differs(key: str, value: object, forced: object) -> bool:
    if isinstance(forced, bool):
        return _as_bool(key, value) != forced
    return str(value).strip().lower() != str(forced)


def _as_bool(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"config[{key!r}]={value!r} is not valid; expected true or false")


def _is_incremental(config: Mapping[str, object]) -> bool:
    if str(config.get("group.protocol", "classic")).lower() == "consumer":
        return True
    return "cooperative" in str(config.get("partition.assignment.strategy", "")).lower()


CONNECTION_PREFIXES = ("bootstrap.servers", "security.", "sasl.", "ssl.", "client.", "socket.")
"""Consumer settings that also describe how to reach the cluster (reused by producers)."""


def connection_config(settings: KafkaSettings) -> dict[str, object]:
    """The subset of the consumer config a producer or admin client of the same cluster needs."""
    return connection_subset(settings.consumer_config)


NO_AUTO_CREATE: Mapping[str, object] = {"allow.auto.create.topics": False}
"""What every other client laneway makes of a cluster runs with (its producers, admin
clients, changelog readers). A producer's and an admin client's librdkafka default is
``true``: asking a broker with Kafka's default ``auto.create.topics.enable=true`` for a
topic's metadata, or writing to it, creates it with the broker's ``num.partitions`` (1 by
default). A changelog made that way before laneway creates it has one partition instead of
its input's count; a dead-letter topic, one instead of its input's. laneway creates the
topics it writes itself (see :meth:`~laneway.sources.kafka.producer.KafkaProducer.create_topic_like`
and :mod:`laneway.state.kafka_changelog`), and a results topic that does not exist is a
write error naming it, never a new topic."""


def connection_subset(config: Mapping[str, object]) -> dict[str, object]:
    """The settings of a client ``config`` that say how to reach the cluster, and
    :data:`NO_AUTO_CREATE`."""
    subset = {key: value for key, value in config.items() if key.startswith(CONNECTION_PREFIXES)}
    return {**subset, **NO_AUTO_CREATE}
