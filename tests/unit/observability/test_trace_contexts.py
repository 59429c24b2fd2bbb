"""The parent context of a message's spans: its own ``traceparent``, else one derived from
its position, the same in every process, sampled as the SDK's root sampler decides."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased, Sampler, TraceIdRatioBased

from laneway.observability.tracing import TraceContexts, derived_context
from laneway.types import Message

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def span_context(context: object) -> trace.SpanContext:
    return trace.get_current_span(context).get_span_context()  # type: ignore[arg-type]


@pytest.fixture
def use_sampler(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    def install(sampler: Sampler | None) -> TracerProvider:
        provider = TracerProvider() if sampler is None else TracerProvider(sampler=sampler)
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
        return provider

    yield install


def test_a_derived_context_is_the_same_wherever_it_is_made_and_unique_per_record() -> None:
    message = Message("orders", 3, 17, b"k", b"v")
    first, again = (
        span_context(derived_context(message, "billing")),
        span_context(derived_context(message._replace(value=b"other", headers=()), "billing")),
    )
    assert first.is_valid and first.is_remote and first.trace_flags.sampled
    assert (first.trace_id, first.span_id) == (again.trace_id, again.span_id)
    others = [
        derived_context(message._replace(offset=18), "billing"),
        derived_context(message._replace(partition=4), "billing"),
        derived_context(message._replace(topic="refunds"), "billing"),
        derived_context(message, "audit"),
    ]
    assert len({span_context(c).trace_id for c in others} | {first.trace_id}) == 5


def test_a_message_s_own_traceparent_wins(use_sampler: object) -> None:
    use_sampler(None)  # type: ignore[operator]
    message = Message("orders", 0, 1, b"k", b"v", headers=(("traceparent", TRACEPARENT.encode()),))
    found = span_context(TraceContexts("billing").of(message))
    assert format(found.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    untraced = span_context(TraceContexts("billing").of(message._replace(headers=(("a", b"b"),))))
    assert untraced.trace_id == span_context(derived_context(message, "billing")).trace_id


def test_the_default_sampler_is_not_asked_and_every_derived_context_is_sampled(
    use_sampler: object,
) -> None:
    use_sampler(None)  # type: ignore[operator]
    contexts = TraceContexts("billing")
    assert contexts._sampler is None
    flags = [
        span_context(contexts.of(Message("o", 0, n, None, b""))).trace_flags for n in range(50)
    ]
    assert all(flag.sampled for flag in flags)


def test_a_ratio_sampler_keeps_its_ratio_for_untraced_messages(use_sampler: object) -> None:
    provider = use_sampler(ParentBased(TraceIdRatioBased(0.25)))  # type: ignore[operator]
    contexts = TraceContexts("billing")
    tracer = provider.get_tracer("test")
    recorded = 0
    for offset in range(400):
        message = Message("orders", 0, offset, None, b"")
        context = contexts.of(message)
        decided = TraceIdRatioBased(0.25).should_sample(None, span_context(context).trace_id, "x")
        assert span_context(context).trace_flags.sampled == decided.decision.is_sampled()
        with tracer.start_as_current_span("process orders", context=context) as span:
            recorded += span.is_recording()
    assert 60 <= recorded <= 140, f"{recorded} of 400 traced at a ratio of 0.25"


def test_a_sampler_that_drops_every_root_drops_untraced_messages(use_sampler: object) -> None:
    provider = use_sampler(ParentBased(ALWAYS_OFF))  # type: ignore[operator]
    context = TraceContexts("billing").of(Message("orders", 0, 1, None, b""))
    assert not span_context(context).trace_flags.sampled
    with provider.get_tracer("test").start_as_current_span("x", context=context) as span:
        assert not span.is_recording()
