"""Enumerations for every mode, and the checks that turn bad option values into clear errors."""

from __future__ import annotations

import enum
import math
from typing import TypeVar

from laneway.errors import ConfigError


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
