"""Reservation handlers for ``laneway run``: the same transaction from asyncio and threads.

    laneway run ticket_handlers:reserve_async    --engine async  --concurrency 64 ...
    laneway run ticket_handlers:reserve_blocking --engine thread --concurrency 64 ...

(with ``examples/ticketing`` on ``PYTHONPATH``). Each handler opens a connection pool once
per worker (``open``/``close``, see ``laneway/lifecycle.py``), sized to the consumer's
concurrency by ``TICKETING_POOL_SIZE`` (default 16), on the database in
``TICKETING_DSN`` (else ``LANEWAY_POSTGRES_DSN``). Each message is one call of
``reserve()`` (``schema.sql``): one round trip, one transaction, idempotent under
redelivery. "Sold out" and "seat taken" are outcomes, returned, not raised; a database
error raises, so laneway retries it. With OpenTelemetry configured, the call is a
``reserve`` client span inside laneway's ``process`` span.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext

import asyncpg
import psycopg_pool
from ticket_requests import reserve_arguments

from laneway.types import Message

RESERVE = "SELECT reserve($1, $2, $3, $4, $5)"
RESERVE_PSYCOPG = "SELECT reserve(%s, %s, %s, %s, %s)"  # the same call, psycopg placeholders


def database() -> str:
    dsn = os.environ.get("TICKETING_DSN") or os.environ.get("LANEWAY_POSTGRES_DSN")
    if not dsn:
        raise RuntimeError("set TICKETING_DSN (or LANEWAY_POSTGRES_DSN) to the database's DSN")
    return dsn


def pool_size() -> int:
    return int(os.environ.get("TICKETING_POOL_SIZE", "16"))


def database_span() -> AbstractContextManager[object]:
    """A client span for the database call when OpenTelemetry is installed (a no-op span
    unless an SDK is configured), else nothing."""
    try:
        from opentelemetry import trace
    except ImportError:
        return nullcontext()
    return trace.get_tracer("ticketing").start_as_current_span(
        "reserve",
        kind=trace.SpanKind.CLIENT,
        attributes={"db.system": "postgresql", "db.operation": "SELECT reserve"},
    )


class AsyncReservations:
    """Reserves on an asyncpg pool; for the async engine."""

    pool: asyncpg.Pool

    async def open(self) -> None:
        size = pool_size()
        self.pool = await asyncpg.create_pool(database(), min_size=size, max_size=size)

    async def close(self) -> None:
        await self.pool.close()

    async def __call__(self, message: Message) -> str:
        with database_span():
            return str(await self.pool.fetchval(RESERVE, *reserve_arguments(message)))


class BlockingReservations:
    """Reserves on a psycopg 3 connection pool; for the thread (or sync) engine."""

    pool: psycopg_pool.ConnectionPool

    def open(self) -> None:
        size = pool_size()
        self.pool = psycopg_pool.ConnectionPool(database(), min_size=size, max_size=size, open=True)
        self.pool.wait()

    def close(self) -> None:
        self.pool.close()

    def __call__(self, message: Message) -> str:
        with database_span(), self.pool.connection() as connection:
            row = connection.execute(RESERVE_PSYCOPG, reserve_arguments(message)).fetchone()
        return str(row[0]) if row else ""


reserve_async = AsyncReservations()
reserve_blocking = BlockingReservations()
