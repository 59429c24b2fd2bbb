"""Where a log is — a Kafka cluster or a durable embedded log directory — and what the
operator's tools read of it: a group's positions (:class:`Positions`) and a dead-letter
topic (:class:`DeadLetterLog`).

A :class:`Target` is made of plain values (``laneway run``'s and the ops commands' settings
give them); :mod:`laneway.sources.backends` opens a source, positions or dead letters on
it with the backend it names, and each backend's folder implements the protocols here.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from laneway.errors import ConfigError
from laneway.options import OptionSpec, optional_text
from laneway.results import Produce
from laneway.types import CommitPosition, Message, PartitionId

CONNECT_TIMEOUT = 10.0
"""Seconds a Kafka client waits for a broker to answer before it fails (``connect_timeout``:
a :class:`Target`'s, and the Kafka sources' default)."""

TARGET_OPTIONS: dict[str, tuple[object, OptionSpec]] = {
    "bootstrap_servers": (
        None,
        OptionSpec("Kafka bootstrap servers, HOST:PORT[,...]", optional_text, "text"),
    ),
    "log_dir": (
        None,
        OptionSpec("a durable embedded log directory instead of Kafka", optional_text, "text"),
    ),
}
"""Where the log is, declared once: name -> (default, spec); exactly one must be set."""


@dataclass(frozen=True)
class Target:
    """A log: a Kafka cluster (``bootstrap_servers``, with the librdkafka ``kafka``
    settings, each request waiting up to ``connect_timeout`` seconds) or a durable embedded
    log (``log_dir``). Exactly one of the two, or a :class:`~laneway.errors.ConfigError`
    saying which options to give."""

    bootstrap_servers: str | None = None
    log_dir: Path | None = None
    connect_timeout: float = CONNECT_TIMEOUT
    kafka: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        servers, log_dir = self.bootstrap_servers, self.log_dir
        if servers and log_dir:
            raise ConfigError(
                f"bootstrap_servers ({servers}) and log_dir ({log_dir}) are both set (by "
                "flags, LANEWAY_* variables or --config); choose Kafka or the embedded log"
            )
        if not servers and not log_dir:
            raise ConfigError(
                "no log: give --bootstrap-servers HOST:PORT (Kafka) or --log-dir DIR (a "
                "durable embedded log), as a flag, a LANEWAY_* variable or in --config FILE"
            )

    @property
    def where(self) -> str:
        """The log as a user names it, for messages."""
        return str(self.log_dir) if self.log_dir is not None else str(self.bootstrap_servers)


class Positions(Protocol):
    """A group's committed positions and the log's ends, read without joining the group
    (``laneway lag`` and ``top``): a Kafka cluster's
    (:class:`~laneway.sources.kafka.group_positions.KafkaPositions`) or an embedded log's
    (:class:`~laneway.sources.embedded.group_positions.EmbeddedPositions`)."""

    @property
    def where(self) -> str:
        """The log, as a user names it."""

    def check_topics(self, topics: Sequence[str]) -> None:
        """Raise :class:`~laneway.errors.UnknownTopicError` for a topic the log lacks."""

    def group_exists(self, group: str) -> bool:
        """Whether the log knows ``group`` (members or commits)."""

    def committed(self, group: str, topics: Sequence[str]) -> dict[PartitionId, CommitPosition]:
        """The group's committed positions (in ``topics``, or all); never committed: absent."""

    def assigned(self, group: str) -> set[PartitionId]:
        """Partitions the group's members own now."""

    def partitions(self, topics: Sequence[str]) -> list[PartitionId]:
        """Every partition of ``topics``."""

    def ends(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        """The log end (high watermark) of each partition."""

    def starts(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        """The first offset of each partition still in the log."""

    def close(self) -> None: ...


class DeadLetterLog(Protocol):
    """One dead-letter topic and the log around it, for one ``laneway dlq`` run: a Kafka
    cluster's (:class:`~laneway.sources.kafka.dead_letters.KafkaDeadLetters`) or an embedded
    log's (:class:`~laneway.sources.embedded.dead_letters.EmbeddedDeadLetters`).

    A run reads the topic once, from a group's committed position (``replay``) or from the
    start (``list``, ``show``: a group that is never committed), up to the log end as it
    was when the run started: a dead letter written while it runs (a replayed record that
    failed again) waits for the next run, so one run never reads a record twice."""

    where: str
    topic: str

    def start(self, group: str | None) -> None:
        """Begin reading at ``group``'s committed position (``None``: from the start)."""

    def read(self, max_records: int) -> list[Message] | None:
        """The next records (maybe none yet); ``None`` once every partition is read up
        to the end it had when :meth:`start` was called."""

    def commit(self, positions: Mapping[int, int]) -> None:
        """Commit the next offset to read of each partition of the topic for the group."""

    def partitions(self, topic: str) -> int | None:
        """How many partitions ``topic`` has (``None``: no such topic)."""

    def write(self, records: Sequence[Produce]) -> None:
        """Write ``records`` and wait until the log has them all, or raise
        :class:`~laneway.errors.WriteError` (nothing of them is committed)."""

    def close(self) -> None: ...


READ_GROUP_PREFIX = "laneway-dlq-read-"
"""``list`` and ``show`` read with a group of this prefix and a random suffix, never
committed (so the cluster keeps no trace of it)."""


def read_group() -> str:
    """A fresh group name for a read that commits nothing (``dlq list`` and ``show``)."""
    return f"{READ_GROUP_PREFIX}{uuid.uuid4().hex[:12]}"
