"""Handlers for the Jaeger round trip (tests/integration/test_jaeger_traces.py), run by
``laneway run`` with ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, on every engine.

Each call makes a ``handle <value>`` span with a CLIENT child ``SELECT 1`` (the handler's
own spans, under laneway's ``process <topic>``), then by the message's value: ``ok``
returns; ``flaky`` fails its first attempt (per process: a process worker retries in
itself) and returns on the next; ``poison`` always fails, so it is dead-lettered.
"""

from __future__ import annotations

import asyncio

from opentelemetry import trace

from laneway import Message

_attempts: dict[tuple[str, int, int], int] = {}


class FlakyError(RuntimeError):
    """The first attempt of a ``flaky`` message."""


class PoisonError(RuntimeError):
    """Every attempt of a ``poison`` message."""


def _work(message: Message) -> None:
    value = bytes(message.value or b"").decode()
    tracer = trace.get_tracer("jaeger-app")
    with tracer.start_as_current_span(f"handle {value}"):
        with tracer.start_as_current_span("SELECT 1", kind=trace.SpanKind.CLIENT):
            pass
        place = (message.topic, message.partition, message.offset)
        _attempts[place] = _attempts.get(place, 0) + 1
        if value == "poison":
            raise PoisonError(f"poison at offset {message.offset}")
        if value == "flaky" and _attempts[place] == 1:
            raise FlakyError(f"first attempt of offset {message.offset}")


def handle(message: Message) -> None:
    _work(message)


async def handle_async(message: Message) -> None:
    await asyncio.sleep(0)
    _work(message)
