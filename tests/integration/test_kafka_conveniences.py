"""laneway.kafka: create a topic and produce to it, for users starting on Kafka."""

from __future__ import annotations

import pytest
from kafka_helpers import read_records, unique_name

import laneway
import laneway.kafka
from laneway.sources.embedded.partitioner import partition_for_key

pytestmark = pytest.mark.kafka


def test_create_topic_then_produce_lands_keys_where_the_embedded_log_would(
    kafka_bootstrap: str,
) -> None:
    topic = unique_name("convenience")
    assert laneway.kafka.create_topic(kafka_bootstrap, topic, partitions=4) is True
    assert laneway.kafka.create_topic(kafka_bootstrap, topic, partitions=4) is False
    records = [(b"acct-%d" % i, b"v%d" % i) for i in range(40)]
    records.append((b"h", b"with headers", [("trace", b"1")]))  # type: ignore[arg-type]
    assert laneway.kafka.produce(kafka_bootstrap, topic, records) == 41
    read = read_records(kafka_bootstrap, topic, 41)
    for record in read:
        assert record.key is not None
        assert record.partition == partition_for_key(record.key, 4)
    assert [r.headers for r in read if r.key == b"h"] == [[("trace", b"1")]]


def test_producing_to_a_missing_topic_is_a_source_error_within_the_timeout(
    kafka_bootstrap: str,
) -> None:
    with pytest.raises(laneway.SourceError, match="producing to 'nowhere-"):
        laneway.kafka.produce(
            kafka_bootstrap,
            unique_name("nowhere"),
            [(b"k", b"v")],
            {"message.timeout.ms": 1000},
            timeout=5,
        )
