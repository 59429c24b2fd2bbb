"""The embedded log puts every key on the partition a real Kafka producer picks.

confluent-kafka's Producer is configured with ``partitioner="murmur2_random"``, librdkafka's
"Java Producer compatible Murmur2 hash of key" (its default, ``consistent_random``, is CRC32
and would not match the Java client). Each key's partition is read from its delivery report.
"""

from __future__ import annotations

import random

import pytest
from kafka_helpers import create_topic, produce, unique_name

from laneway.sources.embedded.log import EmbeddedLog

pytestmark = pytest.mark.kafka


def _keys() -> list[bytes]:
    rng = random.Random(20240611)
    keys = {f"acct-{i}".encode() for i in range(600)}
    keys |= {f"ключ-{i}-é".encode() for i in range(100)}
    keys |= {rng.randbytes(rng.randint(1, 96)) for _ in range(500)}
    keys |= {bytes([b]) for b in range(256)}
    keys.add(b"")  # an empty key is hashed (not randomized) by Java and by murmur2_random
    return sorted(keys)


@pytest.mark.parametrize("partitions", [8, 7])
def test_keys_land_on_the_same_partition_as_in_kafka(kafka_bootstrap: str, partitions: int) -> None:
    keys = _keys()
    assert len(keys) >= 1_000
    topic = unique_name(f"parity{partitions}")
    create_topic(kafka_bootstrap, topic, partitions)

    delivered = produce(kafka_bootstrap, topic, [(key, b"v") for key in keys])
    kafka_choice = {key: partition for key, (partition, _) in zip(keys, delivered, strict=True)}

    with EmbeddedLog() as log:
        log.create_topic(topic, partitions=partitions)
        embedded_choice = {key: log.produce(topic, b"v", key=key)[0] for key in keys}

    mismatches = {
        k: (kafka_choice[k], embedded_choice[k])
        for k in keys
        if kafka_choice[k] != embedded_choice[k]
    }
    assert mismatches == {}
    assert len(set(kafka_choice.values())) == partitions
