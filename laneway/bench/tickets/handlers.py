"""Reservation handlers for ``laneway run``: the same transaction from asyncio and threads.

    laneway run laneway.bench.tickets.handlers:reserve_async    --engine async  ...
    laneway run laneway.bench.tickets.handlers:reserve_blocking --engine thread ...

Each handler opens a connection pool once per worker (``open``/``close``, see
:mod:`laneway.engines.lifecycle`) on the database in ``TICKETING_DSN`` (else
``LANEWAY_POSTGRES_DSN``), of ``TICKETING_POOL_SIZE`` connections (default 16; size it
to the consumer's concurrency, within the server's ``max_connections``).
``TICKETING_STATEMENT_TIMEOUT`` (seconds, default none) sets the server's
``statement_timeout`` on those connections, the usual way a database protects itself from
piled-up work. Each message is one call of ``reserve()`` (``schema.sql``): one round trip,
one transaction, idempotent under redelivery. "Sold out" and "seat taken" are outcomes
``reserve()`` records, not errors; a database error raises, so laneway retries it. The
handlers return ``None`` (laneway fails a message whose handler returns anything else).

With an OpenTelemetry SDK configured (``TICKETING_TRACE_DIR`` configures one that writes
spans to that directory, see :mod:`laneway.bench.tickets.trace_files`), each call is an ``acquire
connection`` span (the wait for the pool) and a ``SELECT reserve`` client span, inside
laneway's ``process <topic>`` span.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import asyncpg
import psycopg_pool

from laneway.bench.tickets.requests import reserve_arguments
from laneway.types import Message

RESERVE = "SELECT reserve($1, $2, $3, $4, $5)"
RESERVE_PSYCOPG = "SELECT reserve(%s, %s, %s, %s, %s)"  # the same call, psycopg placeholders
TRACE_DIR = "TICKETING_TRACE_DIR"


def database() -> str:
    dsn = os.environ.get("TICKETING_DSN") or os.environ.get("LANEWAY_POSTGRES_DSN")
    if not dsn:
        raise RuntimeError("set TICKETING_DSN (or LANEWAY_POSTGRES_DSN) to the database's DSN")
    return dsn


def pool_size() -> int:
    return int(os.environ.get("TICKETING_POOL_SIZE", "16"))


def server_settings() -> dict[str, str]:
    """Settings of every pooled connection: ``statement_timeout`` when one is asked for."""
    timeout = os.environ.get("TICKETING_STATEMENT_TIMEOUT")
    return {"statement_timeout": f"{float(timeout) * 1000:.0f}"} if timeout else {}


class _Spans:
    """The spans of one database call, or nothing when no SDK is configured (decided
    once, at ``open``, so an untraced call pays nothing for them)."""

    def __init__(self) -> None:
        try:
            from opentelemetry import trace

            from laneway.observability.otlp import sdk_configured
        except ImportError:
            self._tracer: Any = None
            return
        self._tracer = trace.get_tracer("ticketing") if sdk_configured() else None
        self._client = trace.SpanKind.CLIENT

    def acquire(self) -> AbstractContextManager[Any]:
        if self._tracer is None:
            return nullcontext()
        span: AbstractContextManager[Any] = self._tracer.start_as_current_span("acquire connection")
        return span

    def query(self) -> AbstractContextManager[Any]:
        if self._tracer is None:
            return nullcontext()
        span: AbstractContextManager[Any] = self._tracer.start_as_current_span(
            "SELECT reserve",
            kind=self._client,
            attributes={"db.system": "postgresql", "db.operation.name": "SELECT"},
        )
        return span


async def _keep_session(connection: asyncpg.Connection) -> None:
    """Return a connection to the pool as it is. asyncpg's default reset runs four more
    statements (advisory unlock, CLOSE ALL, UNLISTEN, RESET ALL) in one more round trip
    per release; ``reserve()`` changes none of that session state (its locks end with its
    transaction), and skipping it cut the database's CPU per request by about a third."""


class AsyncReservations:
    """Reserves on an asyncpg pool; for the async engine."""

    pool: asyncpg.Pool
    spans: _Spans

    async def open(self) -> None:
        size = pool_size()
        self.spans = _Spans()
        self.pool = await asyncpg.create_pool(
            database(),
            min_size=size,
            max_size=size,
            server_settings=server_settings(),
            reset=_keep_session,
        )

    async def close(self) -> None:
        await self.pool.close()

    async def __call__(self, message: Message) -> None:
        arguments = reserve_arguments(message)
        with self.spans.acquire():
            connection = await self.pool.acquire()
        try:
            with self.spans.query():
                await connection.fetchval(RESERVE, *arguments)
        finally:
            await self.pool.release(connection)


class BlockingReservations:
    """Reserves on a psycopg 3 connection pool; for the thread (or sync) engine. Its
    connections are in autocommit mode: ``reserve()`` is one statement, hence one
    transaction, and psycopg would otherwise add a BEGIN and a COMMIT round trip to it."""

    pool: psycopg_pool.ConnectionPool
    spans: _Spans

    def open(self) -> None:
        size = pool_size()
        self.spans = _Spans()
        options = " ".join(f"-c {name}={value}" for name, value in server_settings().items())
        settings: dict[str, Any] = {"autocommit": True}  # reserve() is one statement
        if options:
            settings["options"] = options
        self.pool = psycopg_pool.ConnectionPool(
            database(), min_size=size, max_size=size, kwargs=settings, open=True
        )
        self.pool.wait()

    def close(self) -> None:
        self.pool.close()

    def __call__(self, message: Message) -> None:
        arguments = reserve_arguments(message)
        with self.spans.acquire():
            connection = self.pool.getconn()
        try:
            with self.spans.query():
                connection.execute(RESERVE_PSYCOPG, arguments).fetchone()
        finally:
            self.pool.putconn(connection)


def _trace_to_files() -> None:
    """Configure an OpenTelemetry SDK writing spans to ``TICKETING_TRACE_DIR`` when it is
    set: at import, so laneway sees the SDK when the consumer starts."""
    directory = os.environ.get(TRACE_DIR)
    if directory:
        from laneway.bench.tickets.trace_files import write_spans_to

        write_spans_to(directory, "consumer")


_trace_to_files()
reserve_async = AsyncReservations()
reserve_blocking = BlockingReservations()
