"""ConsumerConfig: every consumer option, written once, with its default, checks and help.

Each option is one field of an option group (:mod:`~laneway.config.running`,
:mod:`~laneway.config.flow`, :mod:`~laneway.config.failures`,
:mod:`~laneway.config.limits`, :mod:`~laneway.config.fairness`,
:mod:`~laneway.config.observing`) whose metadata holds an
:class:`~laneway.options.OptionSpec`; :class:`ConsumerConfig` is all groups at once.
Everything else is derived from these fields: the validation of ``Consumer(...)``
keywords (:meth:`ConsumerConfig.from_options`), the options table in this class's
docstring, the ``laneway run`` flags and ``LANEWAY_*`` environment variables
(:func:`option_specs`). :class:`ConsumerOptions` types the keywords for type checkers; a
test keeps its keys equal to the fields.

Adding an option: a field (with :func:`~laneway.options.option`) and a keyword in the
group it belongs to; checks between options of one group go in its ``_check_*`` method,
checks across groups in :meth:`ConsumerConfig.__post_init__`.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import pickle
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field

from laneway.config.failures import FailureKeywords, FailureOptions
from laneway.config.fairness import PER_KEY_SHARE, FairnessKeywords, FairnessOptions
from laneway.config.flow import FlowKeywords, FlowOptions
from laneway.config.limits import LimitKeywords, LimitOptions
from laneway.config.messages import DecodingKeywords, MessageOptions, SerializingKeywords
from laneway.config.observing import ObservingKeywords, ObservingOptions
from laneway.config.running import EngineKeyword, RunningKeywords, RunningOptions
from laneway.errors import ConfigError
from laneway.options import (
    ENV_PREFIX,
    ConcurrencyLimit,
    EngineKind,
    NullKeys,
    OptionSpec,
    Ordering,
)
from laneway.retry import RetryPolicy


# A dataclass takes the fields of its bases in reverse order of the bases, so the groups
# are listed last-to-first: running options come first in every derived list.
@dataclass(frozen=True)
class ConsumerConfig(
    MessageOptions,
    ObservingOptions,
    FairnessOptions,
    LimitOptions,
    FailureOptions,
    FlowOptions,
    RunningOptions,
):
    """The validated, immutable options of a :class:`laneway.Consumer`.

    Build it with :meth:`from_options` (what ``Consumer(...)`` does) or directly with
    keywords; either way every value is checked in ``__post_init__``, so no config exists
    that skipped validation. Bad values raise :class:`~laneway.errors.ConfigError` naming
    the option and what is allowed.
    """

    retry: RetryPolicy = field(init=False, repr=False, compare=False)
    """The retry options as one policy (derived)."""

    def __post_init__(self) -> None:
        for each in dataclasses.fields(self):
            spec = each.metadata.get("option")
            if spec is not None:
                object.__setattr__(self, each.name, spec.check(getattr(self, each.name), each.name))
        concurrency_given = self.concurrency is not None
        self._check_running()
        self._check_concurrency_fits(concurrency_given)
        self._check_fairness()
        if self.batch_size is not None and self.batch_size > self.max_buffered:
            raise ConfigError(
                f"batch_size={self.batch_size} is not valid with max_buffered="
                f"{self.max_buffered}: a batch could never fill; raise max_buffered to at least "
                "batch_size (a few batches' worth keeps every worker busy)"
            )
        engine = self.engine
        if self.handler_timeout is not None and engine in (EngineKind.SYNC, EngineKind.THREAD):
            raise ConfigError(
                f"handler_timeout={self.handler_timeout!r} is not valid with "
                f"engine={engine.value!r}: a thread cannot be interrupted; use engine='async' "
                "(the attempt is cancelled) or engine='process' (the worker is replaced)"
            )
        if self.concurrency_limit is ConcurrencyLimit.ADAPTIVE and engine in (
            EngineKind.SYNC,
            EngineKind.PROCESS,
        ):
            raise ConfigError(
                f"concurrency_limit='adaptive' is not valid with engine={engine.value!r}: "
                "the sync engine runs one handler at a time and process workers one each; "
                "use engine='thread' or 'async' (max_rate works with every engine)"
            )
        limited = self.max_rate is not None or self.concurrency_limit is ConcurrencyLimit.ADAPTIVE
        if limited and self.batch_size is not None:
            raise ConfigError(
                f"batch_size={self.batch_size} is not valid with max_rate or "
                "concurrency_limit='adaptive': limits gate single messages, and a batch "
                "handler's calls are not gated; use one or the other"
            )
        if engine is EngineKind.PROCESS:
            self._check_picklable()
        self._check_state()
        retry = RetryPolicy(
            self.max_retries,
            self.retry_backoff,
            self.retry_backoff_max,
            self.handler_timeout,
            self.poison_threshold,
            self.poison_cooldown,
        )
        object.__setattr__(self, "retry", retry)

    def _check_fairness(self) -> None:
        """``max_buffered_per_key`` defaults to a share of ``max_buffered`` and may not
        exceed it; fairness and priority choose what starts next, which the sync engine
        (fetch order, one at a time) cannot."""
        per_key = self.max_buffered_per_key
        if per_key is None:
            object.__setattr__(
                self, "max_buffered_per_key", max(1, self.max_buffered // PER_KEY_SHARE)
            )
        elif per_key > self.max_buffered:
            raise ConfigError(
                f"max_buffered_per_key={per_key} is not valid with max_buffered="
                f"{self.max_buffered}: one key cannot hold more than the whole buffer; lower "
                "it (the default is max_buffered / 16)"
            )
        for name in ("fairness", "priority"):
            if getattr(self, name) is not None and self.engine is EngineKind.SYNC:
                raise ConfigError(
                    f"{name} is not valid with engine='sync': it runs messages one at a time "
                    "in fetch order, so there is nothing to choose between; use engine="
                    "'thread', 'async' or 'process'"
                )

    def _check_state(self) -> None:
        """A state store needs an order that runs a key's messages one at a time."""
        if self.state is None:
            return
        if self.ordering is Ordering.UNORDERED:
            raise ConfigError(
                "state= is not valid with ordering='unordered': two messages of a key could "
                "change its state at once; use ordering='key' (or 'partition')"
            )
        if self.ordering is Ordering.KEY and self.null_keys is NullKeys.UNORDERED:
            raise ConfigError(
                "state= is not valid with null_keys='unordered': keyless messages share "
                "their partition's keyless state, so they must run in order; use "
                "null_keys='partition'"
            )

    def _check_picklable(self) -> None:
        """Process workers decode with their own copy of each deserializer: it must pickle
        (a codec of :mod:`laneway.serde` does; a lambda does not)."""
        for name in ("value_deserializer", "key_deserializer"):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                pickle.dumps(value, protocol=5)
            except Exception as error:
                raise ConfigError(
                    f"{name}={value!r:.60} is not valid with engine='process': its workers "
                    f"decode with a copy, and it cannot be pickled ({error}); use a "
                    "laneway.serde codec or a module-level function"
                ) from None

    def _check_concurrency_fits(self, given: bool) -> None:
        """No more handlers can run than messages are buffered: a ``concurrency`` above
        ``max_buffered`` could never be used, so asking for one is an error; an engine's
        default concurrency is lowered to ``max_buffered`` instead."""
        if self.concurrency <= self.max_buffered:
            return
        if not given:
            object.__setattr__(self, "concurrency", self.max_buffered)
            return
        raise ConfigError(
            f"concurrency={self.concurrency} is not valid with max_buffered="
            f"{self.max_buffered}: at most max_buffered messages are fetched and unfinished "
            f"at once, so no more than {self.max_buffered} handlers could ever run; lower "
            "concurrency or raise max_buffered (a few times concurrency keeps every "
            "handler busy)"
        )

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> ConsumerConfig:
        """A config from ``Consumer(...)`` keywords; an unknown name is a ConfigError that
        suggests the closest option."""
        known = option_specs()
        for name in options:
            if name not in known:
                raise ConfigError(unknown_option(name, known))
        config: ConsumerConfig = cls(**options)  # type: ignore[arg-type]
        return config


