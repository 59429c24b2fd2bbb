"""commit_offsets: a commit that failed with STALE_MEMBER_EPOCH is made again, anything
else is not (the broker's answer is faked here; the race itself is
``tests/integration/test_kip848_commits.py`` on the real broker)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from laneway.sources.kafka import commits
from laneway.sources.kafka.commits import commit_offsets

STALE = KafkaError(KafkaError.STALE_MEMBER_EPOCH)


class Answers:
    """A consumer whose synchronous commits answer from a script: an error code for the
    whole commit, or partitions (with their errors)."""

    def __init__(self, *answers: KafkaError | list[TopicPartition]) -> None:
        self.answers = list(answers)
        self.calls: list[list[TopicPartition]] = []

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> list[TopicPartition]:
        assert asynchronous is False
        self.calls.append(offsets)
        answer = self.answers.pop(0)
        if isinstance(answer, KafkaError):
            raise KafkaException(answer)
        return answer


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


class StalePartition:
    """A committed partition as librdkafka answers it, with the partition's error (a real
    TopicPartition's ``error`` cannot be set from Python)."""

    topic, partition, offset, error = "orders", 0, 5, STALE


def test_a_stale_epoch_is_committed_again_until_it_goes_through() -> None:
    offsets = [TopicPartition("orders", 0, 5)]
    done = [TopicPartition("orders", 0, 5)]
    consumer = Answers(STALE, [StalePartition()], done)  # type: ignore[list-item]
    clock = Clock()
    assert commit_offsets(consumer, offsets, clock.sleep, clock) == done  # type: ignore[arg-type]
    assert consumer.calls == [offsets] * 3, "the same offsets each time"
    assert clock.slept == [commits.FIRST_WAIT, commits.FIRST_WAIT * 2]


def test_other_errors_are_not_retried() -> None:
    consumer = Answers(KafkaError(KafkaError.UNKNOWN_MEMBER_ID))
    clock = Clock()
    with pytest.raises(KafkaException, match="UNKNOWN_MEMBER_ID"):
        commit_offsets(consumer, [TopicPartition("orders", 0, 5)], clock.sleep, clock)  # type: ignore[arg-type]
    assert len(consumer.calls) == 1 and clock.slept == []


def test_retries_end_after_retry_for_and_the_last_answer_stands() -> None:
    consumer = Answers(*([STALE] * 200))
    clock = Clock()
    with pytest.raises(KafkaException, match="STALE_MEMBER_EPOCH"):
        commit_offsets(consumer, [TopicPartition("orders", 0, 5)], clock.sleep, clock)  # type: ignore[arg-type]
    assert sum(clock.slept) <= commits.RETRY_FOR
    assert max(clock.slept) == commits.LONGEST_WAIT
    assert len(consumer.calls) == len(clock.slept) + 1
