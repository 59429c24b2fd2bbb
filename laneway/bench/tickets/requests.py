"""Reservation requests: their wire format, a generated load, and an open-loop producer.

A request is JSON ``{"request_id", "user", "event", "seat"}`` (``seat`` null: any seat),
keyed by user so one user's requests are handled in order, with a W3C ``traceparent``
header so a trace can follow it from producer to database. :class:`RequestProducer`
writes requests to Kafka without waiting for them to be handled (open loop): all at once
(:meth:`~RequestProducer.spike`) or at a fixed rate (:meth:`~RequestProducer.paced`). Each
record's timestamp is its *intended* send time (a spike's start; a paced request's slot in
the schedule), which the handler stores with the outcome, so latency is measured in the
database from the moment the request was meant to leave. A producer that falls behind
its schedule then shows as latency instead of hiding it (no coordinated omission: timing
from the actual send would leave out the very wait an overloaded system imposes).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from confluent_kafka import KafkaError, Producer

from laneway.types import Message

FLUSH_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Request:
    """One reservation request: ``seat`` None asks for any free seat of ``event``."""

    request_id: str
    user: str
    event: int
    seat: int | None

    def encode(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, value: bytes | None) -> Request:
        fields = json.loads(value or b"")
        return cls(fields["request_id"], fields["user"], int(fields["event"]), fields["seat"])


def reserve_arguments(message: Message) -> tuple[str, str, int, int | None, datetime]:
    """The arguments of ``reserve()`` (schema.sql) for one request message."""
    request = Request.decode(message.value)
    produced = datetime.fromtimestamp(message.timestamp / 1000, tz=timezone.utc)
    return request.request_id, request.user, request.event, request.seat, produced


def requests(
    count: int,
    users: int,
    seats: int,
    any_seat: float = 0.5,
    seed: int = 0,
    events: int = 1,
    prefix: str = "r",
) -> list[Request]:
    """``count`` requests from ``users`` users, spread evenly over events ``1..events``: a
    share ``any_seat`` of them for any seat, the others for a random one of ``seats`` (so
    some collide). The same arguments give the same requests."""
    chooser = random.Random(seed)
    return [
        Request(
            request_id=f"{prefix}{index}",
            user=f"u{chooser.randrange(users)}",
            event=1 + index % events,
            seat=None if chooser.random() < any_seat else chooser.randint(1, seats),
        )
        for index in range(count)
    ]


SpanFactory = Callable[[str, str, int], AbstractContextManager[Any]]
"""Opens the PRODUCER span of one record, given the topic, the request id and the
intended send time (Unix nanoseconds), where the span starts."""


def _no_span(topic: str, request_id: str, intended_ns: int) -> AbstractContextManager[Any]:
    return nullcontext()


class RequestProducer:
    """Writes requests to one Kafka topic, keyed by user, each with a ``traceparent``.

    With ``send_span`` (see :mod:`laneway.bench.tickets.trace_files`) every record is produced
    inside a PRODUCER span whose context the header carries, so the trace starts at the
    producer; otherwise each record gets a fresh random trace context. Delivery is checked
    at :meth:`flush`: a record the broker refused raises there.
    """

    def __init__(self, bootstrap: str, topic: str, send_span: SpanFactory | None = None) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        self._topic = topic
        self._span = send_span or _no_span
        self._inject = _injector() if send_span else None
        self._failures: list[str] = []
        self.produced = 0

    def spike(self, load: Sequence[Request]) -> None:
        """Produce every request at once (as fast as the client takes them), each
        intended for the spike's start."""
        intended_ns = time.time_ns()
        for request in load:
            self._send(request, intended_ns)
        self._producer.poll(0)

    def paced(self, load: Sequence[Request], rate: float) -> None:
        """Produce ``rate`` requests a second, on a schedule fixed in advance (request *i*
        at start + i / rate), whatever the consumers do: late sends catch up at once, and
        keep their slot in the schedule as their intended send time."""
        started = time.monotonic()
        wall_offset_ns = time.time_ns() - int(started * 1e9)
        for index, due in _schedule(len(load), rate, started):
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self._send(load[index], wall_offset_ns + int(due * 1e9))
            self._producer.poll(0)

    def flush(self) -> None:
        """Wait until every record is acknowledged; raise if any was refused."""
        left = self._producer.flush(FLUSH_TIMEOUT_S)
        if left or self._failures:
            raise RuntimeError(f"produce failed: {self._failures[:3] or f'{left} unsent'}")

    def _send(self, request: Request, intended_ns: int) -> None:
        with self._span(self._topic, request.request_id, intended_ns):
            context = self._inject() if self._inject else {}
            header = context.get("traceparent") or _random_traceparent()
            while True:
                try:
                    self._producer.produce(
                        self._topic,
                        request.encode(),
                        request.user.encode(),
                        headers=[("traceparent", header.encode())],
                        on_delivery=self._delivered,
                        timestamp=intended_ns // 1_000_000,
                    )
                    break
                except BufferError:  # the client's queue is full: let it send, then retry
                    self._producer.poll(0.01)
        self.produced += 1

    def _delivered(self, error: KafkaError | None, _message: object) -> None:
        if error is not None:
            self._failures.append(str(error))


def _schedule(count: int, rate: float, started: float) -> Iterator[tuple[int, float]]:
    for index in range(count):
        yield index, started + index / rate


def _random_traceparent() -> str:
    trace_id = random.getrandbits(128) or 1
    span_id = random.getrandbits(64) or 1
    return f"00-{trace_id:032x}-{span_id:016x}-01"


def _injector() -> Callable[[], dict[str, str]]:
    from opentelemetry import propagate

    def inject() -> dict[str, str]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier

    return inject
