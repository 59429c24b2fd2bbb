"""What must hold after a run, whatever crashed during it: checked in the database."""

from __future__ import annotations

from collections.abc import Iterable

import psycopg


def problems(dsn: str, request_ids: Iterable[str]) -> list[str]:
    """Every way the database breaks the rules for these requests (empty: none): each
    request has exactly one outcome, no seat has two owners, and every reserved outcome
    matches the seat's owner (and no seat is held without one)."""
    wanted = set(request_ids)
    found: list[str] = []
    with psycopg.connect(dsn) as connection:
        recorded = [row[0] for row in connection.execute("SELECT request_id FROM outcomes")]
        missing = wanted - set(recorded)
        if missing:
            found.append(f"{len(missing)} requests have no outcome, e.g. {sorted(missing)[:3]}")
        unknown = set(recorded) - wanted
        if unknown:
            found.append(
                f"{len(unknown)} outcomes for unknown requests, e.g. {sorted(unknown)[:3]}"
            )
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
