"""What a source can do, declared once and checked once, when a ``Consumer`` is made.

A source states its :class:`~laneway.sources.base.SourceCapabilities` (its
``capabilities`` property); the
consumer never asks which class a source is, nor probes it for methods later. Every
source has the members of :class:`~laneway.sources.base.Source`; a source declaring
``transactions`` also has ``transaction()``
(:class:`~laneway.sources.base.TransactionalSource`), one declaring ``prefetches``
also has ``bound_prefetch()`` (:class:`~laneway.sources.base.PrefetchingSource`) and one
declaring ``waits`` also has ``waiting_for()`` (:class:`~laneway.sources.base.WaitingSource`)
and one declaring ``rewinds`` has ``rewind()`` (:class:`~laneway.sources.base.RewindingSource`).
:func:`check_source` verifies all of it and refuses options the source cannot honour (an
ordering it cannot keep, ``exactly_once`` without transactions); :func:`engine_config`
adapts the options engines run with (a source that retries by redelivery gets one attempt
per delivery).
"""

from __future__ import annotations

import dataclasses

from laneway.config import ConsumerConfig
from laneway.errors import ConfigError
from laneway.options import Ordering
from laneway.sources.base import (
    PrefetchingSource,
    RewindingSource,
    Source,
    SourceCapabilities,
    TransactionalSource,
    WaitingSource,
)

PARTITIONED_LOG = SourceCapabilities()
"""A plain partitioned log: every ordering, pausable, retries in place, nothing more."""

_REQUIRED = tuple(name for name in vars(Source) if not name.startswith("_"))
_DECLARED = {
    "transactions": tuple(n for n in vars(TransactionalSource) if not n.startswith("_")),
    "prefetches": tuple(n for n in vars(PrefetchingSource) if not n.startswith("_")),
    "waits": tuple(n for n in vars(WaitingSource) if not n.startswith("_")),
    "rewinds": tuple(n for n in vars(RewindingSource) if not n.startswith("_")),
}


def check_source(source: object, config: ConsumerConfig) -> SourceCapabilities:
    """Raise ConfigError unless ``source`` is a source that can run with ``config``;
    return its capabilities."""
    for member in _REQUIRED:
        if not hasattr(type(source), member):
            raise ConfigError(
                f"source={source!r} is not valid; expected an EmbeddedLog.subscribe(...) "
                f"source, a KafkaSource or a KafkaShareSource (missing {member})"
            )
    capabilities = source.capabilities  # type: ignore[attr-defined]
    if not isinstance(capabilities, SourceCapabilities):
        raise ConfigError(
            f"source={source!r} is not valid: its capabilities are {capabilities!r}, "
            "not a SourceCapabilities"
        )
    for ability, members in _DECLARED.items():
        missing = [m for m in members if not hasattr(type(source), m)]
        if getattr(capabilities, ability) and missing:
            raise ConfigError(
                f"source={source!r} is not valid: it declares {ability} but has no "
                f"{', '.join(missing)}()"
            )
    ordering = config.ordering
    if ordering not in capabilities.orderings:
        allowed = ", ".join(repr(o.value) for o in Ordering if o in capabilities.orderings)
        raise ConfigError(
            f"ordering={ordering.value!r} is not valid with this source: "
            f"{capabilities.why_unordered}; use ordering={allowed}"
        )
    if config.exactly_once and not capabilities.transactions:
        raise ConfigError(
            f"exactly_once=True is not valid with source={source!r}: it cannot write results "
            "and commit offsets in one transaction (KafkaSource and EmbeddedLog.subscribe() "
            "sources can)"
        )
    return capabilities


def engine_config(config: ConsumerConfig, capabilities: SourceCapabilities) -> ConsumerConfig:
    """The options engines run with: for a source that retries by redelivery, one attempt
    per delivery (its Progress applies ``max_retries`` and the backoff across deliveries)."""
    if capabilities.redelivers and config.max_retries:
        return dataclasses.replace(config, max_retries=0)
    return config
