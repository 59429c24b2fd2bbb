"""ChangelogWatch: whether each partition's state changes reach the changelog, and since
when they have not.

A state change that the changelog refuses or does not acknowledge in time stays in memory
and is written again before the next commit, and the commit waits for it (see
:mod:`laneway.state.unlogged`): nothing is lost, but nothing of the partition is committed
and its state is durable only in memory. A failure now and then (a leader moving) is said
in a WARNING; failures that go on for :data:`NOT_DURABLE_AFTER` seconds, with no change of
the partition acknowledged meanwhile, are said in one ERROR per partition (and an INFO line
when changes reach the changelog again), and shown until then: ``stats().not_durable``,
``/readyz`` (not ready), the status page and the ``laneway_state_not_durable_partitions``
gauge.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from laneway.logs import get_logger
from laneway.types import NotDurable

log = get_logger("laneway.state.writer")

NOT_DURABLE_AFTER = 30.0
"""Seconds of failing changelog writes (nothing of the partition acknowledged meanwhile)
after which a partition's state is said to be not durable."""


class ChangelogWatch:
    """The changelog writes of input ``topic``'s partitions into ``changelog``, failing or
    not (see the module docs). The control thread reports; :meth:`not_durable` may be read
    from any thread. Tuning: :data:`NOT_DURABLE_AFTER` (``after``)."""

    def __init__(self, topic: str, changelog: str, after: float = NOT_DURABLE_AFTER) -> None:
        self._topic = topic
        self._changelog = changelog
        self._after = after
        self._failing: dict[int, tuple[float, str]] = {}
        """Partition -> when its writes began to fail, and the latest error (replaced, not
        changed: read from other threads)."""
        self._said: set[int] = set()

    def failed(self, partition: int, error: str) -> None:
        """A state change of ``partition`` was refused or not acknowledged in time."""
        since = self._failing.get(partition, (time.monotonic(), ""))[0]
        self._failing = {**self._failing, partition: (since, error)}
        self.look()

    def reached(self, partitions: Iterable[int]) -> None:
        """State changes of ``partitions`` were acknowledged."""
        back = [p for p in partitions if p in self._failing]
        if not back:
            return
        now = time.monotonic()
        failing = dict(self._failing)
        for partition in back:
            since, _ = failing.pop(partition)
            if partition in self._said:
                self._said.discard(partition)
                log.info(
                    "state of %s[%d]: its changes reach the changelog %s again, after %.0f s",
                    self._topic, partition, self._changelog, now - since,
                )  # fmt: skip
        self._failing = failing

    def failing(self, partition: int) -> bool:
        """Whether ``partition``'s latest changelog write failed (and none succeeded since)."""
        return partition in self._failing

    def forget(self, partitions: Iterable[int]) -> None:
        """Partitions given up."""
        gone = set(partitions)
        self._failing = {p: f for p, f in self._failing.items() if p not in gone}
        self._said -= gone

    def look(self) -> None:
        """Say once, for the partitions past the bound that were not said yet, that their
        state is not durable (one ERROR for all of them)."""
        new = [found for found in self.not_durable() if found.partition not in self._said]
        if not new:
            return
        self._said.update(found.partition for found in new)
        named = ", ".join(f"{self._topic}[{found.partition}]" for found in new)
        log.error(
            "state of %s is not durable: its changes have not reached the changelog %s for "
            "%.0f s (%s); they are kept in memory and nothing of it is committed until they "
            "do. Is the changelog topic still there? (a restart on a changelog created again "
            "refuses to start the partition unless state_changelog_behind says what to do)",
            named, self._changelog, max(f.seconds for f in new), new[0].error,
        )  # fmt: skip

    def not_durable(self) -> tuple[NotDurable, ...]:
        """The partitions failing for longer than the bound, by partition."""
        now = time.monotonic()
        return tuple(
            NotDurable(self._topic, partition, self._changelog, now - since, error)
            for partition, (since, error) in sorted(self._failing.items())
            if now - since >= self._after
        )
