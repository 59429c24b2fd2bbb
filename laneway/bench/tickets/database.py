"""The reservation database: its schema, the checks that must hold after any run, the
outcomes a benchmark measures, and a way to slow it down on purpose.

``prepare()`` creates the schema (``schema.sql``) and free seats; ``problems()`` lists
every broken rule (one outcome per request, no seat with two owners); a :class:`Counter`
watches outcomes arrive; ``timings()``
reads when each request was produced and when its outcome was written;
:class:`Slowdown` makes every reservation hold one lock for a while, so reservations
queue behind each other as they would behind a hot row or a slow disk.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import psycopg

SCHEMA = Path(__file__).resolve().parent / "schema.sql"


def prepare(dsn: str, seats: int, events: Iterable[int] = (1,)) -> None:
    """Create the schema and ``seats`` free seats for each event (existing reservations
    and outcomes are deleted)."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(SCHEMA.read_text())
        connection.execute("TRUNCATE seats, outcomes")
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO seats (event_id, seat_no) VALUES (%s, %s)",
                [(event, seat) for event in events for seat in range(1, seats + 1)],
            )
        connection.execute("VACUUM ANALYZE seats")


def problems(dsn: str, request_ids: Iterable[str]) -> list[str]:
    """Every way the database breaks the rules for these requests (empty: none): each
    request has exactly one outcome (and no outcome is for another request), plus
    :func:`conflicts`."""
    wanted = set(request_ids)
    found: list[str] = []
    with psycopg.connect(dsn) as connection:
        recorded = [row[0] for row in connection.execute("SELECT request_id FROM outcomes")]
    missing = wanted - set(recorded)
    if missing:
        found.append(f"{len(missing)} requests have no outcome, e.g. {sorted(missing)[:3]}")
    unknown = set(recorded) - wanted
    if unknown:
        found.append(f"{len(unknown)} outcomes for unknown requests, e.g. {sorted(unknown)[:3]}")
    return found + conflicts(dsn)


def conflicts(dsn: str) -> list[str]:
    """Every broken seat rule (empty: none): no seat reserved by two requests, and every
    reserved outcome matches its seat's owner (and no seat is held without one)."""
    found: list[str] = []
    with psycopg.connect(dsn) as connection:
        for event, seat, count in connection.execute(
            "SELECT event_id, seat_no, count(*) FROM outcomes WHERE status = 'reserved'"
            " GROUP BY 1, 2 HAVING count(*) > 1"
        ):
            found.append(f"event {event} seat {seat} reserved by {count} requests")
        for request, seat, held in connection.execute(
            "SELECT o.request_id, o.seat_no, s.seat_no FROM outcomes o"
            " FULL JOIN (SELECT * FROM seats WHERE owner IS NOT NULL) s USING (request_id)"
            " WHERE (o.status = 'reserved' OR s.seat_no IS NOT NULL)"
            " AND o.seat_no IS DISTINCT FROM s.seat_no"
        ):
            found.append(f"request {request}: outcome says seat {seat}, the seats table {held}")
    return found


class Counter:
    """Counts outcomes on one open connection (a new connection per look would cost the
    server a process start each time, which a benchmark polling every few milliseconds
    would measure as database load)."""

    def __init__(self, dsn: str) -> None:
        self._connection = psycopg.connect(dsn, autocommit=True)

    def count(self, prefix: str = "") -> int:
        """How many outcomes are written (of requests whose id starts with ``prefix``)."""
        row = self._connection.execute(
            "SELECT count(*) FROM outcomes WHERE request_id LIKE %s", (prefix + "%",)
        ).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self._connection.close()


def timings(dsn: str, prefix: str) -> list[tuple[str, float, float]]:
    """``(request id, produced, done)`` of every outcome of requests whose id starts with
    ``prefix``, as Unix times: the record's timestamp (ms precision) and the database clock
    when the outcome was written, just before its commit."""
    with psycopg.connect(dsn) as connection:
        rows = connection.execute(
            "SELECT request_id, extract(epoch FROM produced_at)::float8,"
            " extract(epoch FROM done_at)::float8 FROM outcomes WHERE request_id LIKE %s",
            (prefix + "%",),
        ).fetchall()
    return [(str(request), float(produced), float(done)) for request, produced, done in rows]


SLOWDOWN_SQL = """
CREATE TABLE IF NOT EXISTS slowdown (hold_s float8 NOT NULL);
CREATE OR REPLACE FUNCTION slow_reservation() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    hold float8;
BEGIN
    SELECT hold_s INTO hold FROM slowdown;
    IF hold > 0 THEN
        PERFORM pg_advisory_xact_lock(4004);  -- one reservation at a time...
        PERFORM pg_sleep(hold);               -- ...each holding the lock this long
    END IF;
    RETURN NEW;
END;
$$;
DROP TRIGGER IF EXISTS slow_reservation ON outcomes;
CREATE TRIGGER slow_reservation BEFORE INSERT ON outcomes
    FOR EACH ROW EXECUTE FUNCTION slow_reservation();
"""


class Slowdown:
    """Slows every reservation down on purpose while :meth:`hold` is above zero.

    Installs a trigger on ``outcomes`` that takes one advisory lock and holds it for
    ``hold_s`` seconds (until its transaction commits): reservations run one at a time
    through that point, so the database manages at most ``1 / hold_s`` a second, and each
    one waits for those queued before it, as behind a hot row or a slow disk. The hold
    changes at once for reservations that start afterwards; :meth:`remove` drops the
    trigger (set the hold to 0 first: dropping it waits for every running transaction).
    """

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(SLOWDOWN_SQL)
            connection.execute("TRUNCATE slowdown")
            connection.execute("INSERT INTO slowdown VALUES (0)")

    def hold(self, seconds: float) -> None:
        with psycopg.connect(self._dsn, autocommit=True) as connection:
            connection.execute("UPDATE slowdown SET hold_s = %s", (seconds,))

    def remove(self) -> None:
        with psycopg.connect(self._dsn, autocommit=True) as connection:
            connection.execute("UPDATE slowdown SET hold_s = 0")
            connection.execute("DROP TRIGGER IF EXISTS slow_reservation ON outcomes")
