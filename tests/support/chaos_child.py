"""A consumer program the chaos tests start, kill, stop and restart as a subprocess.

Run as ``python tests/support/chaos_child.py '<json settings>'`` with ``LANEWAY_TEST_RECORD_DIR``
set. Handlers are :mod:`recording`'s, so every handled message is appended to
``<dir>/<pid>.log`` by the process that ran it (the consumer itself, or a process-engine
worker). The source is wrapped so that this life's view of the group is appended to
``<dir>/life-<pid>.jsonl``: the positions (offset and commit metadata) it was assigned,
and every commit before it is sent (``"commit"``) and once the log confirmed it
(``"committed"``). A SIGKILL can cut any of this off at a line boundary only (lines are
written whole and flushed), and :func:`read_life` ignores a torn last line anyway.

On a clean end the final :class:`laneway.ConsumerStats` go to ``<dir>/stats-<pid>.json``.

Settings: ``source`` (``"kafka"`` with ``bootstrap``, ``group`` and optional
``kafka_config``; or ``"embedded"`` with ``log_path``, the durable log this process owns
while it runs), ``topic``, the consumer options ``engine``, ``ordering``,
``concurrency``, ``max_buffered`` and ``commit_interval``, and ``idle_timeout`` for
``run`` (without it the consumer runs until SIGTERM).
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

import recording

import laneway
from laneway.config import ConsumerConfig
from laneway.offsets.offset_progress import OffsetProgress
from laneway.producing.producer import Producer
from laneway.sources.base import RebalanceListener, Source, SourceCapabilities
from laneway.sources.capabilities import PARTITIONED_LOG
from laneway.types import CommitPosition, Message, PartitionId

CONSUMER_OPTIONS = ("engine", "ordering", "concurrency", "max_buffered", "commit_interval")


def _positions(positions: Mapping[PartitionId, CommitPosition | None]) -> dict[str, Any]:
    return {
        str(partition): None if pos is None else [pos.offset, pos.metadata]
        for (_, partition), pos in positions.items()
    }


class LifeLog:
    """Appends this process's group events to ``life-<pid>.jsonl``, one flushed line each."""

    def __init__(self, directory: Path) -> None:
        self._out: IO[str] = open(  # noqa: SIM115 (kept open for the process's life)
            directory / f"life-{os.getpid()}.jsonl", "a", buffering=1
        )

    def write(self, event: str, **fields: object) -> None:
        self._out.write(json.dumps({"event": event, "time": time.monotonic(), **fields}) + "\n")


class _ListenerSpy:
    """Logs assignments, then passes every callback on to the consumer's listener."""

    def __init__(self, inner: RebalanceListener, life: LifeLog) -> None:
        self._inner = inner
        self._life = life

    def on_assigned(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        self._life.write("assigned", positions=_positions(positions))
        self._inner.on_assigned(positions)

    def on_revoked(self, partitions: Sequence[PartitionId]) -> None:
        self._inner.on_revoked(partitions)
        self._life.write("revoked", partitions=[p for _, p in partitions])

    def on_lost(self, partitions: Sequence[PartitionId]) -> None:
        self._life.write("lost", partitions=[p for _, p in partitions])
        self._inner.on_lost(partitions)


class RecordedSource:
    """A Source that logs assignments and commits of the one it wraps (see module docs)."""

    def __init__(self, inner: Source, life: LifeLog) -> None:
        self._inner = inner
        self._life = life

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def group(self) -> str:
        return self._inner.group

    def open(self, listener: RebalanceListener) -> None:
        self._inner.open(_ListenerSpy(listener, self._life))

    def poll(self, max_messages: int, timeout: float) -> list[Message]:
        return self._inner.poll(max_messages, timeout)

    @property
    def capabilities(self) -> SourceCapabilities:
        return PARTITIONED_LOG

    def progress(self, config: ConsumerConfig) -> OffsetProgress:
        return OffsetProgress(self, config.metadata_max_bytes)

    def commit(self, positions: Mapping[PartitionId, CommitPosition]) -> None:
        self._life.write("commit", positions=_positions(positions))
        self._inner.commit(positions)
        self._life.write("committed", positions=_positions(positions))

    def pause(self, partitions: Iterable[PartitionId]) -> None:
        self._inner.pause(partitions)

    def resume(self, partitions: Iterable[PartitionId]) -> None:
        self._inner.resume(partitions)

    def unread(self, partitions: Iterable[PartitionId]) -> dict[PartitionId, int]:
        return self._inner.unread(partitions)

    def log_ends(self, partitions: Iterable[PartitionId]) -> dict[PartitionId, int]:
        return self._inner.log_ends(partitions)

    def close(self) -> None:
        self._inner.close()

    def producer(self) -> Producer:
        return self._inner.producer()


@dataclass(frozen=True)
class LifeEvent:
    """One line of a life log: ``positions`` maps partition -> (offset, metadata) or None."""

    event: str
    time: float
    positions: dict[int, tuple[int, str] | None] = field(default_factory=dict)
    partitions: tuple[int, ...] = ()


def read_life(path: Path) -> list[LifeEvent]:
    """The events of one life log, without a torn last line."""
    events = []
    for line in path.read_text().splitlines():
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            continue
        positions = {
            int(p): None if pos is None else (int(pos[0]), str(pos[1]))
            for p, pos in raw.get("positions", {}).items()
        }
        events.append(
            LifeEvent(raw["event"], raw["time"], positions, tuple(raw.get("partitions", ())))
        )
    return events


class EarlyStop:
    """Makes SIGTERM graceful from the first instant: before ``Consumer.run`` installs its
    own handlers, a SIGTERM is remembered and stops the consumer as soon as it exists."""

    def __init__(self) -> None:
        self.requested = False
        self.consumer: laneway.Consumer | None = None
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        if self.consumer is not None:
            self.consumer.stop()

    def attach(self, consumer: laneway.Consumer) -> None:
        self.consumer = consumer
        if self.requested:
            consumer.stop()


def main(settings: dict[str, Any]) -> None:
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the harness asks on a hang
    early = EarlyStop()
    directory = Path(os.environ[recording.RECORD_DIR])
    life = LifeLog(directory)
    log: laneway.EmbeddedLog | None = None
    inner: Source
    if settings["source"] == "kafka":
        inner = laneway.KafkaSource(
            bootstrap_servers=settings["bootstrap"],
            group=settings["group"],
            topics=[settings["topic"]],
            config=settings.get("kafka_config"),
        )
    else:
        log = laneway.EmbeddedLog(path=settings["log_path"])
        inner = log.subscribe([settings["topic"]], group=settings["group"])
    engine = settings.get("engine", "thread")
    handler = recording.handle_async if engine == "async" else recording.handle
    options = {name: settings[name] for name in CONSUMER_OPTIONS if name in settings}
    consumer = laneway.Consumer(RecordedSource(inner, life), handler, **options)
    early.attach(consumer)
    life.write("started")
    stats = consumer.run(idle_timeout=settings.get("idle_timeout"))
    if log is not None:
        log.close()
    summary = asdict(stats)
    summary["committed"] = {f"{t}/{p}": o for (t, p), o in stats.committed.items()}
    summary["assigned"] = [f"{t}/{p}" for t, p in stats.assigned]
    (directory / f"stats-{os.getpid()}.json").write_text(json.dumps(summary))
    life.write("finished")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
