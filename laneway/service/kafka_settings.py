"""The librdkafka settings of ``laneway run``: the TOML file's ``[kafka]`` table and
``LANEWAY_KAFKA_<PROPERTY>`` environment variables, a variable winning over the file.

A variable names its property in upper case with dots as underscores
(``LANEWAY_KAFKA_SASL_PASSWORD`` sets ``sasl.password``), matched against librdkafka's
property names (:mod:`laneway.sources.kafka.properties`). ``LANEWAY_KAFKA_<PROPERTY>_FILE``
reads the value from a file instead, for secrets mounted as files (one trailing newline
is dropped). A name librdkafka does not know, in the table or a variable, is an error
naming the closest property; so are the properties laneway sets from its own settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from laneway.errors import ConfigError
from laneway.sources.kafka.properties import (
    closest_property,
    is_property,
    is_secret,
    property_of,
    redacted,
    shown,
    variable_suffix,
)

PREFIX = "LANEWAY_KAFKA_"
"""Environment variables that set librdkafka properties start so."""
FILE_SUFFIX = "_FILE"
"""``LANEWAY_KAFKA_<PROPERTY>_FILE`` reads the property's value from the file it names."""

SHORTEST_SECRET = 6
"""Secret values shorter than this are not scrubbed from log lines."""
NOT_SCRUBBED = ("sasl.username", ".location", ".file", ".keytab")
"""Secret properties (by name ending) whose values are not scrubbed from log lines."""

OWN_SETTINGS = {
    "bootstrap.servers": "bootstrap_servers",
    "metadata.broker.list": "bootstrap_servers",
    "group.id": "group",
}
"""librdkafka properties laneway sets from a setting of its own."""


@dataclass(frozen=True)
class KafkaClientSettings:
    """librdkafka settings (``values``, passed to the client as they are) and where each
    came from (``origins``: ``file``, ``env`` or ``env file``). Its ``repr`` and
    :meth:`describe` never show a secret (see :func:`~laneway.sources.kafka.properties.is_secret`).
    """

    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"KafkaClientSettings({redacted(self.values)!r}, origins={self.origins!r})"

    def secrets(self) -> list[str]:
        """The secret values, for scrubbing from text, longest first: each whole, and
        for one made of space-separated ``key=value`` parts (a
        ``sasl.oauthbearer.config``) each part and what follows it, since librdkafka
        echoes the rest of such a value from where it stopped understanding it. Texts
        shorter than :data:`SHORTEST_SECRET` are left out (they would blank out
        ordinary words), and so are the user name and paths (:data:`NOT_SCRUBBED`):
        hidden in ``--print-config``, but a log line naming them is no leak, and one
        whose every mention of the group "tickets" read ``***`` would mislead."""
        found: set[str] = set()
        for name, value in self.values.items():
            if is_secret(name) and not name.endswith(NOT_SCRUBBED):
                parts = str(value).split()
                found.update(" ".join(parts[i:]) for i in range(len(parts)))
                found.update(parts)
                found.add(str(value))
        return sorted((s for s in found if len(s) >= SHORTEST_SECRET), key=len, reverse=True)

    def describe(self) -> list[tuple[str, str, str]]:
        """``(kafka.<property>, shown value, origin)`` per setting, secrets as ``***``."""
        return [
            (f"kafka.{name}", shown(name, value), self.origins[name])
            for name, value in self.values.items()
        ]


def read_kafka_settings(
    table: Mapping[str, Any] | None,
    config_file: Path | None,
    environ: Mapping[str, str],
) -> KafkaClientSettings:
    """The librdkafka settings of a ``[kafka]`` table (``None``: no file, or none in it)
    read from ``config_file`` and of the ``LANEWAY_KAFKA_*`` variables in ``environ``; a
    variable wins over the table."""
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    where = f"--config {config_file}: [kafka]"
    for name, value in flatten(table or {}).items():
        _check_name(name, f"{where} {name!r}")
        if isinstance(value, (dict, list)) or value is None:
            kind = "a table" if isinstance(value, dict) else "a list"
            raise ConfigError(f"{where} {name!r} is {kind}; expected a string, number or boolean")
        values[name], origins[name] = value, "file"
    for name, value, origin in _from_environment(environ):
        values[name], origins[name] = value, origin
    return KafkaClientSettings(values, origins)


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """librdkafka names have dots, which TOML reads as nested tables unless quoted:
    ``session.timeout.ms = 6000`` and ``"session.timeout.ms" = 6000`` mean the same."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _from_environment(environ: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """``(property, value, origin)`` for every ``LANEWAY_KAFKA_*`` variable."""
    found: list[tuple[str, str, str]] = []
    by_property: dict[str, str] = {}
    for variable, value in sorted(environ.items()):
        if not variable.startswith(PREFIX):
            continue
        name, from_file = _property_of_variable(variable)
        if name in by_property:
            raise ConfigError(
                f"{by_property[name]} and {variable} both set {name}; keep one of them"
            )
        by_property[name] = variable
        if from_file:
            found.append((name, _read_secret_file(variable, value), "env file"))
        else:
            found.append((name, value, "env"))
    return found


def _property_of_variable(variable: str) -> tuple[str, bool]:
    """The property ``variable`` sets, and whether its value is a file's path."""
    suffix = variable[len(PREFIX) :]
    name = property_of(suffix)
    if name is not None:
        return _checked(name, variable), False
    if suffix.endswith(FILE_SUFFIX):
        name = property_of(suffix[: -len(FILE_SUFFIX)])
        if name is not None:
            return _checked(name, variable), True
    dotted = suffix.lower().replace("_", ".")
    if dotted and is_property(dotted):  # newer than laneway's list of properties
        return _checked(dotted, variable), False
    close = closest_property(dotted)
    hint = f"; did you mean {PREFIX}{variable_suffix(close)} ({close})?" if close else ""
    raise ConfigError(
        f"unknown environment variable {variable}: librdkafka has no property {dotted!r}"
        f"{hint} (LANEWAY_KAFKA_<PROPERTY> sets a librdkafka property, dots as underscores)"
    )


def _checked(name: str, variable: str) -> str:
    _check_own(name, variable)
    return name


def _check_name(name: str, where: str) -> None:
    _check_own(name, where)
    if not is_property(name):
        close = closest_property(name)
        hint = f"; did you mean {close!r}?" if close else ""
        raise ConfigError(f"{where} is not a librdkafka property{hint}")


def _check_own(name: str, where: str) -> None:
    own = OWN_SETTINGS.get(name)
    if own is not None:
        raise ConfigError(
            f"{where}: {name} is set by laneway from its own setting {own} "
            f"(--{own.replace('_', '-')}, LANEWAY_{own.upper()}); set that instead"
        )


def _read_secret_file(variable: str, path: str) -> str:
    if not path.strip():
        raise ConfigError(f"{variable} is empty; expected the path of a file holding the value")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(
            f"{variable}={path}: cannot read the file: {error.strerror or error}"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{variable}={path}: the file is not UTF-8 text") from None
    if text.endswith("\r\n"):
        return text[:-2]
    return text[:-1] if text.endswith("\n") else text
