"""What a source can do: the checks and choices of a consumer that depend on its source.

A source states its :class:`SourceCapabilities`; the consumer never asks which class a
source is. :func:`check_source` refuses, at construction, options the source cannot honour
(an ordering it cannot keep), and :func:`engine_config` adapts the options engines run with
(a source that retries by redelivery gets one attempt per delivery).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from laneway.config import ConsumerConfig
from laneway.errors import ConfigError
from laneway.options import Ordering

SOURCE_METHODS = ("open", "poll", "progress", "pause", "resume", "close", "capabilities")
"""What ``Consumer`` needs a source to have (see :class:`laneway.sources.base.Source`)."""


@dataclass(frozen=True)
class SourceCapabilities:
    """What a source can do.

    ``orderings``: the ordering modes it can keep; another is a ConfigError that gives
    ``why_unordered`` as the reason. ``pauses``: ``pause()`` stops fetching a partition
    while the group session lives on (else backpressure simply stops polling, and the
    source must stay a member without it). ``redelivers``: a failed message is retried by
    the log delivering it again (counted in :attr:`~laneway.types.Message.delivery_count`)
    rather than by the engine in place; its Progress decides each retry.
    ``events_in_poll``: group events (rebalance callbacks) are served inside ``poll()``,
    so the control loop polls for them even when it wants no more messages.
    """

    orderings: frozenset[Ordering] = frozenset(Ordering)
    why_unordered: str = ""
    pauses: bool = True
    redelivers: bool = False
    events_in_poll: bool = True


PARTITIONED_LOG = SourceCapabilities()
"""A consumer group or the embedded log: every ordering, pausable, retries in place."""


def check_source(source: object, config: ConsumerConfig) -> SourceCapabilities:
    """Raise ConfigError unless ``source`` is a source that can run with ``config``;
    return its capabilities."""
    for method in SOURCE_METHODS:
        if not hasattr(type(source), method):
            raise ConfigError(
                f"source={source!r} is not valid; expected an EmbeddedLog.subscribe(...) "
                f"source, a KafkaSource or a KafkaShareSource (missing {method})"
            )
    capabilities: SourceCapabilities = source.capabilities  # type: ignore[attr-defined]
    ordering = config.ordering
    if ordering not in capabilities.orderings:
        allowed = ", ".join(repr(o.value) for o in Ordering if o in capabilities.orderings)
        raise ConfigError(
            f"ordering={ordering.value!r} is not valid with this source: "
            f"{capabilities.why_unordered}; use ordering={allowed}"
        )
    return capabilities


def engine_config(config: ConsumerConfig, capabilities: SourceCapabilities) -> ConsumerConfig:
    """The options engines run with: for a source that retries by redelivery, one attempt
    per delivery (its Progress applies ``max_retries`` and the backoff across deliveries)."""
    if capabilities.redelivers and config.max_retries:
        return dataclasses.replace(config, max_retries=0)
    return config
