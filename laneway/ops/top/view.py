"""What one frame of ``laneway top`` shows: two snapshots of a group, and that frame as
plain text (``--once``; the live view draws the same rows with rich, see
:mod:`laneway.ops.top.live`)."""

from __future__ import annotations

from dataclasses import dataclass

from laneway.metrics import Metric
from laneway.offsets.backlog import RATE_WINDOW, FinishingRate, drain_seconds
from laneway.ops.cluster import Snapshot
from laneway.ops.member_metrics import MemberFigures
from laneway.ops.tables import Cell, render
from laneway.printable import printable


def finished(snapshot: Snapshot) -> int:
    """Messages of the snapshot's partitions that are done: the log ends less the backlog."""
    return sum(p.end - p.backlog for p in snapshot.backlog.partitions)


class Drain:
    """The group's drain time, estimated as a consumer's ``GET /backlog`` does: the
    backlog over the rate of finished messages in the last ``RATE_WINDOW`` seconds of
    work (:class:`~laneway.offsets.backlog.FinishingRate`), fed one snapshot at a time."""

    def __init__(self) -> None:
        self._rate = FinishingRate()
        self.rate, self.span = 0.0, 0.0

    def add(self, snapshot: Snapshot) -> Drain:
        self.rate, self.span = self._rate.sample(
            snapshot.taken, finished(snapshot), snapshot.backlog.backlog
        )
        return self


@dataclass(frozen=True)
class View:
    """Two snapshots of a group (and of its members' metrics, if asked): what one frame
    of ``laneway top`` shows; ``drain`` has seen every snapshot up to ``now``."""

    before: Snapshot
    now: Snapshot
    members_before: MemberFigures | None
    members_now: MemberFigures | None
    drain: Drain

    @property
    def seconds(self) -> float:
        return max(1e-9, self.now.taken - self.before.taken)

    def done_rate(self, pid: tuple[str, int] | None = None) -> float:
        """Messages finished per second: the fall of the backlog plus what arrived."""
        return (self._done(self.now, pid) - self._done(self.before, pid)) / self.seconds

    def in_rate(self, pid: tuple[str, int] | None = None) -> float:
        return (self._ends(self.now, pid) - self._ends(self.before, pid)) / self.seconds

    def member_rate(self, metric: Metric) -> float | None:
        """A counter's rate over the members that answered (a counter a member has not
        reported yet counts 0); ``None`` when no member was asked or answered."""
        if self.members_now is None or self.members_before is None:
            return None
        if not self.members_now.answered:
            return None
        now, before = self.members_now.totals, self.members_before.totals
        return max(0.0, now.get(metric, 0.0) - before.get(metric, 0.0)) / self.seconds

    @staticmethod
    def _done(snapshot: Snapshot, pid: tuple[str, int] | None) -> int:
        return sum(
            p.end - p.backlog
            for p in snapshot.backlog.partitions
            if pid is None or (p.topic, p.partition) == pid
        )

    @staticmethod
    def _ends(snapshot: Snapshot, pid: tuple[str, int] | None) -> int:
        return sum(
            p.end
            for p in snapshot.backlog.partitions
            if pid is None or (p.topic, p.partition) == pid
        )


PARTITION_HEADER = ("topic", "partition", "committed", "end", "backlog", "gaps", "done/s", "in/s")


def partition_rows(view: View) -> tuple[tuple[str, ...], list[list[Cell]]]:
    """The per-partition table of a frame (with ``age`` and ``waiting`` columns when
    members were asked)."""
    members = view.members_now
    header = PARTITION_HEADER + (("age s", "waiting") if members is not None else ())
    rows: list[list[Cell]] = []
    for p in view.now.backlog.partitions:
        pid = (p.topic, p.partition)
        row: list[Cell] = [p.topic, p.partition, p.committed, p.end, p.backlog]
        row += [p.finished_runs, view.done_rate(pid), view.in_rate(pid)]
        if members is not None:
            waiting = members.waiting.get(pid)
            row += [members.oldest.get(pid), None if waiting is None else int(waiting)]
        rows.append(row)
    return header, rows


def headline(view: View) -> str:
    """The totals line: lag, backlog, the rates between the two samples, and the time to
    drain the backlog (:class:`Drain`: over up to ``RATE_WINDOW`` seconds of work)."""
    backlog, done, rate = view.now.backlog, view.done_rate(), view.drain
    drain = drain_seconds(backlog.backlog, rate.rate, rate.span)
    return (
        f"lag {backlog.lag}  backlog {backlog.backlog}  finished beyond "
        f"{backlog.finished_beyond}  done {done:,.1f}/s  in {view.in_rate():,.1f}/s  "
        f"drain {drain:,.1f} s (at {rate.rate:,.1f}/s over {min(rate.span, RATE_WINDOW):.0f} s)"
    )


def members_line(view: View, asked: int) -> str:
    """What the members' metrics say, or why they say nothing (a member's labels and
    errors are its own text: printed through :func:`~laneway.printable.printable`)."""
    figures = view.members_now
    if figures is None:
        return "members: not asked (give --metrics URL per member)"

    def rate(metric: Metric) -> str:
        value = view.member_rate(metric)
        return "-" if value is None else f"{value:,.1f}/s"

    totals = figures.totals
    line = (
        f"members ({figures.answered} of {asked} answered): processed "
        f"{rate(Metric.MESSAGES_PROCESSED)}, failed {rate(Metric.MESSAGES_FAILED)}, "
        f"dead letters {rate(Metric.DEAD_LETTERS)}, in flight "
        f"{int(totals.get(Metric.IN_FLIGHT, 0))}, buffered {int(totals.get(Metric.BUFFERED, 0))}"
        f", paused partitions {int(totals.get(Metric.PAUSED_PARTITIONS, 0))}"
    )
    restoring = int(totals.get(Metric.STATE_RESTORING, 0))
    if restoring:
        left = sorted(figures.restore_left.items())
        shown = ", ".join(
            f"{printable(topic)}[{number}] {int(count):,}" for (topic, number), count in left
        )
        line += f"\nrestoring state: {restoring} partition{'s' if restoring != 1 else ''}"
        line += f" (records left: {shown})" if shown else ""
    if figures.hot_keys:
        shown = ", ".join(f"{key:012x} {int(count)}" for key, count in figures.hot_keys[:5])
        line += f"\nhot keys (id messages): {shown}"
    for url, why in figures.failures.items():
        line += f"\n  {url}: no answer ({printable(why)})"
    return line


def plain(view: View, where: str) -> str:
    """A frame as plain text (``--once``)."""
    title = f"group {view.now.group} on {where}, {view.seconds:.1f} s between samples"
    if view.now.share_group:
        return f"{title}: {view.now.note}"
    header, rows = partition_rows(view)
    asked = (
        0
        if view.members_now is None
        else view.members_now.answered + len(view.members_now.failures)
    )
    return "\n".join(
        [title, headline(view), "", render(header, rows), "", members_line(view, asked)]
    )
