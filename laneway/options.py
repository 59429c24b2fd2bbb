"""Enumerations for every mode, the checks that turn bad option values into clear errors,
and :class:`OptionSpec`, which describes one option so that flags, environment variables,
TOML keys and documentation can all be derived from it."""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from laneway.errors import ConfigError

EngineName = Literal["sync", "thread", "async", "process"]
"""The values of :class:`EngineKind`, for type checkers (a test keeps the two equal)."""
OrderingName = Literal["key", "partition", "unordered"]
NullKeysName = Literal["partition", "unordered"]
"""The values of :class:`Ordering`, for type checkers (a test keeps the two equal)."""
EventLoopName = Literal["auto", "asyncio", "uvloop"]
"""The values of :class:`EventLoop`, for type checkers (a test keeps the two equal)."""
TracingModeName = Literal["auto", "off"]
"""The values of :class:`TracingMode`, for type checkers (a test keeps the two equal)."""
StallActionName = Literal["warn", "exit"]
"""The values of :class:`StallAction`, for type checkers (a test keeps the two equal)."""
ConcurrencyLimitName = Literal["fixed", "adaptive"]
"""The values of :class:`ConcurrencyLimit`, for type checkers (a test keeps the two equal)."""


class EngineKind(str, enum.Enum):
    """Where handlers run.

    ``sync``: one message at a time in the polling thread (the plain-consumer baseline).
    ``thread``: a pool of threads, for blocking I/O. ``async``: coroutines on an asyncio
    loop, for ``async def`` handlers. ``process``: a pool of worker processes, for
    CPU-bound handlers that must escape the GIL.
    """

    SYNC = "sync"
    THREAD = "thread"
    ASYNC = "async"
    PROCESS = "process"


class Ordering(str, enum.Enum):
    """Which messages must not overlap and must run in offset order.

    ``key``: messages with the same key in the same partition (a key is a lane).
    ``partition``: all messages of a partition. ``unordered``: no constraint.
    """

    KEY = "key"
    PARTITION = "partition"
    UNORDERED = "unordered"


class EventLoop(str, enum.Enum):
    """The event loop the async engine creates for itself when the consumer runs with ``run()``.

    ``auto`` (default): uvloop when it is installed (``pip install 'laneway[uvloop]'``),
    else asyncio's own. ``asyncio``: the standard library's selector loop. ``uvloop``:
    uvloop, a ConfigError at construction when it is not installed. Under ``run_async()``
    handlers run on the caller's loop, whichever it is. Why it matters: the standard loop
    rounds every timer up to a whole millisecond, so 100 coroutines each awaiting
    ``asyncio.sleep(0.005)`` in turn manage ~16.7k wake-ups a second on the 2-core
    reference machine, against ~18.9k on uvloop.
    """

    AUTO = "auto"
    ASYNCIO = "asyncio"
    UVLOOP = "uvloop"


class StallAction(str, enum.Enum):
    """What happens when a message has been in its handler longer than ``stall_timeout``.

    ``warn`` (default): a WARNING naming it, and ``stats().stalled`` / a 503 from
    ``/readyz`` while it lasts. ``exit``: also end the process with exit code
    :data:`STALL_EXIT_CODE`, without draining (a stuck thread cannot be drained), so an
    orchestrator restarts it; unfinished work is replayed, as after any crash.
    """

    WARN = "warn"
    EXIT = "exit"


class ConcurrencyLimit(str, enum.Enum):
    """How many handlers may run at once.

    ``fixed`` (default): ``concurrency``, always. ``adaptive``: a limit between 1 and
    ``concurrency`` that follows the handlers' latency and errors, so a downstream that
    slows down gets fewer calls at once instead of a queue of them (see
    :mod:`laneway.engines.admission.adaptive`); thread and async engines only.
    """

    FIXED = "fixed"
    ADAPTIVE = "adaptive"


class NullKeys(str, enum.Enum):
    """How messages without a key (``key=None``) are ordered under ``ordering="key"``.

    ``partition`` (default): they share one lane per partition, ordered like the partition
    itself, as Kafka's own consumer would run them. ``unordered``: each is a lane of its
    own, so keyless events (metrics, clicks, notifications) run in parallel, up to
    ``concurrency``; keyed messages keep their key order either way.
    """

    PARTITION = "partition"
    UNORDERED = "unordered"


STALL_EXIT_CODE = 4
"""The exit code of a process ended by ``on_stall="exit"``."""


class TracingMode(str, enum.Enum):
    """Whether handler attempts are traced with OpenTelemetry.

    ``auto`` (default): when ``opentelemetry-api`` is installed and an SDK tracer provider
    is configured at start (e.g. by ``opentelemetry-instrument``); otherwise nothing is
    wrapped and tracing costs nothing. ``off``: never.
    """

    AUTO = "auto"
    OFF = "off"


class WhenFull(str, enum.Enum):
    """What ``EmbeddedLog.produce`` does when a partition holds ``capacity`` unconsumed records.

    ``block`` (default): wait until a consumer group commits; nothing is lost.
    ``error``: raise :class:`laneway.errors.LogFullError`. ``drop_newest``: discard the
    record being produced. ``drop_oldest``: discard the oldest unconsumed record. Drops are
    counted in ``EmbeddedLog.stats()``.
    """

    BLOCK = "block"
    ERROR = "error"
    DROP_NEWEST = "drop_newest"
    DROP_OLDEST = "drop_oldest"


E = TypeVar("E", bound=enum.Enum)


