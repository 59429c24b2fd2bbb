"""laneway: parallel, ordered processing of messages from partitioned logs.

Public API: :class:`EmbeddedLog`, :class:`KafkaSource`, :class:`KafkaShareSource`,
:class:`Consumer`, :class:`Message`, :class:`ConsumerStats`, what handlers may return
(:class:`Produce`, :class:`Outcomes`), and the errors in :mod:`laneway.errors`.

Names are imported on first use, so a process-engine worker that only needs
:mod:`laneway.types` does not load confluent-kafka or the control plane.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from laneway.consumer import Consumer
    from laneway.errors import (
        ConfigError,
        HandlerImportError,
        LanewayError,
        LogFullError,
        SourceError,
        TransactionError,
        UnknownTopicError,
    )
    from laneway.results import Outcomes, Produce
    from laneway.sources.embedded import EmbeddedLog
    from laneway.sources.kafka import KafkaSource
    from laneway.sources.kafka_share import KafkaShareSource
    from laneway.stats import ConsumerStats
    from laneway.types import Failure, Message

__version__ = "0.1.0"

_EXPORTS = {
    "ConfigError": "laneway.errors",
    "Consumer": "laneway.consumer",
    "ConsumerStats": "laneway.stats",
    "EmbeddedLog": "laneway.sources.embedded",
    "Failure": "laneway.types",
    "HandlerImportError": "laneway.errors",
    "KafkaShareSource": "laneway.sources.kafka_share",
    "KafkaSource": "laneway.sources.kafka",
    "LanewayError": "laneway.errors",
    "LogFullError": "laneway.errors",
    "Message": "laneway.types",
    "Outcomes": "laneway.results",
    "Produce": "laneway.results",
    "SourceError": "laneway.errors",
    "TransactionError": "laneway.errors",
    "UnknownTopicError": "laneway.errors",
}

__all__ = [
    "ConfigError",
    "Consumer",
    "ConsumerStats",
    "EmbeddedLog",
    "Failure",
    "HandlerImportError",
    "KafkaShareSource",
    "KafkaSource",
    "LanewayError",
    "LogFullError",
    "Message",
    "Outcomes",
    "Produce",
    "SourceError",
    "TransactionError",
    "UnknownTopicError",
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
