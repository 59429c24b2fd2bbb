"""KafkaShareSource's options, the validation of its arguments and the librdkafka
configuration it runs with.

laneway acknowledges every record of a share group itself, one by one, and only once it
is settled: ``share.acknowledgement.mode`` is forced to ``explicit``, and asking for
``implicit`` is a :class:`~laneway.errors.ConfigError` rather than a silent override.
"""

from __future__ import annotations

import enum
import hashlib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from laneway.errors import ConfigError
from laneway.options import OptionSpec, flag, seconds
from laneway.sources.kafka.client_config import non_empty_text, topic_names, user_config


class StartAt(str, enum.Enum):
    """Where a share group with no state for a partition starts reading it (the group
    config ``share.auto.offset.reset``, which Kafka applies only when the group first
    reads a partition).

    ``earliest`` (laneway's default): laneway sets the group config to ``earliest`` before
    joining, so records produced before the first member ran are consumed, as a
    :class:`~laneway.sources.kafka.source.KafkaSource` group does. ``latest``: laneway sets it to
    ``latest``; a new group skips what is already there, on purpose. ``group``: laneway
    leaves the group config as it is (managed with ``kafka-configs``); when that is
    ``latest`` (Kafka's default) and the topics hold records, it logs a WARNING saying how
    many a new group skips.
    """

    EARLIEST = "earliest"
    LATEST = "latest"
    GROUP = "group"


START_AT_CHOICES = tuple(choice.value for choice in StartAt)

FORCED: Mapping[str, object] = {"share.acknowledgement.mode": "explicit"}
"""Settings laneway must own; a user value that contradicts them is a ConfigError."""

_WHY_FORCED = {
    "share.acknowledgement.mode": (
        "laneway acknowledges each record itself: accept once it is finished, release it "
        "for a retry, reject it after its dead letter; implicit mode would accept every "
        "record of a poll at the next poll, finished or not"
    ),
}


@dataclass(frozen=True)
class ShareSettings:
    """Validated KafkaShareSource arguments and the full librdkafka config."""

    bootstrap_servers: str
    group: str
    topics: tuple[str, ...]
    consumer_config: dict[str, object]
    connect_timeout: float
    wait_for_topics: bool
    start_at: StartAt
    crash_journal: Path | None
    """The crash-journal directory (``None``: the protection is off)."""
    group_config: dict[str, str]
    """Share group configs laneway sets before joining (``start_at`` aside)."""


def build_share_settings(
    bootstrap_servers: object,
    group: object,
    topics: object,
    config: object,
    connect_timeout: object,
    wait_for_topics: object,
    start_at: object,
    crash_journal: object,
    group_config: object,
) -> ShareSettings:
    """Check every argument and merge the user's config with the forced settings."""
    servers = non_empty_text(bootstrap_servers, "bootstrap_servers", "e.g. '127.0.0.1:9092'")
    group_id = non_empty_text(group, "group", "the share group id, e.g. 'billing'")
    names = topic_names(topics)
    for name in names:
        if name.startswith("^"):
            raise ConfigError(
                f"topics contains {name!r}; a share group subscribes to topic names, not "
                "regular expressions"
            )
    merged = user_config(config, FORCED, _WHY_FORCED, "KafkaShareSource")
    merged.update(FORCED)
    merged["bootstrap.servers"] = servers
    merged["group.id"] = group_id
    return ShareSettings(
        bootstrap_servers=servers,
        group=group_id,
        topics=names,
        consumer_config=merged,
        connect_timeout=seconds(connect_timeout, "connect_timeout"),
        wait_for_topics=flag(wait_for_topics, "wait_for_topics"),
        start_at=_start_at(start_at),
        crash_journal=journal_directory(crash_journal, servers, group_id),
        group_config=_group_config(group_config),
    )


def _group_config(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, str):
        value = _pairs(value)
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"group_config={value!r} is not valid; expected a mapping of share group config "
            "names to values, e.g. {'share.record.lock.duration.ms': 60000}"
        )
    checked: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key.startswith("share."):
            raise ConfigError(
                f"group_config key {key!r} is not valid; share group configs start with "
                "'share.' (e.g. share.record.lock.duration.ms, share.heartbeat.interval.ms)"
            )
        if key == "share.auto.offset.reset":
            raise ConfigError(
                "group_config['share.auto.offset.reset'] is not allowed; use start_at="
                "'earliest' | 'latest' | 'group'"
            )
        if item is None or isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise ConfigError(f"group_config[{key!r}]={item!r} is not valid; expected a value")
        checked[key] = str(item)
    return checked


