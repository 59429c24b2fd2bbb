"""laneway: parallel, ordered processing of messages from partitioned logs.

Public API, every documented name importable from here: the sources (:class:`EmbeddedLog`,
:class:`KafkaSource`, :class:`KafkaShareSource`), :class:`Consumer` and what it reports
(:class:`ConsumerStats`, :class:`Health`, :class:`Backlog`), messages and handlers
(:class:`Message`, :data:`SyncHandler`, :data:`AsyncHandler`), what handlers may return
(:class:`Produce`, :class:`Outcomes`), the option enumerations (:class:`EngineKind`,
:class:`Ordering`, ...), the metrics protocol (:class:`Metrics`) and the errors
(:class:`LanewayError` and its subclasses). :mod:`laneway.kafka` (conveniences for
scripts), :mod:`laneway.testing` (the pytest plugin) and :mod:`laneway.observability`
(metric backends) are public modules.

Names are imported on first use, so a process-engine worker that only needs
:mod:`laneway.types` does not load confluent-kafka or the control plane.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from laneway import compiled as _compiled

# Before anything imports a compiled module: LANEWAY_PURE_PYTHON=1 runs their source.
_compiled.honour_pure_python()

if TYPE_CHECKING:
    from laneway.config import ConsumerConfig
    from laneway.consumer import Consumer
    from laneway.control.backlog import Backlog
    from laneway.errors import (
        AccessDeniedError,
        ConfigError,
        HandlerImportError,
        LanewayError,
        LogFullError,
        SourceError,
        TransactionError,
        UnknownTopicError,
    )
    from laneway.fairness import Fairness, Overloaded
    from laneway.health import Health
    from laneway.metrics import Metrics
    from laneway.options import (
        ConcurrencyLimit,
        EngineKind,
        EventLoop,
        NullKeys,
        Ordering,
        StallAction,
        TracingMode,
        WhenFull,
    )
    from laneway.results import Outcome, Outcomes, Produce
    from laneway.sources.embedded.log import EmbeddedLog, EmbeddedLogStats
    from laneway.sources.kafka.source import KafkaSource
    from laneway.sources.share.settings import StartAt
    from laneway.sources.share.source import KafkaShareSource
    from laneway.state.files.base import StateBackend
    from laneway.state.handler import States
    from laneway.state.state import State
    from laneway.state.store import StateStore
    from laneway.stats import ConsumerStats
    from laneway.types import (
        AsyncHandler,
        Failure,
        Handler,
        HotKey,
        Message,
        NotDurable,
        Restore,
        Stall,
        SyncHandler,
        Waiting,
    )

__version__ = "0.1.0"

_EXPORTS = {
    "AccessDeniedError": "laneway.errors",
    "AsyncHandler": "laneway.types",
    "Backlog": "laneway.control.backlog",
    "ConcurrencyLimit": "laneway.options",
    "ConfigError": "laneway.errors",
    "Consumer": "laneway.consumer",
    "ConsumerConfig": "laneway.config",
    "ConsumerStats": "laneway.stats",
    "EmbeddedLog": "laneway.sources.embedded.log",
    "EmbeddedLogStats": "laneway.sources.embedded.log",
    "EngineKind": "laneway.options",
    "EventLoop": "laneway.options",
    "Failure": "laneway.types",
    "Fairness": "laneway.fairness",
    "Handler": "laneway.types",
    "HandlerImportError": "laneway.errors",
    "Health": "laneway.health",
    "HotKey": "laneway.types",
    "KafkaShareSource": "laneway.sources.share.source",
    "KafkaSource": "laneway.sources.kafka.source",
    "LanewayError": "laneway.errors",
    "LogFullError": "laneway.errors",
    "Message": "laneway.types",
    "Metrics": "laneway.metrics",
    "NotDurable": "laneway.types",
    "NullKeys": "laneway.options",
    "Ordering": "laneway.options",
    "Outcome": "laneway.results",
    "Outcomes": "laneway.results",
    "Overloaded": "laneway.fairness",
    "Produce": "laneway.results",
    "Restore": "laneway.types",
    "SourceError": "laneway.errors",
    "Stall": "laneway.types",
    "State": "laneway.state.state",
    "StateBackend": "laneway.state.files.base",
    "StateStore": "laneway.state.store",
    "States": "laneway.state.handler",
    "StallAction": "laneway.options",
    "StartAt": "laneway.sources.share.settings",
    "SyncHandler": "laneway.types",
    "TracingMode": "laneway.options",
    "TransactionError": "laneway.errors",
    "UnknownTopicError": "laneway.errors",
    "Waiting": "laneway.types",
    "WhenFull": "laneway.options",
}

__all__ = [
    "AccessDeniedError",
    "AsyncHandler",
    "Backlog",
    "ConcurrencyLimit",
    "ConfigError",
    "Consumer",
    "ConsumerConfig",
    "ConsumerStats",
    "EmbeddedLog",
    "EmbeddedLogStats",
    "EngineKind",
    "EventLoop",
    "Failure",
    "Fairness",
    "Handler",
    "HandlerImportError",
    "Health",
    "HotKey",
    "KafkaShareSource",
    "KafkaSource",
    "LanewayError",
    "LogFullError",
    "Message",
    "Metrics",
    "NotDurable",
    "NullKeys",
    "Ordering",
    "Outcome",
    "Outcomes",
    "Overloaded",
    "Produce",
    "Restore",
    "SourceError",
    "Stall",
    "StallAction",
    "StartAt",
    "State",
    "StateBackend",
    "StateStore",
    "States",
    "SyncHandler",
    "TracingMode",
    "TransactionError",
    "UnknownTopicError",
    "Waiting",
    "WhenFull",
    "__version__",
]


def __dir__() -> list[str]:
    """The public names, so ``dir(laneway)`` and REPL completion show them (they are
    imported on first use, so they are not in the module's namespace until then)."""
    return sorted(__all__)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'laneway' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