class OptionsBesidesDecoding(
    RunningKeywords,
    FlowKeywords,
    FailureKeywords,
    LimitKeywords,
    FairnessKeywords,
    ObservingKeywords,
    SerializingKeywords,
):
    """The keywords of ``Consumer(...)`` but ``engine`` and the deserializers, typed: each
    overload of ``Consumer.__init__`` names those itself, with the handler type they
    allow."""


class OptionsBesidesEngine(
    RunningKeywords,
    FlowKeywords,
    FailureKeywords,
    LimitKeywords,
    FairnessKeywords,
    ObservingKeywords,
    DecodingKeywords,
    SerializingKeywords,
):
    """The keywords of ``Consumer(...)`` but ``engine``, typed (the deserializers loosely:
    an engine chosen at run time takes any handler)."""


class ConsumerOptions(EngineKeyword, OptionsBesidesEngine):
    """The keywords of ``Consumer(...)``, typed (see :class:`ConsumerConfig` for each)."""


def option_specs() -> dict[str, OptionSpec]:
    """Every consumer option's spec by name, in documentation order."""
    return {
        each.name: each.metadata["option"]
        for each in dataclasses.fields(ConsumerConfig)
        if "option" in each.metadata
    }


def option_defaults() -> dict[str, object]:
    """Every consumer option's default value by name (``None`` where it depends on others)."""
    return {
        each.name: each.default
        for each in dataclasses.fields(ConsumerConfig)
        if "option" in each.metadata
    }


def env_variable(name: str) -> str:
    """The environment variable that sets option ``name`` (``LANEWAY_CONCURRENCY``)."""
    return ENV_PREFIX + name.upper()


def unknown_option(name: str, known: Mapping[str, object]) -> str:
    """The error text for an unknown option name, with the closest valid one."""
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; options: {', '.join(known)}"
    return f"unknown option {name!r}{hint}"


def options_table() -> str:
    """Every option as a reStructuredText definition list: name, default, meaning, tuning."""
    defaults = option_defaults()
    entries = []
    for name, spec in option_specs().items():
        shown = default_text(spec, defaults[name])
        text = spec.help[0].upper() + spec.help[1:] + "."
        if spec.tuning:
            text += f" Tuning: {spec.tuning}."
        wrapped = textwrap.fill(text, 84, initial_indent="    ", subsequent_indent="    ")
        entries.append(f"``{name}`` (default {shown})\n{wrapped}")
    return "\n".join(entries)


def default_text(spec: OptionSpec, value: object) -> str:
    """How option ``spec``'s default ``value`` reads in documentation."""
    if spec.shown_default:
        return spec.shown_default
    if isinstance(value, enum.Enum):
        return repr(value.value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 10_000:
        return f"{value:,}"
    return repr(value)


ConsumerConfig.__doc__ = "{}\n    Options:\n\n{}\n".format(
    ConsumerConfig.__doc__, "\n".join("    " + line for line in options_table().splitlines())
)
