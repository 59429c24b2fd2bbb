"""Every source against the Source protocol's promises (see ``support/source_contract.py``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kafka_helpers import share_source
from source_contract import OffsetSourceContract, SourceContract
from topics import EmbeddedTopic, KafkaTopic, LogTopic

import laneway
from laneway.sources.base import Source

FAST_GROUP: dict[str, object] = {
    "group.protocol": "classic",
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 300,
}
"""The classic protocol, on request: session.timeout.ms must be >= the broker's
group.min.session.timeout.ms (6000 by default); a short heartbeat makes members notice a
rebalance quickly."""
KIP848_GROUP: dict[str, object] = {"group.protocol": "consumer"}
"""KIP-848: the broker sets session and heartbeat (librdkafka refuses the classic settings)."""


class TestEmbeddedSource(OffsetSourceContract):
    @pytest.fixture
    def new_topic(self) -> Callable[[int], LogTopic]:
        return EmbeddedTopic


@pytest.mark.kafka
class TestKafkaSource(OffsetSourceContract):
    """A consumer group under the classic rebalance protocol (cooperative-sticky)."""

    GROUP = FAST_GROUP

    @pytest.fixture
    def new_topic(self, kafka_bootstrap: str) -> Callable[[int], LogTopic]:
        return lambda partitions: KafkaTopic(kafka_bootstrap, partitions)

    def source(self, topic: LogTopic, group: str) -> Source:
        # enable.partition.eof makes librdkafka emit EOF events: every test checks that
        # polls skip them.
        assert isinstance(topic, KafkaTopic)
        settings = {**self.GROUP, "enable.partition.eof": True}
        return laneway.KafkaSource(topic.bootstrap, group, [topic.name], settings)


@pytest.mark.kafka
class TestKafkaSourceKip848(TestKafkaSource):
    """The same contract under ``group.protocol=consumer`` (KIP-848): the broker assigns,
    incrementally, and commits carry the member epoch."""

    GROUP = KIP848_GROUP


@pytest.mark.kafka
class TestKafkaShareSource(SourceContract):
    """The contract's common part (see ``support/source_contract.py`` for what a share group
    leaves out); each poll is settled through the source's Progress, as the consumer does."""

    SETTLES_POLLS = True
    ASSIGNS_PARTITIONS = False

    @pytest.fixture
    def new_topic(self, kafka_bootstrap: str) -> Callable[[int], LogTopic]:
        return lambda partitions: KafkaTopic(kafka_bootstrap, partitions)

    def source(self, topic: LogTopic, group: str) -> Source:
        assert isinstance(topic, KafkaTopic)
        return share_source(topic.bootstrap, f"{group}-{topic.name}", [topic.name])