def _start_at(value: object) -> StartAt:
    if isinstance(value, StartAt):
        return value
    if isinstance(value, str) and value.strip().lower() in START_AT_CHOICES:
        return StartAt(value.strip().lower())
    raise ConfigError(
        f"start_at={value!r} is not valid; allowed values: {', '.join(START_AT_CHOICES)}"
    )


def journal_directory(value: object, servers: str, group: str) -> Path | None:
    """The crash journal's directory: ``True`` picks one per user, cluster and group under
    the temporary directory (shared by every member of the group on this machine), a path
    names one, ``False`` turns the journal off."""
    if value is False:
        return None
    if value is True:
        digest = hashlib.sha256(f"{servers}\0{group}".encode()).hexdigest()[:16]
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in group)[:64]
        user = os.getuid() if hasattr(os, "getuid") else "user"
        return Path(tempfile.gettempdir()) / f"laneway-{user}" / "share" / f"{safe}-{digest}"
    if isinstance(value, (str, os.PathLike)) and str(value).strip():
        return Path(value)
    raise ConfigError(
        f"crash_journal={value!r} is not valid; expected True (a directory under the "
        "temporary directory), a directory path shared by the group's members on this "
        "machine, or False (off)"
    )


_TRUE_TEXT = frozenset({"true", "yes", "on", "1"})
_FALSE_TEXT = frozenset({"false", "no", "off", "0"})


def _start_at_setting(value: object, name: str) -> str:
    return _start_at(value).value


def _crash_journal_setting(value: object, name: str) -> bool | str:
    """``true``/``false`` (as text or TOML booleans) or a directory path."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip():
        text = value.strip()
        if text.lower() in _TRUE_TEXT | _FALSE_TEXT:
            return text.lower() in _TRUE_TEXT
        return text
    raise ConfigError(f"{name}={value!r} is not valid; expected true, false or a directory path")


def _pairs(text: str) -> dict[str, str]:
    """``KEY=VALUE[,KEY=VALUE...]`` as a mapping."""
    found: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, equals, item = part.partition("=")
        if not equals or not key.strip():
            raise ConfigError(
                f"group_config={text!r} is not valid; expected KEY=VALUE[,KEY=VALUE...], "
                "e.g. share.record.lock.duration.ms=60000"
            )
        found[key.strip()] = item.strip()
    return found


def _nested(table: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """A TOML table's dotted names (``share.record.lock.duration.ms = 60000`` nests)."""
    flat: dict[str, object] = {}
    for key, value in table.items():
        if isinstance(value, Mapping):
            flat.update(_nested(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _group_config_setting(value: object, name: str) -> dict[str, str] | None:
    """``None``, a TOML table or ``KEY=VALUE[,KEY=VALUE...]`` text, checked as
    ``group_config``."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        value = _nested(value)
    return _group_config(value) or None


SHARE_OPTIONS: dict[str, tuple[object, OptionSpec]] = {
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
        StartAt.EARLIEST.value,
        OptionSpec(
            "with --share, where a new share group starts: earliest (laneway sets the "
            "group's share.auto.offset.reset so no backlog is skipped), latest, or group "
            "(leave the group config as it is; warns if that skips a backlog)",
            _start_at_setting,
            "choice",
            choices=START_AT_CHOICES,
        ),
    ),
    "crash_journal": (
        True,
        OptionSpec(
            "with --share, where the journal of records that killed a member lives: true (a "
            "directory under the temporary directory, shared by the group's members on this "
            "machine), a directory path (a volume that survives a container's restart), or "
            "false (off)",
            _crash_journal_setting,
            "text",
            shown_default="true",
        ),
    ),
    "group_config": (
        None,
        OptionSpec(
            "with --share, share group configs laneway sets before joining, "
            "KEY=VALUE[,KEY=VALUE] (a table in TOML), e.g. "
            "share.record.lock.duration.ms=60000; needs ALTER_CONFIGS on the group",
            _group_config_setting,
            "text",
            nullable=True,
        ),
    ),
}
"""The options of :class:`~laneway.sources.share.source.KafkaShareSource` beyond a Kafka
source's (``share`` chooses it), declared once: name -> (default, spec); ``laneway run``
takes each as a setting (see :func:`laneway.sources.backends.source_options`)."""
