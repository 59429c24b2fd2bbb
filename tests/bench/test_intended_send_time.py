"""The spike and paced producers stamp each request with its *intended* send time, so a
late send counts against the run's latency (no coordinated omission), on a real broker."""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import pytest
from kafka_helpers import create_topic, read_records, unique_name

from laneway.bench.tickets.requests import Request, RequestProducer, requests

pytestmark = pytest.mark.kafka

SEND_DELAY_S = 0.005


class SlowSends:
    """A span factory that makes every send 5 ms late and remembers the intended times."""

    def __init__(self) -> None:
        self.intended_ns: dict[str, int] = {}

    def __call__(
        self, topic: str, request_id: str, intended_ns: int
    ) -> AbstractContextManager[Any]:
        self.intended_ns[request_id] = intended_ns
        time.sleep(SEND_DELAY_S)
        return nullcontext()


def stamped(bootstrap: str, topic: str, load: list[Request]) -> dict[str, int]:
    records = read_records(bootstrap, topic, len(load))
    return {Request.decode(r.value).request_id: r.timestamp_ms for r in records}


def test_a_paced_request_sent_late_keeps_its_slot_in_the_schedule(kafka_bootstrap: str) -> None:
    topic = unique_name("paced")
    create_topic(kafka_bootstrap, topic, 2)
    load = requests(60, users=10, seats=50)
    sends = SlowSends()
    producer = RequestProducer(kafka_bootstrap, topic, sends)
    started = time.monotonic()
    producer.paced(load, rate=1_000.0)  # one a millisecond, but each send takes 5
    took = time.monotonic() - started
    producer.flush()
    assert took >= 60 * SEND_DELAY_S, "the sends fell behind the schedule"
    stamps = stamped(kafka_bootstrap, topic, load)
    first = stamps[load[0].request_id]
    for index, request in enumerate(load):
        # Slot i is i ms after the first; the actual sends were ~5 ms apart.
        assert stamps[request.request_id] - first == pytest.approx(index, abs=1), index
        assert stamps[request.request_id] == sends.intended_ns[request.request_id] // 1_000_000


def test_a_spike_is_stamped_with_its_start(kafka_bootstrap: str) -> None:
    topic = unique_name("spike")
    create_topic(kafka_bootstrap, topic, 2)
    load = requests(40, users=10, seats=50)
    sends = SlowSends()
    producer = RequestProducer(kafka_bootstrap, topic, sends)
    before_ms = time.time_ns() // 1_000_000
    producer.spike(load)
    producer.flush()
    stamps = stamped(kafka_bootstrap, topic, load)
    assert set(stamps.values()) == {min(stamps.values())}, "every request meant for the start"
    assert before_ms <= min(stamps.values()) <= before_ms + 5  # not the ~200 ms of late sends
    assert len(set(sends.intended_ns.values())) == 1
