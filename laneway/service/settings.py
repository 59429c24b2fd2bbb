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
from laneway.options import OptionSpec, duration, flag, number
from laneway.service.kafka_settings import PREFIX as KAFKA_PREFIX
from laneway.service.kafka_settings import KafkaClientSettings, read_kafka_settings
from laneway.sources.share.settings import START_AT_CHOICES

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
TOOL_VARIABLES = frozenset(
    {
        MEMBER_VARIABLE,
        "LANEWAY_KAFKA_BOOTSTRAP",
        "LANEWAY_KAFKA_START_TIMEOUT",
        "LANEWAY_POSTGRES_DSN",
        "LANEWAY_TEST_RECORD_DIR",
        "LANEWAY_DEMO_WORK_MS",
        "LANEWAY_SHARE_PREVIEW_WARNED",  # laneway.sources.share.preview_warning.PREVIEW_WARNED
    }
)
"""Variables of laneway's own scripts and supervisor: never taken for misspelt settings."""

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


def _optional_text(value: object, name: str) -> str | None:
    return None if value is None else _text(value, name)


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
    "handler": (None, OptionSpec("the handler, MODULE:ATTR", _optional_text, "text")),
    "bootstrap_servers": (
        None,
        OptionSpec("Kafka bootstrap servers, HOST:PORT[,...]", _optional_text, "text"),
    ),
    "group": (None, OptionSpec("the consumer group", _optional_text, "text")),
    "topics": ((), OptionSpec("topics to consume (repeat --topic)", _topics, "text")),
    "log_dir": (
        None,
        OptionSpec("a durable embedded log directory instead of Kafka", _optional_text, "text"),
    ),
    "connect_timeout": (
        10.0,
        OptionSpec("seconds to wait for a Kafka broker at start-up", duration(), "seconds"),
    ),
    "wait_for_topics": (
        False,
        OptionSpec("wait for topics that do not exist yet instead of failing", flag, "bool"),
    ),
    "share": (
        False,
        OptionSpec(
            "consume the topics as a Kafka share group (KIP-932): any number of members "
            "share every partition, records are acknowledged one by one; ordering must be "
            "unordered (the default with it)",
            flag,
            "bool",
        ),
    ),
    "start_at": (
        "earliest",
        OptionSpec(
            "with --share, where a new share group starts: earliest (laneway sets the "
            "group's share.auto.offset.reset so no backlog is skipped), latest, or group "
            "(leave the group config as it is; warns if that skips a backlog)",
            _one_of(START_AT_CHOICES),
            "choice",
            choices=START_AT_CHOICES,
        ),
    ),
    "members": (1, OptionSpec("consumer processes in the group, supervised", number(), "int")),
    "transactional_id": (
        None,
        OptionSpec(
            "with exactly_once, the transactional.id of the results producer (with --members: "
            "this, a dash and the member index); by default each member slot has its own "
            "stable id, laneway-GROUP-HOST-member-INDEX, and a single process one per process",
            _optional_text,
            "text",
        ),
    ),
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
            "show message keys in /readyz and the status page (message data: off by default)",
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


def service_settings_table() -> str:
    """The service's own settings as a Markdown table (flag, variable, default, meaning),
    for the command-line reference page (``scripts/generate-docs``)."""
    rows = ["| flag | environment | default | meaning |", "| --- | --- | --- | --- |"]
    for name, (default, spec) in SERVICE_SPECS.items():
        if name == "handler":
            continue
        dashed = name.replace("_", "-")
        shown_flag = "--topic" if name == "topics" else f"--{dashed}"
        if spec.kind == "bool":
            shown_flag = f"--{dashed}` / `--no-{dashed}"
        shown_default = "none" if default in (None, ()) else str(default)
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
    return {**SERVICE_SPECS, **consumer}


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
    client = read_kafka_settings(table, config_file, environ, TOOL_VARIABLES)
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
    return read_kafka_settings(table, config_file, environ, TOOL_VARIABLES)


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
        elif variable.startswith("LANEWAY_") and variable not in TOOL_VARIABLES:
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
