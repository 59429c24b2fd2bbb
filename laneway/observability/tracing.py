"""OpenTelemetry tracing of handler attempts and dead letters (``laneway[otel]``).

Only ``opentelemetry-api`` is used: the application brings the SDK and its exporter
(``opentelemetry-instrument`` with the standard ``OTEL_*`` settings, or its own
``set_tracer_provider`` call). Each handler attempt becomes a CONSUMER span named
``process <topic>``, child of the W3C ``traceparent``/``tracestate`` found in the message
headers, with the messaging attributes; a failing attempt records the exception and an
error status; retries are spans of their own. A batch handler's call (``batch_size``) is
one span ``process <topic>`` in a new trace, with ``messaging.batch.message_count`` and a
link to each message's trace context (the messaging conventions' batch shape): the one it
carries, or for an untraced message its derived context (below), the trace its dead letter
joins. A dead-letter record gets the context of a
PRODUCER span ``send <topic>`` in the same trace. Process-engine workers trace in their
own process (the hook is pickled to them), so the SDK must be configured there too
(``opentelemetry-instrument`` does that for spawned workers; so does configuring it when
the handler's module is imported).

A message without a trace context (no ``traceparent`` header: an untraced producer) gets
one derived from its consumer group, topic, partition and offset (:func:`derived_context`):
every attempt of it, in whichever process, its dead letter and its results are then one
trace, and a replay after a crash joins that trace too. The derived parent is a remote span
context no span is exported for (trace views show the attempts under a missing root); it is
sampled as the SDK's root sampler decides for its trace id, so a ratio sampler keeps its
ratio.

Cost: when no SDK is configured (the API's proxy provider), :func:`start_tracing`
returns ``None`` once, at the start, and nothing is wrapped: the per-message cost is nil.
"""

from __future__ import annotations

import hashlib
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
    CONSUMER span. Picklable (it holds only text), so process workers get it too; with
    ``export``, a worker configures the OTLP export from the ``OTEL_*`` variables it
    inherits, as ``laneway run`` did in its parent (:mod:`laneway.observability.otlp`)."""

    def __init__(self, system: str, group: str, export: bool = False) -> None:
        self.system = system
        self.group = group
        self.export = export

    def wrap(self, handler: SyncHandler) -> SyncHandler:
        self._export()
        tracer = trace.get_tracer("laneway")
        attributes = self._attributes
        contexts = TraceContexts(self.group)

        def traced(message: Message | list[Message]) -> object:
            if isinstance(message, list):
                with self._batch_span(tracer, message, contexts):
                    return handler(message)
            parent = contexts.of(message)
            with tracer.start_as_current_span(
                f"process {message.topic}",
                context=parent,
                kind=trace.SpanKind.CONSUMER,
                attributes=attributes(message),
            ):
                return handler(message)

        return traced

    def wrap_async(self, handler: AsyncHandler) -> AsyncHandler:
        self._export()
        tracer = trace.get_tracer("laneway")
        attributes = self._attributes
        contexts = TraceContexts(self.group)

        async def traced(message: Message | list[Message]) -> object:
            if isinstance(message, list):
                with self._batch_span(tracer, message, contexts):
                    return await handler(message)
            parent = contexts.of(message)
            with tracer.start_as_current_span(
                f"process {message.topic}",
                context=parent,
                kind=trace.SpanKind.CONSUMER,
                attributes=attributes(message),
            ):
                return await handler(message)

        return traced

    def _export(self) -> None:
        if self.export:
            from laneway.observability.otlp import export_from_environment

            export_from_environment()

    def _batch_span(
        self, tracer: trace.Tracer, batch: list[Message], contexts: TraceContexts
    ) -> AbstractContextManager[trace.Span]:
        links = []
        for message in batch:
            context = trace.get_current_span(contexts.of(message)).get_span_context()
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
    """The trace context in ``message``'s headers; ``None`` without headers, which spares
    the propagators' work for most messages of untraced producers."""
    if not message.headers:
        return None
    return propagate.extract(message.headers, getter=_GETTER)


def derived_context(message: Message, group: str, sampled: bool = True) -> Context:
    """A remote parent context for ``message`` made from its position alone: the trace and
    span ids are the first 24 bytes of a BLAKE2b hash of ``group``, topic, partition and
    offset, so every process that handles or dead-letters the record derives the same
    trace. ``sampled``: the flag the context carries (children of a remote parent follow
    it under the SDK's default ``ParentBased`` sampler)."""
    key = f"{group}\0{message.topic}\0{message.partition}\0{message.offset}".encode()
    digest = hashlib.blake2b(key, digest_size=24).digest()
    span_context = trace.SpanContext(
        trace_id=int.from_bytes(digest[:16], "big") or 1,
        span_id=int.from_bytes(digest[16:], "big") or 1,
        is_remote=True,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED if sampled else 0),
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(span_context))


class TraceContexts:
    """The parent context of each message's spans for one consumer group: the one in its
    headers, else :func:`derived_context`, sampled as the tracer provider's root sampler
    decides for the derived trace id (asked once per message; the API alone has no
    sampler, and then every derived context is sampled).

    Cost, for a message without a context: a hash and a context object, a few
    microseconds, next to the tens a span costs; a sampler other than the SDK's default is
    asked too (a few more)."""

    def __init__(self, group: str) -> None:
        self._group = group
        sampler = getattr(trace.get_tracer_provider(), "sampler", None)
        if not callable(getattr(sampler, "should_sample", None)) or _samples_every_root(sampler):
            sampler = None  # every derived context is sampled: no need to ask (~3 us a call)
        self._sampler = sampler

    def of(self, message: Message) -> Context:
        found = _parent(message)
        if found is not None and trace.get_current_span(found).get_span_context().is_valid:
            return found
        context = derived_context(message, self._group)
        if self._sampler is None:
            return context
        trace_id = trace.get_current_span(context).get_span_context().trace_id
        try:
            decision = self._sampler.should_sample(None, trace_id, f"process {message.topic}")
            sampled = bool(decision.decision.is_sampled())
        except Exception:  # a sampler of another shape: keep the default, sampled
            return context
        return context if sampled else derived_context(message, self._group, sampled=False)


class Tracing:
    """Tracing for one consumer run: the attempt hook and the dead-letter context."""

    def __init__(self, system: str, group: str, export: bool = False) -> None:
        self.hook = TracingHook(system, group, export)
        self._tracer = trace.get_tracer("laneway")
        self._contexts = TraceContexts(group)

    def dead_letter_headers(
        self, message: Message, topic: str, headers: Iterable[Header]
    ) -> list[Header]:
        """``headers`` for the dead letter (or a result) of ``message``, with the trace
        context of a PRODUCER span ``send <topic>`` that continues the message's trace:
        the one its attempts ran in, derived from its position when it carried none."""
        carrier = list(headers)
        parent = self._contexts.of(message)
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


def _samples_every_root(sampler: object) -> bool:
    """Whether ``sampler`` (the SDK's, by its public description) samples every trace
    without a parent: ``AlwaysOnSampler``, alone or as the root of ``ParentBased`` (the
    SDK's default)."""
    describe = getattr(sampler, "get_description", None)
    description = describe() if callable(describe) else ""
    return description == "AlwaysOnSampler" or str(description).startswith(
        "ParentBased{root:AlwaysOnSampler,"
    )
