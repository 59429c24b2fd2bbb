"""Every consumer option, written once: :class:`ConsumerConfig` and what derives from it."""

from laneway.config.consumer_config import (
    ConsumerConfig,
    ConsumerOptions,
    OptionsBesidesDecoding,
    OptionsBesidesEngine,
    env_variable,
    option_defaults,
    option_specs,
    options_table,
    unknown_option,
)
from laneway.config.failures import FailureCallback
from laneway.config.running import DEFAULT_CONCURRENCY

__all__ = [
    "DEFAULT_CONCURRENCY",
    "ConsumerConfig",
    "ConsumerOptions",
    "FailureCallback",
    "OptionsBesidesDecoding",
    "OptionsBesidesEngine",
    "env_variable",
    "option_defaults",
    "option_specs",
    "options_table",
    "unknown_option",
]
