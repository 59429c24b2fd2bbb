"""Decoding where messages are dispatched, encoding where results are written: the parts
the control plane and the process workers call (see laneway.serde.decoding and
laneway.control.encoding)."""

from __future__ import annotations

import pickle

import msgspec
from metrics_recorder import Recorder
from typed_app import Order

from laneway import serde
from laneway.control.encoding import Encoding
from laneway.engines.process.reply import BatchReply
from laneway.engines.process.slot import Batch, Harvest
from laneway.metrics import Metric
from laneway.results import Produce
from laneway.serde.decoding import Decoding, Record, as_read
from laneway.serde.typed_handlers import DecodingHandler
from laneway.types import Message


def message(offset: int, value: bytes | None, key: bytes | None = b"k") -> Message:
    return Message("orders", 0, offset, key, value, (("h", b"1"),), 1_000 + offset)


def test_a_record_keeps_its_bytes_and_carries_the_decoded_view() -> None:
    metrics = Recorder()
    decoding = Decoding(serde.json(Order), serde.text(), metrics)
    good = message(0, msgspec.json.encode(Order(1, 2.0)))
    records, failures = decoding.decode([good, message(1, b"{}"), message(2, None, None)])
    assert [r.offset for r in records] == [0, 2]
    first = records[0]
    assert isinstance(first, Record)
    # What lanes, circuits and dead letters read by name is the record as read:
    assert (first.topic, first.partition, first.offset, first.key, first.value) == good[:5]
    assert (first.headers, first.timestamp, first.delivery_count) == good[5:]
    assert as_read(first) == good and type(as_read(first)) is Message
    assert first == good and good == first and (first != good) is False
    assert first in [good] and good in [first] and hash(first) == hash(good)
    assert first != message(0, b"other")
    assert pickle.loads(pickle.dumps(first)) == good
    assert first.view == Message("orders", 0, 0, "k", Order(1, 2.0), (("h", b"1"),), 1_000)
    assert records[1].view.value is None and records[1].view.key is None
    [failure] = failures
    assert failure.message == message(1, b"{}")
    assert (failure.error_type, failure.attempts) == ("deserialization", 0)
    assert failure.error_message.startswith("could not decode the value: ValidationError:")
    assert decoding.failures == 1
    assert metrics.counters[(Metric.DESERIALIZATION_FAILURES, ("orders",))] == 1


def test_a_worker_decodes_its_rows_and_reports_the_rest_by_index() -> None:
    seen: list[Message] = []
    handler, decoding, views = DecodingHandler(seen.append, serde.json(Order), None).in_worker(
        False
    )
    rows = [tuple(message(i, msgspec.json.encode(Order(i, 1.0)))) for i in range(3)]
    rows[1] = tuple(message(1, b"nope"))
    kept, views.by_position, undecodable = decoding.rows([*rows, None])
    assert kept[1] is None and kept[3] is None and kept[0] == rows[0]
    assert [index for index, _ in undecodable] == [1]
    assert views.by_position[("orders", 0, 2)].value == Order(2, 1.0)
    handler(Message(*rows[2]))  # what the worker's invoker calls: the raw row's message
    assert seen == [views.by_position[("orders", 0, 2)]]


def test_undecodable_rows_are_failures_with_no_attempt_and_times_follow_their_rows() -> None:
    messages = [message(i, b"v") for i in range(5)]
    batch = Batch(7, messages)
    batch.gave_up.add(2)  # given up by the parent before
    reply = BatchReply(timed=True)
    reply.undecodable([(1, "could not decode"), (4, "could not decode")])
    reply.ran(0, 0.0, (None, 1, None))
    reply.ran(3, 0.0, (("ValueError", "bad", 2, "tb"), 2, None))
    harvest = Harvest()
    harvest.add(batch, reply.result)
    assert [m.offset for m in harvest.finished] == [0]
    assert len(harvest.durations) == 1  # the handler time of offset 0 alone
    failed = {f.message.offset: f for f in harvest.failed}
    assert sorted(failed) == [1, 3, 4]
    assert (failed[4].error_type, failed[4].attempts) == ("deserialization", 0)
    assert harvest.retries == {"orders": 1}


def test_results_in_bytes_pass_and_objects_are_encoded() -> None:
    encoding = Encoding(serde.json(), None)
    inputs = [message(0, b"x")]
    plain = (inputs, [Produce("out", b"v", b"k")])
    ready, failures = encoding.encode([plain])
    assert ready[0] is plain and failures == []  # untouched: no copy in the common case
    typed = (inputs, [Produce("out", Order(1, 2.0), b"k", partition=1)])
    [(_, [record])], _ = encoding.encode([typed])
    assert record == Produce("out", b'{"id":1,"amount":2.0,"note":""}', b"k", partition=1)
    own = (inputs, [Produce("out", 3, value_serializer=lambda n: b"%d!" % n)])
    assert encoding.encode([own])[0][0][1][0].value == b"3!"


def test_a_result_that_cannot_be_encoded_fails_its_inputs() -> None:
    inputs = [message(0, b"x"), message(1, b"y")]
    ready, failures = Encoding(None, None).encode([(inputs, [Produce("out", b"v", key=7)])])
    assert ready == []
    assert [f.message.offset for f in failures] == [0, 1]
    assert failures[0].error_type == "serialization"
    assert "the key of a Produce to 'out' is an int, not bytes, and no key_serializer" in (
        failures[0].error_message
    )
    _, failures = Encoding(lambda value: "text", None).encode(  # type: ignore[arg-type, return-value]
        [(inputs[:1], [Produce("out", 1)])]
    )
    assert "returned str, not bytes" in failures[0].error_message