def choice(enum_type: type[E], value: object, option: str) -> E:
    """Return the member of ``enum_type`` named by ``value`` or raise a ConfigError naming it."""
    if isinstance(value, enum_type):
        return value
    for member in enum_type:
        if value == member.value:
            return member
    allowed = ", ".join(repr(m.value) for m in enum_type)
    raise ConfigError(f"{option}={value!r} is not valid; allowed values: {allowed}")


def whole_number(value: object, option: str, minimum: int = 1, maximum: int | None = None) -> int:
    """Check that ``value`` is an int (not a bool) within ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{option}={value!r} is not valid; expected a whole number >= {minimum}")
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and <= {maximum}" if maximum is not None else ""
        raise ConfigError(f"{option}={value!r} is not valid; expected >= {minimum}{upper}")
    return value


def seconds(value: object, option: str, allow_zero: bool = False) -> float:
    """Check that ``value`` is a finite, positive (or zero, when allowed) number of seconds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{option}={value!r} is not valid; expected a number of seconds")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{option}={value!r} is not valid; expected seconds {bound}")
    return float(value)


def uvloop_installed() -> bool:
    """True when the optional ``uvloop`` package can be imported (``event_loop``'s check)."""
    return importlib.util.find_spec("uvloop") is not None


def names(enum_type: type[enum.Enum]) -> tuple[str, ...]:
    """The values of a str enum, in definition order (e.g. every engine name)."""
    return tuple(str(member.value) for member in enum_type)


ENV_PREFIX = "LANEWAY_"
"""Environment variables set options: ``LANEWAY_`` + the option name in upper case."""

_TRUE_TEXT = frozenset({"true", "yes", "on", "1"})
_FALSE_TEXT = frozenset({"false", "no", "off", "0"})
_NONE_TEXT = frozenset({"none", "null", ""})


@dataclass(frozen=True)
class OptionSpec:
    """One option: its ``help`` (one line), ``tuning`` advice, allowed ``choices`` (for enum
    options), how text becomes a value (``kind``), and whether it can be set from text at
    all (``from_text``: False for Python objects such as callbacks).

    ``check(value, name)`` returns the validated (normalised) value or raises a
    :class:`~laneway.errors.ConfigError` naming the option.
    """

    help: str
    check: Callable[[Any, str], Any]
    kind: Literal["int", "number", "seconds", "bool", "choice", "text", "object"]
    tuning: str = ""
    choices: tuple[str, ...] = ()
    nullable: bool = False
    shown_default: str | None = None
    """How the default reads in docs when its value alone would mislead (e.g. per engine)."""

    @property
    def from_text(self) -> bool:
        return self.kind != "object"

    def parse(self, text: str, name: str) -> object:
        """The value a flag, environment variable or TOML string ``text`` stands for
        (not yet checked: pass it to :attr:`check`)."""
        raw = text.strip()
        if self.nullable and raw.lower() in _NONE_TEXT:
            return None
        if self.kind == "int":
            try:
                return int(raw.replace("_", ""))
            except ValueError:
                raise ConfigError(
                    f"{name}={text!r} is not valid; expected a whole number"
                ) from None
        if self.kind in ("seconds", "number"):
            what = "a number of seconds" if self.kind == "seconds" else "a number"
            try:
                return float(raw.replace("_", ""))
            except ValueError:
                raise ConfigError(f"{name}={text!r} is not valid; expected {what}") from None
        if self.kind == "bool":
            if raw.lower() in _TRUE_TEXT:
                return True
            if raw.lower() in _FALSE_TEXT:
                return False
            raise ConfigError(f"{name}={text!r} is not valid; expected true or false")
        if self.kind == "object":
            raise ConfigError(f"{name} cannot be set from text; pass it to Consumer(...) in code")
        return raw


def option(default: object, spec: OptionSpec) -> Any:
    """A ``ConsumerConfig`` field: its default, with ``spec`` in the field's metadata."""
    return dataclasses.field(default=default, metadata={"option": spec})


def choice_of(enum_type: type[E]) -> Callable[[object, str], E]:
    """A check accepting a member of ``enum_type`` or its value."""

    def check(value: object, name: str) -> E:
        return choice(enum_type, value, name)

    return check


def number(minimum: int = 1, nullable: bool = False) -> Callable[[object, str], int | None]:
    """A check accepting a whole number >= ``minimum`` (or ``None`` when ``nullable``)."""

    def check(value: object, name: str) -> int | None:
        if value is None and nullable:
            return None
        return whole_number(value, name, minimum=minimum)

    return check


def duration(
    allow_zero: bool = False, nullable: bool = False
) -> Callable[[object, str], float | None]:
    """A check accepting seconds > 0 (>= 0 with ``allow_zero``; ``None`` when ``nullable``)."""

    def check(value: object, name: str) -> float | None:
        if value is None and nullable:
            return None
        return seconds(value, name, allow_zero=allow_zero)

    return check


def positive(nullable: bool = False) -> Callable[[object, str], float | None]:
    """A check accepting a finite number above 0 (or ``None`` when ``nullable``)."""

    def check(value: object, name: str) -> float | None:
        if value is None and nullable:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value <= 0
        ):
            none = " or None" if nullable else ""
            raise ConfigError(f"{name}={value!r} is not valid; expected a number above 0{none}")
        return float(value)

    return check


def optional_text(value: object, name: str) -> str | None:
    """A check accepting ``None`` or a non-empty string (returned stripped)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name}={value!r} is not valid; expected a non-empty string")
    return value.strip()


def flag(value: object, name: str) -> bool:
    """A check accepting ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name}={value!r} is not valid; expected True or False")
    return value
