"""Reservation requests: their wire format, the database they reserve seats in, and a load.

A request is JSON ``{"request_id", "user", "event", "seat"}`` (``seat`` null: any seat),
keyed by user so one user's requests are handled in order, with a W3C ``traceparent``
header so a trace can follow it from producer to database. ``prepare()`` creates the
schema (``schema.sql``) and the seats; ``requests()`` generates a load; ``produce()``
writes it to Kafka, stamping each record with the produce time.
"""

from __future__ import annotations

import json
import random
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import psycopg
from confluent_kafka import Producer

from laneway.types import Message

SCHEMA = Path(__file__).resolve().parent / "schema.sql"


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


def prepare(dsn: str, seats: int, events: Sequence[int] = (1,)) -> None:
    """Create the schema and empty ``seats`` free seats for each event (existing
    reservations and outcomes are deleted)."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(SCHEMA.read_text())
        connection.execute("TRUNCATE seats, outcomes")
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO seats (event_id, seat_no) VALUES (%s, %s)",
                [(event, seat) for event in events for seat in range(1, seats + 1)],
            )


def requests(
    count: int, users: int, seats: int, any_seat: float = 0.5, seed: int = 0
) -> list[Request]:
    """``count`` requests from ``users`` users for event 1: a share ``any_seat`` of them
    for any seat, the others for a random one of ``seats`` (so some collide)."""
    chooser = random.Random(seed)
    return [
        Request(
            request_id=f"r{index}",
            user=f"u{chooser.randrange(users)}",
            event=1,
            seat=None if chooser.random() < any_seat else chooser.randint(1, seats),
        )
        for index in range(count)
    ]


def traceparent() -> str:
    """A new W3C trace context: the current OpenTelemetry span's when one is recording."""
    try:
        from opentelemetry import propagate
    except ImportError:
        carrier: dict[str, str] = {}
    else:
        carrier = {}
        propagate.inject(carrier)
    return carrier.get("traceparent") or f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def produce(bootstrap: str, topic: str, load: Iterable[Request]) -> int:
    """Write ``load`` to ``topic`` keyed by user; wait for every write. Returns the count."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    failures: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    count = 0
    for request in load:
        producer.produce(
            topic,
            request.encode(),
            request.user.encode(),
            headers=[("traceparent", traceparent().encode())],
            on_delivery=delivered,
        )
        count += 1
        producer.poll(0)
    if producer.flush(30) or failures:
        raise RuntimeError(f"produce failed: {failures[:3] or 'flush timed out'}")
    return count
