"""``laneway dlq replay``: dead letters back to their original topic (or another), once.

One run reads the dead-letter topic from the replay group's committed position to the end
it had at the start, in batches. Per batch it writes the selected records, waits until the
log acknowledges every one, and only then commits the group past the batch: at least once.
A run killed between a write and its commit writes that batch again when run again, so
duplicates are bounded by one batch (:data:`BATCH`, or one second of records at
``--max-rate``); nothing is lost. Records the selection leaves out, records at
``--max-replays`` and records whose headers are unusable are passed over (committed past)
and counted; they stay in the dead-letter topic.

A record goes back with its key, value and own headers, without laneway's dead-letter
headers (``laneway.error.*``, ``laneway.attempts``, ``laneway.original.*``), with
``laneway.replay.count`` one higher, to its original partition (``--to``: the partition
its key picks there), timestamped now.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from laneway.ops.dlq.records import DeadLetter
from laneway.ops.dlq.selection import Selection
from laneway.results import Produce
from laneway.sources.targets import DeadLetterLog
from laneway.types import Message

BATCH = 500
"""Records read, written and committed together (fewer at ``--max-rate``)."""
DEFAULT_MAX_REPLAYS = 3
"""A record replayed this many times already stays in the dead-letter topic."""


def default_group(topic: str, selection: Selection, to: str | None) -> str:
    """The replay group of ``topic`` for a selection and target: the same command resumes
    where it stopped, another selection or target starts from the beginning."""
    base = f"laneway-dlq-replay.{topic}"
    if selection.everything and to is None:
        return base
    return f"{base}.{selection.fingerprint(to)}"


@dataclass
class ReplayReport:
    """What a replay run did: ``read`` records, ``selected`` by the selection,
    ``replayed`` (written, or with ``dry_run`` that would be), ``at_limit`` left at
    ``--max-replays``, ``unusable`` left for a reason (by reason), and whether the run
    reached the end (``complete``) or was stopped."""

    topic: str
    group: str
    dry_run: bool
    read: int = 0
    selected: int = 0
    replayed: int = 0
    at_limit: int = 0
    unusable: Counter[str] = field(default_factory=Counter)
    targets: Counter[str] = field(default_factory=Counter)
    complete: bool = False

    def as_json(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "group": self.group,
            "dry_run": self.dry_run,
            "read": self.read,
            "selected": self.selected,
            "replayed": self.replayed,
            "at_max_replays": self.at_limit,
            "unusable": dict(self.unusable),
            "targets": dict(self.targets),
            "complete": self.complete,
        }


class Pacer:
    """Holds writes to ``rate`` records a second on average (``None``: no limit)."""

    def __init__(self, rate: float | None) -> None:
        self._rate = rate
        self._next = time.monotonic()

    def wait(self, records: int) -> None:
        if self._rate is None or records == 0:
            return
        now = time.monotonic()
        if self._next > now:
            time.sleep(self._next - now)
        self._next = max(now, self._next) + records / self._rate


def batch_size(max_rate: float | None) -> int:
    """Records per batch: :data:`BATCH`, or about one second's worth at ``max_rate``."""
    return BATCH if max_rate is None else max(1, min(BATCH, int(max_rate)))


class Replay:
    """One replay run over ``log`` (started with the replay group); :meth:`run` it.

    Tuning: ``max_rate`` paces the writes (and makes batches of about one second's worth,
    which also bounds what a kill writes twice); without it batches are :data:`BATCH`
    records, each one acknowledgement wait and one commit. ``max_replays`` is the loop
    guard."""

    def __init__(
        self,
        log: DeadLetterLog,
        report: ReplayReport,
        selection: Selection,
        to: str | None,
        max_replays: int,
        max_rate: float | None,
    ) -> None:
        self._log = log
        self.report = report
        self._selection = selection
        self._to = to
        self._max_replays = max_replays
        self._pacer = Pacer(max_rate)
        self._batch = batch_size(max_rate)
        self.stopping = False
        """Set (e.g. by a signal handler) to stop after the batch in hand."""

    def run(self) -> ReplayReport:
        log, report = self._log, self.report
        while not self.stopping:
            batch = log.read(self._batch)
            if batch is None:
                report.complete = True
                break
            if not batch:
                continue
            records = [r for r in map(self._record_for, batch) if r is not None]
            if not report.dry_run:
                self._pacer.wait(len(records))
                if records:
                    log.write(records)
                log.commit(_next_offsets(batch))
            report.replayed += len(records)
        return report

    def _record_for(self, message: Message) -> Produce | None:
        report = self.report
        report.read += 1
        letter = DeadLetter.of(message)
        if not self._selection.matches(letter):
            return None
        report.selected += 1
        replays = letter.replays
        if replays is None:
            report.unusable[letter.problem or "unusable headers"] += 1
            return None
        if replays >= self._max_replays:
            report.at_limit += 1
            return None
        topic, partition = self._to, None
        if topic is None:
            problem = letter.original_problem()
            if problem is not None:
                report.unusable[problem] += 1
                return None
            topic, partition = letter.original_topic, letter.original_partition
        assert topic is not None
        if topic == self._log.topic:
            report.unusable[f"the original topic is the dead-letter topic {topic} itself"] += 1
            return None
        count = self._log.partitions(topic)
        if count is None:
            report.unusable[f"topic {topic!r} does not exist on {self._log.where}"] += 1
            return None
        if partition is not None and partition >= count:
            report.unusable[f"{topic} has no partition {partition} (it has {count})"] += 1
            return None
        report.targets[topic] += 1
        return Produce(topic, message.value, message.key, letter.replay_headers(), partition)


def _next_offsets(batch: list[Message]) -> dict[int, int]:
    positions: dict[int, int] = {}
    for message in batch:
        positions[message.partition] = max(positions.get(message.partition, 0), message.offset + 1)
    return positions
