"""The ticketing workload (laneway.bench.tickets, examples/ticketing) on the real broker and
the real PostgreSQL."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import psycopg
import pytest
from kafka_helpers import create_topic, unique_name
from service_runs import Service, wait_until

from laneway.bench.tickets.database import prepare, problems
from laneway.bench.tickets.requests import Request, RequestProducer, requests

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]

SEATS = 300


def outcomes(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as connection:
        rows = connection.execute("SELECT status, count(*) FROM outcomes GROUP BY 1").fetchall()
    return {status: count for status, count in rows}


@pytest.fixture
def database(postgres_dsn: str) -> str:
    prepare(postgres_dsn, seats=SEATS)
    return postgres_dsn


@pytest.fixture
def services(tmp_path: Path, database: str) -> Iterator[Callable[[str], Service]]:
    """``laneway run ticket_handlers:<name>`` processes, killed at teardown."""
    started: list[Service] = []

    def service(handler: str) -> Service:
        env = {"TICKETING_DSN": database, "TICKETING_POOL_SIZE": "8"}
        ref = f"laneway.bench.tickets.handlers:{handler}"
        started.append(Service(tmp_path, ref, [], env))
        return started[-1]

    yield service
    for running in started:
        running.close()


@pytest.mark.parametrize(
    ("handler", "engine"), [("reserve_async", "async"), ("reserve_blocking", "thread")]
)
def test_every_request_has_one_outcome_after_a_sigkill_and_restart(
    services: Callable[[str], Service],
    database: str,
    kafka_bootstrap: str,
    handler: str,
    engine: str,
) -> None:
    service = services(handler)
    topic, group = unique_name("tickets"), unique_name("g")
    create_topic(kafka_bootstrap, topic, 8)
    load = requests(4_000, users=1_500, seats=SEATS)
    producer = RequestProducer(kafka_bootstrap, topic)
    producer.spike(load)
    producer.flush()
    args = (
        "--bootstrap-servers", kafka_bootstrap, "--group", group, "--topic", topic,
        "--engine", engine, "--concurrency", "16", "--config", str(service.kafka_file),
    )  # fmt: skip

    def done() -> int:
        return sum(outcomes(database).values())

    first = service.start(*args)
    wait_until(lambda: done() >= 200, 60, "some outcomes")
    service.kill(first)
    assert done() < len(load), "killed mid-run"
    second = service.start(*args)
    wait_until(lambda: done() == len(load), 120, "an outcome for every request")
    second.send_signal(signal.SIGTERM)
    output, _ = second.communicate(timeout=30)
    assert second.returncode == 0, output
    assert problems(database, [request.request_id for request in load]) == []
    counts = outcomes(database)
    assert counts["reserved"] == SEATS, counts  # 2,000 any-seat requests sell every seat
    assert counts["sold_out"] > 0 and counts.get("seat_taken", 0) > 0, counts


def test_a_redelivered_request_keeps_its_first_outcome(database: str) -> None:
    now = datetime.now(timezone.utc)
    with psycopg.connect(database, autocommit=True) as connection:

        def reserve(request: Request) -> str:
            arguments = (request.request_id, request.user, request.event, request.seat, now)
            row = connection.execute("SELECT reserve(%s, %s, %s, %s, %s)", arguments).fetchone()
            assert row is not None
            return str(row[0])

        assert reserve(Request("a", "alice", 1, 7)) == "reserved"
        assert reserve(Request("b", "bob", 1, 7)) == "seat_taken"
        assert reserve(Request("a", "alice", 1, 7)) == "reserved"  # redelivered: unchanged
        assert reserve(Request("c", "carol", 1, None)) == "reserved"
        owners = connection.execute(
            "SELECT seat_no, owner FROM seats WHERE owner IS NOT NULL ORDER BY seat_no"
        ).fetchall()
    assert owners == [(1, "carol"), (7, "alice")]
    assert problems(database, ["a", "b", "c"]) == []


def test_sold_out_is_an_outcome_once_every_seat_is_taken(database: str) -> None:
    now = datetime.now(timezone.utc)
    with psycopg.connect(database, autocommit=True) as connection:
        statuses = [
            connection.execute(
                "SELECT reserve(%s, %s, 1, NULL, %s)", (f"r{i}", f"u{i}", now)
            ).fetchone()
            for i in range(SEATS + 2)
        ]
    assert [row[0] for row in statuses if row] == ["reserved"] * SEATS + ["sold_out"] * 2


def test_a_copy_running_alongside_fails_and_its_retry_returns_the_first_outcome(
    database: str,
) -> None:
    """A redelivery while the first copy is still in its transaction (a consumer that lost
    its partition mid-call): the second copy waits, then fails as a whole, seat included;
    laneway retries it and the retry returns what the first copy recorded."""
    now = datetime.now(timezone.utc)
    call = "SELECT reserve(%s, %s, 1, NULL, %s)"
    with psycopg.connect(database) as first, psycopg.connect(database, autocommit=True) as copy:
        row = first.execute(call, ("dup", "dana", now)).fetchone()  # transaction left open
        assert row == ("reserved",)
        failures: list[BaseException] = []

        def second_copy() -> None:
            try:
                copy.execute(call, ("dup", "dana", now))
            except psycopg.errors.UniqueViolation as error:
                failures.append(error)

        waiter = threading.Thread(target=second_copy)
        waiter.start()
        time.sleep(0.3)
        assert waiter.is_alive()  # blocked behind the first copy's outcome
        first.commit()
        waiter.join(10)
        assert len(failures) == 1
        retried = copy.execute(call, ("dup", "dana", now)).fetchone()
    assert retried == ("reserved",)
    assert problems(database, ["dup"]) == []
    with psycopg.connect(database) as connection:
        held = connection.execute("SELECT count(*) FROM seats WHERE owner = 'dana'").fetchone()
    assert held == (1,)
