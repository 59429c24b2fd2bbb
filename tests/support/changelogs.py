"""Reading a state store's changelog back from the log it lives in (the embedded log, or
a real Kafka broker, read_committed), for the state tests."""

from __future__ import annotations

import time
from typing import Any, cast

import kafka_helpers
from topics import EmbeddedTopic, KafkaTopic, LogTopic

from laneway.state.records import offset_in

Record = tuple[bytes | None, bytes | None, Any]
"""A record's key, value and headers."""


def read_all(topic: LogTopic, name: str) -> list[Record]:
    """Every (committed) record of topic ``name`` of ``topic``'s log, up to its end."""
    if isinstance(topic, KafkaTopic):
        return read_kafka(topic.bootstrap, name)
    log = cast(EmbeddedTopic, topic).log
    ends = log.end_offsets(name)
    read = [m for p, end in ends.items() for m in log.read(name, p, 0, end)]
    return [(m.key, m.value, list(m.headers)) for m in read]


def read_kafka(bootstrap: str, name: str, limit_s: float = 60.0) -> list[Record]:
    """Every committed record of Kafka topic ``name``, every partition read to its end
    (fails after ``limit_s`` seconds)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": kafka_helpers.unique_name("changelog-reader"),
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    partitions = kafka_helpers.partition_ids(bootstrap, name)
    reader.assign([TopicPartition(name, p, OFFSET_BEGINNING) for p in partitions])
    out: list[Record] = []
    ended: set[int] = set()
    deadline = time.monotonic() + limit_s
    try:
        while ended != set(partitions) and time.monotonic() < deadline:
            for message in reader.consume(10_000, 0.5):
                error = message.error()
                if error is not None:
                    assert error.code() == error._PARTITION_EOF, error
                    ended.add(cast(int, message.partition()))
                    continue
                out.append((message.key(), message.value(), message.headers() or []))
    finally:
        reader.close()
    if ended != set(partitions):
        raise TimeoutError(f"{name} was not read to its end in {limit_s:g} s")
    return out


def latest_counts(records: list[Record]) -> dict[bytes, int]:
    """Each key's latest state (the last record per key; a tombstone deletes it) read as an
    integer count, checking every record carries the offset header."""
    latest: dict[bytes, int] = {}
    for key, value, headers in records:
        assert key is not None
        assert offset_in(headers) is not None, "a changelog record without its offset"
        if value is None:
            latest.pop(key, None)
        else:
            latest[key] = int(value)
    return latest


def changelog_state(topic: LogTopic, changelog: str) -> dict[bytes, int]:
    """Each key's latest count in the changelog of ``topic``'s log."""
    return latest_counts(read_all(topic, changelog))
