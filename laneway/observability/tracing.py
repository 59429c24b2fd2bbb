"""OpenTelemetry tracing of handler attempts and dead letters (``laneway[otel]``).

Only ``opentelemetry-api`` is used: the application brings the SDK and its exporter
(``opentelemetry-instrument`` with the standard ``OTEL_*`` settings, or its own
``set_tracer_provider`` call). Each handler attempt becomes a CONSUMER span named
``process <topic>``, child of the W3C ``traceparent``/``tracestate`` found in the message
headers, with the messaging attributes; a failing attempt records the exception and an
error status; retries are spans of their own. A batch handler's call (``batch_size``) is
one span ``process <topic>`` in a new trace, with ``messaging.batch.message_count`` and a
link to the trace context of each message that carries one (the messaging conventions'
batch shape). A dead-letter record gets the context of a
PRODUCER span ``send <topic>`` in the same trace. Process-engine workers trace in their
own process (the hook is pickled to them), so the SDK must be configured there too
(``opentelemetry-instrument`` does that for spawned workers; so does configuring it when
the handler's module is imported).

Cost: when no SDK is configured (the API's proxy provider), :func:`start_tracing`
returns ``None`` once, at the start, and nothing is wrapped: the per-message cost is nil.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter

from laneway.engines.attempts import AsyncHandler, SyncHandler
from laneway.types import Header, Message


class _HeaderGetter(Getter[Sequence[Header]]):
    """Reads propagation fields from a message's ``(name, bytes)`` headers."""

    def get(self, carrier: Sequence[Header], key: str) -> list[str] | None:
        found = [
            value.decode("utf-8", "replace")
            for name, value in carrier
            if value is not None and name.lower() == key
        ]
        return found or None

    def keys(self, carrier: Sequence[Header]) -> list[str]:
        return [name for name, _ in carrier]


class _HeaderSetter(Setter[list[Header]]):
    def set(self, carrier: list[Header], key: str, value: str) -> None:
        carrier[:] = [(name, data) for name, data in carrier if name.lower() != key]
        carrier.append((key, value.encode()))


_GETTER = _HeaderGetter()
_SETTER = _HeaderSetter()


class TracingHook:
    """An :class:`~laneway.engines.attempts.AttemptHook` that runs each attempt inside a
    CONSUMER span. Picklable (it holds only text), so process workers get it too."""

    def __init__(self, system: str, group: str) -> None:
        self.system = system
        self.group = group

    def wrap(self, handler: SyncHandler) -> SyncHandler:
        tracer = trace.get_tracer("laneway")
        attributes = self._attributes

        def traced(message: Message | list[Message]) -> object:
            if isinstance(message, list):
                with self._batch_span(tracer, message):
                    return handler(message)
            parent = _parent(message)
            with tracer.start_as_current_span(
                f"process {message.topic}",
                context=parent,
                kind=trace.SpanKind.CONSUMER,
                attributes=attributes(message),
            ):
                return handler(message)

        return traced

    def wrap_async(self, handler: AsyncHandler) -> AsyncHandler:
        tracer = trace.get_tracer("laneway")
        attributes = self._attributes

        async def traced(message: Message | list[Message]) -> object:
            if isinstance(message, list):
                with self._batch_span(tracer, message):
                    return await handler(message)
            parent = _parent(message)
            with tracer.start_as_current_span(
                f"process {message.topic}",
                context=parent,
                kind=trace.SpanKind.CONSUMER,
                attributes=attributes(message),
            ):
                return await handler(message)

        return traced

    def _batch_span(
        self, tracer: trace.Tracer, batch: list[Message]
    ) -> AbstractContextManager[trace.Span]:
        links = []
        for message in batch:
            parent = _parent(message)
            if parent is not None:
                context = trace.get_current_span(parent).get_span_context()
                if context.is_valid:
                    links.append(trace.Link(context))
        first = batch[0]
        attributes: dict[str, Any] = {
            "messaging.system": self.system,
            "messaging.operation.type": "process",
            "messaging.destination.name": first.topic,
            "messaging.consumer.group.name": self.group,
            "messaging.batch.message_count": len(batch),
        }
        return tracer.start_as_current_span(
            f"process {first.topic}",
            context=Context(),
            kind=trace.SpanKind.CONSUMER,
            attributes=attributes,
            links=links,
        )

    def _attributes(self, message: Message) -> dict[str, Any]:
        return {
            "messaging.system": self.system,
            "messaging.operation.type": "process",
            "messaging.destination.name": message.topic,
            "messaging.destination.partition.id": str(message.partition),
            "messaging.kafka.offset": message.offset,
            "messaging.consumer.group.name": self.group,
        }


def _parent(message: Message) -> Context | None:
    """The trace context in ``message``'s headers; ``None`` (a new trace) without headers,
    which spares the propagators' work for most messages of untraced producers."""
    if not message.headers:
        return None
    return propagate.extract(message.headers, getter=_GETTER)


class Tracing:
    """Tracing for one consumer run: the attempt hook and the dead-letter context."""

    def __init__(self, system: str, group: str) -> None:
        self.hook = TracingHook(system, group)
        self._tracer = trace.get_tracer("laneway")

    def dead_letter_headers(
        self, message: Message, topic: str, headers: Iterable[Header]
    ) -> list[Header]:
        """``headers`` for the dead letter of ``message``, with the trace context of a
        PRODUCER span ``send <topic>`` that continues the message's trace."""
        carrier = list(headers)
        parent = propagate.extract(message.headers, getter=_GETTER)
        with self._tracer.start_as_current_span(
            f"send {topic}",
            context=parent,
            kind=trace.SpanKind.PRODUCER,
            attributes={
                "messaging.system": self.hook.system,
                "messaging.operation.type": "send",
                "messaging.destination.name": topic,
            },
        ):
            propagate.inject(carrier, setter=_SETTER)
        return carrier


def sdk_configured() -> bool:
    """Whether an SDK tracer provider is set (the API alone only has its proxy)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))
