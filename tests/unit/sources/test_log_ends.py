"""Reading the log ends at assignment rides out a moving leader.

Before: one FENCED_LEADER_EPOCH (a broker restarting, a leader election) in the ListOffsets
answer at an assignment raised SourceError and ended the member (the soak saw a
``laneway run`` member exit for it); now such partitions are asked again, for up to 10 s.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from laneway.errors import SourceError
from laneway.sources.kafka.starts import log_ends_now


class Answers:
    """A consumer whose ``offsets_for_times`` answers from a script, then with ends."""

    def __init__(self, script: list[dict[int, KafkaError] | KafkaException]) -> None:
        self.script = script
        self.asked: list[list[int]] = []

    def offsets_for_times(
        self, query: list[TopicPartition], timeout: float
    ) -> list[TopicPartition]:
        self.asked.append([tp.partition for tp in query])
        step = self.script.pop(0) if self.script else {}
        if isinstance(step, KafkaException):
            raise step
        return [_answer(tp, step) for tp in query]


@dataclass
class Found:
    """What ``offsets_for_times`` answers for one partition (a TopicPartition's fields)."""

    topic: str
    partition: int
    offset: int
    error: KafkaError | None = None


def _answer(tp: TopicPartition, errors: dict[int, KafkaError]) -> Found:
    if tp.partition in errors:
        return Found(tp.topic, tp.partition, -1, errors[tp.partition])
    return Found(tp.topic, tp.partition, 100 + tp.partition)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_partitions_whose_leader_moves_are_asked_again() -> None:
    fenced = KafkaError(KafkaError.FENCED_LEADER_EPOCH)
    consumer = Answers([{0: fenced}, {0: KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)}])
    clock = Clock()
    ends = log_ends_now(consumer, [("t", 0), ("t", 1)], "src", clock, clock.sleep)  # type: ignore[arg-type]
    assert ends == {("t", 0): 100, ("t", 1): 101}
    assert consumer.asked == [[0, 1], [0], [0]]


def test_a_leader_that_does_not_come_back_in_time_or_another_error_still_fails() -> None:
    fenced = KafkaError(KafkaError.FENCED_LEADER_EPOCH)
    clock = Clock()
    forever = Answers([{0: fenced}] * 200)
    with pytest.raises(SourceError, match="FENCED_LEADER_EPOCH"):
        log_ends_now(forever, [("t", 0)], "src", clock, clock.sleep)  # type: ignore[arg-type]
    assert clock.now <= 10.0
    denied = Answers([{0: KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)}])
    with pytest.raises(SourceError, match="TOPIC_AUTHORIZATION_FAILED"):
        log_ends_now(denied, [("t", 0)], "src", clock, clock.sleep)  # type: ignore[arg-type]
