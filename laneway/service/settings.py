"""The settings of ``laneway run``: every consumer option plus the service's own, resolved
from flags, ``LANEWAY_*`` environment variables, a TOML file and defaults, in that order.

Consumer options come from :func:`laneway.config.option_specs` (one list for the library
and the service); the service's own settings are :data:`SERVICE_SPECS`. Each resolved
value remembers where it came from, for ``--print-config``. librdkafka settings come from
the TOML file's ``[kafka]`` table and ``LANEWAY_KAFKA_<PROPERTY>`` variables
(:mod:`laneway.service.kafka_settings`) and pass through to the client as they are.
"""

from __future__ import annotations

import difflib
import enum
import ipaddress
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from laneway.config import env_variable, option_defaults, option_specs
from laneway.errors import ConfigError
from laneway.options import OptionSpec, flag, number, optional_text
from laneway.service.kafka_settings import PREFIX as KAFKA_PREFIX
from laneway.service.kafka_settings import KafkaClientSettings, read_kafka_settings
from laneway.sources.backends import source_options
from laneway.sources.targets import Target
from laneway.state.settings import STATE_OPTIONS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

Origin = str
"""Where a value came from: ``flag``, ``env``, ``file`` or ``default`` (and ``env file``
for a librdkafka setting read from the file a ``LANEWAY_KAFKA_*_FILE`` variable names)."""

ENV_TYPO_CUTOFF = 0.85
"""How close an unknown ``LANEWAY_*`` variable must be to a known one to count as a typo
(an error); others are left alone, since other tools use the prefix too."""

MEMBER_VARIABLE = "LANEWAY_MEMBER_INDEX"
"""Set by the ``--members`` supervisor for each member process (0, 1, ...)."""
OWN_VARIABLES = frozenset(
    {
        MEMBER_VARIABLE,
        "LANEWAY_SHARE_PREVIEW_WARNED",  # laneway.sources.share.preview_warning.PREVIEW_WARNED
    }
)
"""Variables laneway sets for its own processes (the ``--members`` supervisor for each
member): never taken for misspelt settings. Any other ``LANEWAY_*`` variable that is not a
setting is left alone unless it looks like a misspelt one (:data:`ENV_TYPO_CUTOFF`), so the
checkout's scripts (``LANEWAY_BROKER``, ``LANEWAY_POSTGRES_DSN``, ...) need no entry here;
``LANEWAY_KAFKA_*`` is librdkafka's (see :mod:`laneway.service.kafka_settings`)."""

LOOPBACK = "127.0.0.1"
"""Where the probes and ``/metrics`` listen unless ``health_address`` / ``metrics_address``
say otherwise."""
_HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?")

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")


def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name}={value!r} is not valid; expected a non-empty string")
    return value.strip()


def _one_of(allowed: tuple[str, ...]) -> Callable[[object, str], str]:
    def check(value: object, name: str) -> str:
        if not isinstance(value, str) or value.lower() not in allowed:
            raise ConfigError(
                f"{name}={value!r} is not valid; allowed values: {', '.join(allowed)}"
            )
        return value.lower()

    return check


