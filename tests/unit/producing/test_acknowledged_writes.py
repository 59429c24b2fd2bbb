"""AcknowledgedWrites: an input is settled only once every record written for it is durable."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

import laneway
from laneway.errors import SourceError
from laneway.producing.acknowledged import AcknowledgedWrites
from laneway.producing.producer import Refusal, WriteFailure
from laneway.results import Produce
from laneway.retry import RetryPolicy
from laneway.sources.base import IgnoreRebalances
from laneway.sources.embedded.producer import EmbeddedProducer

FAST = RetryPolicy(backoff=0.01, backoff_max=0.01)


class ManualProducer:
    """A producer whose acknowledgements the test hands out one by one."""

    def __init__(self) -> None:
        self.queued: list[Produce] = []
        self.answered: set[int] = set()
        self.reports: list[WriteFailure] = []
        self.created: list[tuple[str, str]] = []
        self.refuse_topics = False

    def produce(self, records: Sequence[Produce]) -> list[Refusal]:
        self.queued += records
        return []

    @property
    def unacknowledged(self) -> int:
        """As the protocol says: a failure counts until :meth:`poll` hands it back."""
        return len(self.queued) - len(self.answered) + len(self.reports)

    def create_topic_like(self, topic: str, like: str) -> None:
        if self.refuse_topics:
            raise SourceError("no topics today")
        self.created.append((topic, like))

    def answer(self, index: int, error: str | None = None) -> None:
        """Acknowledge the ``index``-th record queued, or with ``error`` fail it."""
        self.answered.add(index)
        if error is not None:
            r = self.queued[index]
            self.reports.append(WriteFailure(error, r.topic, r.key, r.value))

    def answer_all(self) -> None:
        for index in range(len(self.queued)):
            self.answered.add(index)

    def poll(self) -> list[WriteFailure]:
        reports, self.reports = self.reports, []
        return reports

    def close(self, timeout: float) -> None:
        pass


def record(topic: str = "out", value: bytes = b"v") -> Produce:
    return Produce(topic, value)


def test_an_input_settles_only_when_all_its_records_are_acknowledged() -> None:
    producer = ManualProducer()
    writes: AcknowledgedWrites[str] = AcknowledgedWrites(lambda: producer, FAST)
    writes.write("a", [record(), record()])
    writes.write("b", [record()])
    assert writes.poll() == []
    assert len(producer.queued) == 3 and writes.pending == 2
    producer.answer(0)
    producer.answer(2)
    assert writes.poll() == [], "a record of the round is not acknowledged yet"
    producer.answer(1)
    assert writes.poll() == ["a", "b"]
    assert writes.pending == 0


def test_records_written_during_a_round_go_out_with_the_next_one() -> None:
    """One round at a time: what is written while one is in flight waits for its end, so
    records reach the log in the order they were written."""
    producer = ManualProducer()
    writes: AcknowledgedWrites[str] = AcknowledgedWrites(lambda: producer, FAST)
    writes.write("a", [record(value=b"1")])
    writes.poll()
    writes.write("b", [record(value=b"2")])
    assert writes.poll() == []
    assert [r.value for r in producer.queued] == [b"1"], "b waits for a's round"
    producer.answer(0)
    assert writes.poll() == ["a"]
    assert [r.value for r in producer.queued] == [b"1", b"2"]
    producer.answer(1)
    assert writes.poll() == ["b"]


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
    writes.write("a", [record(value=b"1"), Produce("out", b"2", b"k", [("h", b"x")])])
    writes.poll()
    producer.answer(0)
    producer.answer(1, "broker said no")
    assert writes.poll() == []
    assert writes.write_errors == 1
    assert len(producer.queued) == 2, "not written again before the backoff"
    time.sleep(0.02)
    writes.poll()
    assert producer.queued[2] == Produce("out", b"2", b"k", [("h", b"x")]), "headers kept"
    producer.answer(2)
    assert writes.poll() == ["a"]
    assert writes.pending == 0


def test_of_identical_records_one_failing_one_is_written_again() -> None:
    """A failure names topic, key and value only: one of two identical records is written
    again, and both inputs settle once it is acknowledged."""
    producer = ManualProducer()
    writes: AcknowledgedWrites[str] = AcknowledgedWrites(lambda: producer, FAST)
    writes.write("a", [record()])
    writes.write("b", [record()])
    writes.poll()
    producer.answer(0)
    producer.answer(1, "no")
    settled = writes.poll()
    assert len(settled) == 1 and writes.write_errors == 1
    time.sleep(0.02)
    writes.poll()
    assert len(producer.queued) == 3
    producer.answer(2)
    assert sorted(settled + writes.poll()) == ["a", "b"]


def test_a_failure_matching_no_record_writes_the_whole_round_again() -> None:
    producer = ManualProducer()
    writes: AcknowledgedWrites[str] = AcknowledgedWrites(lambda: producer, FAST)
    writes.write("a", [record(value=b"1")])
    writes.write("b", [record(value=b"2")])
    writes.poll()
    producer.answer_all()
    producer.reports.append(WriteFailure("odd", "out", None, b"never written"))
    assert writes.poll() == []
    time.sleep(0.02)
    writes.poll()
    assert sorted(r.value for r in producer.queued[2:]) == [b"1", b"2"]
    producer.answer_all()
    assert sorted(writes.poll()) == ["a", "b"]  # rewrites are due in jittered order


def test_missing_topics_are_created_like_the_input_topic_once() -> None:
    producer = ManualProducer()
    writes: AcknowledgedWrites[str] = AcknowledgedWrites(lambda: producer, FAST)
    writes.write("a", [record("orders.dlq")], like="orders")
    writes.write("b", [record("orders.dlq")], like="orders")
    writes.poll()
    assert producer.created == [("orders.dlq", "orders")]


def test_a_refused_topic_creation_is_a_failed_write_tried_again() -> None:
    producer = ManualProducer()
    producer.refuse_topics = True
    writes: AcknowledgedWrites[str] = AcknowledgedWrites(lambda: producer, FAST)
    writes.write("a", [record("orders.dlq")], like="orders")
    assert writes.poll() == []
    assert writes.write_errors == 1 and not producer.queued
    producer.refuse_topics = False
    time.sleep(0.02)
    writes.poll()
    producer.answer(0)
    assert writes.poll() == ["a"]


def test_the_embedded_producer_writes_into_the_log_and_acknowledges_at_once() -> None:
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


def test_the_embedded_producer_refuses_an_unknown_topic_at_once() -> None:
    log = laneway.EmbeddedLog()
    producer = EmbeddedProducer(log)
    fits, missing = Produce("orders", b"y"), Produce("missing", b"x", b"k", [("h", b"1")])
    log.create_topic("orders")
    [refusal] = producer.produce([missing, fits])
    assert refusal.position == 0 and "missing" in refusal.error
    assert log.end_offsets("orders") == {0: 1}
    assert producer.unacknowledged == 0 and producer.poll() == []
    writes: AcknowledgedWrites[str] = AcknowledgedWrites(lambda: producer, FAST)
    writes.write("a", [Produce("missing", b"x")])
    assert writes.poll() == [] and writes.write_errors == 1 and writes.pending == 1


def test_a_record_written_again_counts_its_tries_until_the_input_is_given_up() -> None:
    producer = ManualProducer()
    writes: AcknowledgedWrites[str] = AcknowledgedWrites(lambda: producer, FAST, give_up_after=2)
    writes.write("a", [record("out", b"one"), record("out", b"two")])
    writes.poll()
    producer.answer(0)
    for attempt in range(3):
        producer.answer(len(producer.queued) - 1, f"no ({attempt})")
        assert writes.poll() == []
        time.sleep(0.02)
        writes.poll()
    assert [r.value for r in producer.queued] == [b"one", b"two", b"two", b"two"]
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


def test_the_embedded_producer_appends_a_round_in_order_and_refuses_record_by_record() -> None:
    log = laneway.EmbeddedLog(capacity=2, when_full="drop_newest")
    log.create_topic("orders", partitions=1)
    producer = EmbeddedProducer(log)
    round_ = [
        Produce("orders", b"1", b"k", [("trace", b"t1")]),
        Produce("missing", b"x"),
        Produce("orders", b"2", partition=0),
        Produce("orders", b"3"),  # the log keeps 2: dropped as newest
    ]
    refused = producer.produce(round_)
    assert [(r.position, r.error.split(":")[0]) for r in refused] == [
        (1, "UnknownTopicError"),
        (3, "dropped"),
    ]
    source = log.subscribe(["orders"], "reader")
    source.open(IgnoreRebalances())
    read = source.poll(10, 1.0)
    assert [(m.offset, m.value, m.key, list(m.headers)) for m in read] == [
        (0, b"1", b"k", [("trace", b"t1")]),
        (1, b"2", None, []),
    ]
    [(position, error)] = log.produce_records([Produce("orders", "text")])
    assert position == 0 and "value='text' is not valid; expected bytes" in error
