"""AcknowledgedWrites: an input is settled only once every record written for it is durable."""

from __future__ import annotations

import time

import pytest

import laneway
from laneway.errors import SourceError
from laneway.producing.acknowledged import AcknowledgedWrites
from laneway.producing.producer import Acknowledge
from laneway.results import Produce
from laneway.retry import RetryPolicy
from laneway.sources.embedded_producer import EmbeddedProducer

FAST = RetryPolicy(backoff=0.01, backoff_max=0.01)


class ManualProducer:
    """A producer whose acknowledgements the test hands out one by one."""

    def __init__(self) -> None:
        self.queued: list[tuple[Produce, Acknowledge]] = []
        self.answers: list[tuple[tuple[Produce, Acknowledge], str | None]] = []
        self.created: list[tuple[str, str]] = []
        self.refuse_topics = False

    def produce(self, record: Produce, done: Acknowledge) -> None:
        self.queued.append((record, done))

    def create_topic_like(self, topic: str, like: str) -> None:
        if self.refuse_topics:
            raise SourceError("no topics today")
        self.created.append((topic, like))

    def answer(self, index: int, error: str | None = None) -> None:
        self.answers.append((self.queued[index], error))

    def poll(self) -> None:
        answers, self.answers = self.answers, []
        for (record, done), error in answers:
            done(error, record)

    def failure(self, error: str, written: Produce) -> tuple[str, Produce]:
        return error, written

    def close(self, timeout: float) -> None:
        self.poll()


def record(topic: str = "out", value: bytes = b"v") -> Produce:
    return Produce(topic, value)


def test_an_input_settles_only_when_all_its_records_are_acknowledged() -> None:
    producer = ManualProducer()
    writes: AcknowledgedWrites[str] = AcknowledgedWrites(lambda: producer, FAST)
    writes.write("a", [record(), record()])
    writes.write("b", [record()])
    assert writes.pending == 2
    producer.answer(0)
    producer.answer(2)
    assert writes.poll() == ["b"]
    producer.answer(1)
    assert writes.poll() == ["a"]
    assert writes.pending == 0


def test_an_input_without_records_settles_at_once() -> None:
    opened: list[ManualProducer] = []

    def open_producer() -> ManualProducer:
        opened.append(ManualProducer())
        return opened[-1]

    writes: AcknowledgedWrites[str] = AcknowledgedWrites(open_producer, FAST)
    writes.write("nothing", [])
    assert writes.poll() == ["nothing"]
    assert not opened, "no producer is opened for an input with nothing to write"


def test_a_failed_write_is_written_again_after_the_backoff() -> None:
    producer = ManualProducer()
    writes: AcknowledgedWrites[str] = AcknowledgedWrites(lambda: producer, FAST)
    writes.write("a", [record()])
    producer.answer(0, "broker said no")
    assert writes.poll() == []
    assert writes.write_errors == 1
    assert len(producer.queued) == 1, "not written again before the backoff"
    time.sleep(0.02)
    writes.poll()
    assert len(producer.queued) == 2
    producer.answer(1)
    assert writes.poll() == ["a"]


def test_missing_topics_are_created_like_the_input_topic_once() -> None:
    producer = ManualProducer()
    writes: AcknowledgedWrites[str] = AcknowledgedWrites(lambda: producer, FAST)
    writes.write("a", [record("orders.dlq")], like="orders")
    writes.write("b", [record("orders.dlq")], like="orders")
    assert producer.created == [("orders.dlq", "orders")]


def test_a_refused_topic_creation_is_a_failed_write_tried_again() -> None:
    producer = ManualProducer()
    producer.refuse_topics = True
    writes: AcknowledgedWrites[str] = AcknowledgedWrites(lambda: producer, FAST)
    writes.write("a", [record("orders.dlq")], like="orders")
    assert writes.write_errors == 1 and not producer.queued
    producer.refuse_topics = False
    time.sleep(0.02)
    writes.poll()
    producer.answer(0)
    assert writes.poll() == ["a"]


def test_the_embedded_producer_writes_into_the_log_and_acknowledges_on_poll() -> None:
    log = laneway.EmbeddedLog()
    log.create_topic("orders", partitions=3)
    producer = EmbeddedProducer(log)
    writes: AcknowledgedWrites[str] = AcknowledgedWrites(lambda: producer, FAST)
    headers = [("h", b"1")]
    writes.write("a", [Produce("orders.out", b"x", b"k", headers)], like="orders")
    writes.write("b", [Produce("orders", b"y", partition=2)])
    assert writes.poll() == ["a", "b"]
    assert log.partitions("orders.out") == 3
    assert sum(log.end_offsets("orders.out").values()) == 1
    assert log.end_offsets("orders")[2] == 1


def test_the_embedded_producer_reports_an_unknown_topic_as_a_failed_write() -> None:
    log = laneway.EmbeddedLog()
    reports: list[tuple[object, object]] = []
    producer = EmbeddedProducer(log)
    record = Produce("missing", b"x", b"k", [("h", b"1")])
    producer.produce(record, lambda error, written: reports.append((error, written)))
    assert reports == []
    producer.poll()
    assert len(reports) == 1 and reports[0][0] is not None
    text, again = producer.failure(*reports[0])
    assert "missing" in text and again == record


def test_a_record_written_again_counts_its_tries_until_the_input_is_given_up() -> None:
    producer = ManualProducer()
    writes: AcknowledgedWrites[str] = AcknowledgedWrites(lambda: producer, FAST, give_up_after=2)
    writes.write("a", [record("out", b"one"), record("out", b"two")])
    producer.answer(0)
    for attempt in range(3):
        producer.answer(len(producer.queued) - 1, f"no ({attempt})")
        assert writes.poll() == []
        time.sleep(0.02)
        writes.poll()
    assert [r.value for r, _ in producer.queued] == [b"one", b"two", b"two", b"two"]
    assert writes.abandoned() == [("a", "no (2)", 3)]
    assert writes.pending == 0 and writes.write_errors == 3


@pytest.mark.parametrize("tries", [1, 2, 3])
def test_the_retry_queue_hands_items_back_when_due(tries: int) -> None:
    from laneway.retry import RetryQueue

    queue: RetryQueue[str] = RetryQueue()
    delay = queue.later("x", tries, FAST)
    assert 0.005 <= delay <= 0.01
    assert queue.due() == []
    time.sleep(0.011)
    assert queue.due() == [("x", tries)]
    assert len(queue) == 0
