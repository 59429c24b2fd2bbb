"""Which source folder serves a :class:`~laneway.sources.targets.Target`: opens a source, a
group's positions or a dead-letter topic from plain values, importing only the backend the
target names (confluent-kafka is loaded for Kafka alone).

The edges — ``laneway run``, the ops commands — choose a backend here and nowhere else, and
:func:`source_options` gives them every source's options as declared by its folder.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from laneway.errors import ConfigError
from laneway.options import OptionSpec
from laneway.sources.base import Source
from laneway.sources.kafka.client_config import KAFKA_OPTIONS
from laneway.sources.share.settings import SHARE_OPTIONS
from laneway.sources.targets import TARGET_OPTIONS, DeadLetterLog, Positions, Target


def source_options() -> dict[str, tuple[object, OptionSpec]]:
    """Where the log is, then the Kafka and share-group sources' options: name ->
    (default, spec), each declared once by its source's folder."""
    return {**TARGET_OPTIONS, **KAFKA_OPTIONS, **SHARE_OPTIONS}


@contextmanager
def open_source(
    target: Target,
    group: str,
    topics: Sequence[str],
    options: Mapping[str, Any] | None = None,
    member: int | None = None,
) -> Iterator[Source]:
    """The source of ``group`` on ``target``'s ``topics``, closed (with an embedded log's
    directory) when the block ends: a Kafka consumer group, a share group (option
    ``share``) or a durable embedded log. ``options`` holds the sources' options by name
    (see :func:`source_options`; those left out take their defaults); ``member`` is the
    index of a ``laneway run --members`` process (Kafka only)."""
    given = {name: default for name, (default, _) in source_options().items()}
    given.update(options or {})
    if target.log_dir is not None:
        if given["share"]:
            raise ConfigError("share needs Kafka: give --bootstrap-servers HOST:PORT")
        if member is not None:
            raise ConfigError("members > 1 needs Kafka: an embedded log lives in one process")
        with _embedded_source(target, group, topics) as source:
            yield source
        return
    source = _kafka_source(target, group, topics, given, member)
    try:
        yield source
    finally:
        source.close()


@contextmanager
def _embedded_source(target: Target, group: str, topics: Sequence[str]) -> Iterator[Source]:
    from laneway.sources.embedded.log import EmbeddedLog

    log = EmbeddedLog(target.log_dir)
    try:
        source = log.subscribe(list(topics), group)
        try:
            yield source
        finally:
            source.close()
    finally:
        log.close()


def _kafka_source(
    target: Target,
    group: str,
    topics: Sequence[str],
    options: Mapping[str, Any],
    member: int | None,
) -> Source:
    kafka = dict(target.kafka)
    if member is not None:
        kafka.setdefault("client.id", f"laneway-member-{member}")
    given = (str(target.bootstrap_servers), group, list(topics), kafka)
    waits = {
        "connect_timeout": target.connect_timeout,
        "wait_for_topics": options["wait_for_topics"],
    }
    if options["share"]:
        from laneway.sources.share.source import KafkaShareSource

        return KafkaShareSource(
            *given,
            **waits,
            start_at=options["start_at"],
            crash_journal=options["crash_journal"],
            group_config=options["group_config"],
        )
    from laneway.sources.kafka.source import KafkaSource
    from laneway.sources.kafka.transactions import member_transactional_id

    transactional_id = member_transactional_id(group, member, options["transactional_id"])
    return KafkaSource(*given, **waits, transactional_id=transactional_id)


def open_positions(target: Target) -> Positions:
    """A reader of groups' positions and the log ends on ``target`` (it never joins a
    group); close it when done."""
    if target.log_dir is not None:
        from laneway.sources.embedded.group_positions import EmbeddedPositions

        return EmbeddedPositions(target.log_dir)
    from laneway.sources.kafka.group_positions import KafkaPositions

    return KafkaPositions(target)


def open_dead_letters(target: Target, topic: str) -> DeadLetterLog:
    """The dead-letter ``topic`` of ``target``, for one command run;
    :class:`~laneway.errors.UnknownTopicError` if it is missing. Close it when done."""
    if target.log_dir is not None:
        from laneway.sources.embedded.dead_letters import EmbeddedDeadLetters

        return EmbeddedDeadLetters(target.log_dir, topic)
    from laneway.sources.kafka.dead_letters import KafkaDeadLetters

    return KafkaDeadLetters(target, topic)
