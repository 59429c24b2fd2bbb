"""Entries: the objects a status page lists (stalls, hot keys, dead letters, rebalances) as
JSON, field by field, so a field added to one of them shows up without a change here."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from typing import Any

from laneway.printable import key_text

KEY_FIELDS = frozenset({"key", "keys", "names"})
"""Fields that hold message keys (message data: an e-mail address, an account): left out
unless keys may be shown (a count, an ``int``, is shown). Any ``bytes`` value is treated
the same way."""


def entries(items: Iterable[object], show_keys: bool) -> list[dict[str, Any]]:
    """Each dataclass of ``items`` as a JSON object of its fields (see :func:`as_json`)."""
    return [entry(item, show_keys) for item in items]


def entry(item: object, show_keys: bool) -> dict[str, Any]:
    """One dataclass as a JSON object: its fields in order, keys only with ``show_keys``."""
    found: dict[str, Any] = {}
    if not dataclasses.is_dataclass(item):
        return {"value": as_json(item, show_keys)}
    for each in dataclasses.fields(item):
        value = getattr(item, each.name)
        if _is_key(each.name, value) and not show_keys:
            continue
        found[each.name] = as_json(value, show_keys)
    return found


def as_json(value: object, show_keys: bool) -> Any:
    """``value`` as JSON: bytes (keys) as text, undecodable bytes escaped, cut to 256
    characters (:func:`~laneway.printable.key_text`), floats to 3 decimals, a ``(topic,
    partition)`` pair as ``topic[partition]``, enums by value, dataclasses,
    mappings and sequences element by element."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, (bytes, bytearray)):
        return key_text(bytes(value))
    if isinstance(value, enum.Enum):
        return as_json(value.value, show_keys)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return entry(value, show_keys)
    if _is_partition(value):
        return _label(value)
    if isinstance(value, Mapping):
        return {_label(k): as_json(v, show_keys) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [as_json(v, show_keys) for v in items if show_keys or not _is_key("", v)]
    return str(value)


def _is_key(name: str, value: object) -> bool:
    if isinstance(value, (bytes, bytearray)):
        return True
    return name in KEY_FIELDS and not isinstance(value, int)


def _is_partition(value: object) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int)
        and not isinstance(value[1], bool)
    )


def _label(key: object) -> str:
    return f"{key[0]}[{key[1]}]" if _is_partition(key) else str(key)  # type: ignore[index]
