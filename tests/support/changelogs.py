"""Reading a state store's changelog back from the log it lives in (the embedded log, or
a real Kafka broker, read_committed), for the state tests."""

from __future__ import annotations

from typing import Any, cast

import kafka_helpers
from topics import EmbeddedTopic, KafkaTopic, LogTopic

from laneway.state.records import offset_in


def read_all(topic: LogTopic, name: str) -> list[tuple[bytes | None, bytes | None, Any]]:
    """Every (committed) record of topic ``name`` of ``topic``'s log, up to its end."""
    if not isinstance(topic, KafkaTopic):
        log = cast(EmbeddedTopic, topic).log
        ends = log.end_offsets(name)
        return [
            (m.key, m.value, list(m.headers))
            for p, end in ends.items()
            for m in log.read(name, p, 0, end)
        ]
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    reader = Consumer(
        {
            "bootstrap.servers": topic.bootstrap,
            "group.id": kafka_helpers.unique_name("state-reader"),
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    partitions = kafka_helpers.partition_ids(topic.bootstrap, name)
    reader.assign([TopicPartition(name, p, OFFSET_BEGINNING) for p in partitions])
    out: list[tuple[bytes | None, bytes | None, Any]] = []
    ended: set[int] = set()
    try:
        for _ in range(200):
            for message in reader.consume(1000, 0.5):
                error = message.error()
                if error is not None:
                    assert error.code() == error._PARTITION_EOF, error
                    ended.add(cast(int, message.partition()))
                    continue
                out.append((message.key(), message.value(), message.headers() or []))
            if ended >= set(partitions):
                return out
    finally:
        reader.close()
    raise TimeoutError(f"{name} was not read to its end")


def changelog_state(topic: LogTopic, changelog: str) -> dict[bytes, int]:
    """Each key's latest state in the changelog (the last record per key), checking every
    record carries the offset header."""
    latest: dict[bytes, int] = {}
    for key, value, headers in read_all(topic, changelog):
        assert key is not None
        assert offset_in(headers) is not None, "a changelog record without its offset"
        if value is None:
            latest.pop(key, None)
        else:
            latest[key] = int(value)
    return latest
