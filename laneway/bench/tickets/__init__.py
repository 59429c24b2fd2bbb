"""Ticket reservations on PostgreSQL: the workload of the ``spike`` and ``paced`` benchmarks
(seed 004) and of ``examples/ticketing``.

:mod:`~laneway.bench.tickets.requests` (the request format, a generated load and an
open-loop producer), :mod:`~laneway.bench.tickets.handlers` (an asyncpg and a psycopg
handler for ``laneway run``), :mod:`~laneway.bench.tickets.database` (the schema, the
checks, the measured timings and an on-purpose slowdown); ``schema.sql`` holds
``reserve()``, the one transaction per request; :mod:`~laneway.bench.tickets.trace_files`
writes the producer's and the handlers' spans to files and reads one request's trace back.
Needs ``laneway[postgres]``.
"""