def _topics(value: object, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise ConfigError(f"{name}={value!r} is not valid; expected a list of topic names")
    return tuple(_text(item, name) for item in items)


def _address(value: object, name: str) -> str:
    text = _text(value, name)
    try:
        return str(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        pass
    if len(text) <= 253 and _HOST_NAME.fullmatch(text):
        return text
    raise ConfigError(
        f"{name}={value!r} is not valid; expected an IP address (127.0.0.1, 0.0.0.0, ::) or "
        "a host name"
    )


def _port(value: object, name: str) -> int | None:
    port = number(minimum=0, nullable=True)(value, name)
    if port is not None and port > 65_535:
        raise ConfigError(f"{name}={value!r} is not valid; expected a port from 0 to 65535")
    return port


SERVICE_SPECS: dict[str, tuple[object, OptionSpec]] = {
    "handler": (None, OptionSpec("the handler, MODULE:ATTR", optional_text, "text")),
    "group": (None, OptionSpec("the consumer group", optional_text, "text")),
    "topics": ((), OptionSpec("topics to consume (repeat --topic)", _topics, "text")),
    "members": (1, OptionSpec("consumer processes in the group, supervised", number(), "int")),
    "health_port": (
        None,
        OptionSpec(
            "port of /livez, /readyz, /backlog and the status page /status (member i: port + i)",
            _port,
            "int",
            nullable=True,
        ),
    ),
    "health_address": (
        LOOPBACK,
        OptionSpec(
            "address the probes listen on; 0.0.0.0 (or ::) for every interface, e.g. in a "
            "container whose probes come from outside",
            _address,
            "text",
        ),
    ),
    "health_show_keys": (
        False,
        OptionSpec(
            "show message keys in /readyz, /backlog, the status page and log lines (message "
            "data: off by default)",
            flag,
            "bool",
        ),
    ),
    "metrics_port": (
        None,
        OptionSpec(
            "port of Prometheus /metrics (member i: port + i); needs laneway[metrics]",
            _port,
            "int",
            nullable=True,
        ),
    ),
    "metrics_address": (
        LOOPBACK,
        OptionSpec(
            "address /metrics listens on; 0.0.0.0 (or ::) for every interface, e.g. for a "
            "Prometheus outside the container",
            _address,
            "text",
        ),
    ),
    "log_level": (
        "info",
        OptionSpec("log level", _one_of(LOG_LEVELS), "choice", choices=LOG_LEVELS),
    ),
    "log_format": (
        "text",
        OptionSpec("log line format", _one_of(LOG_FORMATS), "choice", choices=LOG_FORMATS),
    ),
}
"""The service's own settings: name -> (default, spec). Flags are ``--name-with-dashes``,
variables ``LANEWAY_NAME``, TOML keys the name (``topics`` may also be ``topic``)."""


def service_specs() -> dict[str, tuple[object, OptionSpec]]:
    """``laneway run``'s settings besides the consumer options: the handler, group and
    topics, where the log is and the sources' options (each declared by its source's
    folder: :func:`~laneway.sources.backends.source_options`), the state store's
    (:data:`~laneway.state.settings.STATE_OPTIONS`), then the service's own."""
    own = dict(SERVICE_SPECS)
    first = {name: own.pop(name) for name in ("handler", "group", "topics")}
    return {**first, **source_options(), **STATE_OPTIONS, **own}


def service_settings_table() -> str:
    """The service's own settings as a Markdown table (flag, variable, default, meaning),
    for the command-line reference page (``scripts/generate-docs``)."""
    rows = ["| flag | environment | default | meaning |", "| --- | --- | --- | --- |"]
    for name, (default, spec) in service_specs().items():
        if name == "handler":
            continue
        dashed = name.replace("_", "-")
        shown_flag = "--topic" if name == "topics" else f"--{dashed}"
        if spec.kind == "bool":
            shown_flag = f"--{dashed}` / `--no-{dashed}"
        shown_default = spec.shown_default or ("none" if default in (None, ()) else str(default))
        what = f"{spec.help}: {', '.join(spec.choices)}" if spec.choices else spec.help
        rows.append(f"| `{shown_flag}` | `{env_variable(name)}` | {shown_default} | {what} |")
    return "\n".join(rows)


@dataclass(frozen=True)
class Resolved:
    """Every setting's value and origin, the consumer options apart, and the librdkafka
    settings (``[kafka]`` and ``LANEWAY_KAFKA_*``, passed through; secrets never shown)."""

    values: dict[str, Any]
    origins: dict[str, Origin]
    consumer_options: dict[str, Any]
    client: KafkaClientSettings = field(default_factory=KafkaClientSettings)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def kafka(self) -> dict[str, Any]:
        """The librdkafka settings, by property name."""
        return self.client.values

    def target(self) -> Target:
        """The log these settings name: Kafka or a durable embedded log directory (exactly
        one, else a :class:`~laneway.errors.ConfigError`)."""
        log_dir = self.values["log_dir"]
        return Target(
            bootstrap_servers=self.values["bootstrap_servers"],
            log_dir=None if log_dir is None else Path(log_dir),
            connect_timeout=self.values["connect_timeout"],
            kafka=self.kafka,
        )

    def source_options(self) -> dict[str, Any]:
        """The sources' options (see :func:`~laneway.sources.backends.source_options`)."""
        return {name: self.values[name] for name in source_options()}

    def describe(self) -> list[tuple[str, str, Origin]]:
        """``(name, shown value, origin)`` per setting, secrets redacted, for humans."""
        rows = [(name, _show(self.values[name]), self.origins[name]) for name in self.values]
        return rows + self.client.describe()


def all_specs() -> dict[str, tuple[object, OptionSpec]]:
    """Service settings then consumer options (those that can be set from text)."""
    consumer = {
        name: (option_defaults()[name], spec)
        for name, spec in option_specs().items()
        if spec.from_text
    }
    return {**service_specs(), **consumer}


def resolve(
    flags: Mapping[str, object], environ: Mapping[str, str], config_file: Path | None
) -> Resolved:
    """Resolve every setting: flag > ``LANEWAY_*`` variable > TOML file > default.

    ``flags`` holds only the flags given (text, or a tuple for ``--topic``). Unknown TOML
    keys, and unknown variables that look like a misspelt known one, are ConfigErrors
    naming them and the closest valid name; so is a librdkafka property librdkafka does
    not know. A number or boolean written as a TOML string (``"64"``) is a ConfigError.
    """
    specs = all_specs()
    file_values, table = _read_file(config_file, specs) if config_file else ({}, None)
    env_values = _read_environment(environ, specs)
    client = read_kafka_settings(table, config_file, environ)
    values: dict[str, Any] = {}
    origins: dict[str, Origin] = {}
    for name, (default, spec) in specs.items():
        for origin, layer in (("flag", flags), ("env", env_values), ("file", file_values)):
            if name in layer and layer[name] is not None:
                raw = layer[name]
                if origin == "file":
                    _check_file_type(config_file, name, raw, spec)
                if isinstance(raw, str) and spec.kind not in ("text", "choice"):
                    raw = spec.parse(raw, name)
                elif isinstance(raw, str) and spec.nullable and raw.strip().lower() == "none":
                    raw = None
                values[name], origins[name] = spec.check(raw, name), origin
                break
        else:
            values[name], origins[name] = default, "default"
    consumer_names = option_specs()
    consumer = {name: values[name] for name in values if name in consumer_names}
    return Resolved(values, origins, consumer, client)


def kafka_settings(environ: Mapping[str, str], config_file: Path | None) -> KafkaClientSettings:
    """Only the librdkafka settings (the file's ``[kafka]`` table and ``LANEWAY_KAFKA_*``
    variables), for laneway commands other than ``run`` that talk to the same cluster
    (the rest of the file is not checked)."""
    table = _read_toml(config_file).get("kafka") if config_file else None
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"--config {config_file}: [kafka] must be a table of librdkafka settings")
    return read_kafka_settings(table, config_file, environ)


def closest(name: str, known: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or an empty string."""
    match = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean {match[0]!r}?" if match else ""


_TOML_TYPES = {
    "int": "a whole number",
    "number": "a number",
    "seconds": "a number of seconds",
    "bool": "true or false",
}


def _check_file_type(path: Path | None, name: str, raw: object, spec: OptionSpec) -> None:
    """A number or boolean written as a TOML string is an error (TOML has the types; a
    string there is most often a quoted value that was meant as the other type). The
    string ``"none"`` stays the way to write no value, which TOML cannot."""
    expected = _TOML_TYPES.get(spec.kind)
    if expected is None or not isinstance(raw, str):
        return
    if spec.nullable and raw.strip().lower() == "none":
        return
    raise ConfigError(
        f"--config {path}: {name} = {raw!r} is a string; expected {expected} "
        f"(write {name} = {raw.strip()} without quotes)"
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        document: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"--config {path}: cannot read it: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"--config {path}: not valid TOML: {error}") from None
    return document


def _read_file(
    path: Path, specs: Mapping[str, object]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    document = _read_toml(path)
    kafka = document.pop("kafka", None)
    if kafka is not None and not isinstance(kafka, dict):
        raise ConfigError(f"--config {path}: [kafka] must be a table of librdkafka settings")
    if "topic" in document and "topics" not in document:
        document["topics"] = [document.pop("topic")]
    for key in document:
        if key not in specs:
            known = [*specs, "kafka"]
            raise ConfigError(f"--config {path}: unknown key {key!r}{closest(key, known)}")
    return document, kafka


def _read_environment(environ: Mapping[str, str], specs: Mapping[str, object]) -> dict[str, str]:
    by_variable = {env_variable(name): name for name in specs}
    found: dict[str, str] = {}
    for variable, value in environ.items():
        if variable in by_variable:
            found[by_variable[variable]] = value
        elif variable.startswith(KAFKA_PREFIX):
            continue  # librdkafka properties: read_kafka_settings
        elif variable.startswith("LANEWAY_") and variable not in OWN_VARIABLES:
            match = difflib.get_close_matches(variable, list(by_variable), 1, ENV_TYPO_CUTOFF)
            if match:
                raise ConfigError(
                    f"unknown environment variable {variable}; did you mean {match[0]}?"
                )
    return found


def _show(value: object) -> str:
    if isinstance(value, enum.Enum):
        return repr(value.value)
    if isinstance(value, tuple):
        return ", ".join(value) if value else "(none)"
    return repr(value)
