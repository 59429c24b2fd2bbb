"""What ``laneway lag`` and ``laneway top`` read about a group: its committed positions
(offsets and commit metadata) and the log's ends, from a Kafka cluster (an admin client,
no group membership) or a durable embedded log directory.

Kafka: the committed offsets come from ``OffsetFetch`` (``list_consumer_group_offsets``),
the ends from ``ListOffsets`` (``latest``: the high watermark; ``earliest`` for partitions
the group never committed), the topics from the group's commits and its members'
assignments unless ``--topic`` names them.

A share group (``--share``) commits no offsets, and confluent-kafka (2.16) can neither
list, describe nor read the start offsets of a share group (Kafka's ``ListGroups`` answer
leaves it out, ``DescribeShareGroupOffsets`` of KIP-932 has no binding): to it a share
group looks like a group that does not exist. Its snapshot says so and carries the log
ends of the topics given.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass

from laneway.errors import LanewayError
from laneway.offsets.backlog import GroupBacklog, group_backlog
from laneway.ops.connection import OpsError
from laneway.service import exits
from laneway.sources.backends import open_positions
from laneway.sources.targets import Target

SHARE_GROUP_NOTE = (
    "a share group: it commits no offsets, and confluent-kafka cannot read a share "
    "group's start offsets yet (DescribeShareGroupOffsets, KIP-932), so its lag and "
    "backlog are unknown here; the log ends are shown (kafka-share-groups.sh --describe "
    "--offsets shows the start offsets, and each member's /metrics its own figures)"
)


@dataclass(frozen=True)
class Snapshot:
    """A group's backlog at one moment (``taken``: ``time.monotonic()``), and a ``note``
    when the figures are incomplete (a share group)."""

    group: str
    backlog: GroupBacklog
    taken: float
    share_group: bool = False
    note: str = ""

    def as_json(self) -> dict[str, object]:
        """``laneway lag --json``: the contract's keys; for a share group also
        ``share_group`` and ``note``, with ``lag`` and ``backlog`` unknown (null)."""
        if not self.share_group:
            return self.backlog.as_json()
        unknown = dict.fromkeys(("committed", "lag", "finished_beyond", "backlog"))
        return {
            "partitions": [{**p.as_json(), **unknown} for p in self.backlog.partitions],
            "lag": None,
            "backlog": None,
            "share_group": True,
            "note": self.note,
        }


class GroupReader:
    """Reads snapshots of one group, again and again (``laneway top``), from a Kafka
    cluster or an embedded log directory; :meth:`close` when done. A snapshot costs a
    handful of requests (groups, committed offsets, members, log ends), so an interval
    of a second or more keeps it light on the cluster."""

    def __init__(
        self, target: Target, group: str, topics: Sequence[str], share: bool = False
    ) -> None:
        if share and not topics:
            raise OpsError(
                "a share group's topics cannot be read from the cluster: give --topic",
                exits.USAGE,
            )
        self.group = group
        self.topics = tuple(topics)
        self.share = share
        self._source = open_positions(target)
        try:
            self._source.check_topics(self.topics)
        except BaseException:
            self.close()
            raise

    def snapshot(self) -> Snapshot:
        """The group's backlog now; :class:`OpsError` (exit 3) for an unknown group."""
        source, group = self._source, self.group
        if self.share:
            ends = source.ends(source.partitions(self.topics))
            backlog = group_backlog({}, ends, ends)
            return Snapshot(group, backlog, time.monotonic(), True, SHARE_GROUP_NOTE)
        committed = source.committed(group, self.topics)
        assigned = source.assigned(group)
        if not committed and not assigned and not source.group_exists(group):
            raise OpsError(
                f"unknown group {group!r}: it has no committed offsets and no members on "
                f"{source.where} (for a share group, which the client cannot see, add --share)",
                exits.SOURCE,
            )
        if self.topics:
            partitions = source.partitions(self.topics)
        else:
            partitions = sorted(set(committed) | assigned)
        ends = source.ends(partitions)
        never = [p for p in partitions if p not in committed]
        starts = source.starts(never) if never else {}
        return Snapshot(group, group_backlog(committed, ends, starts, partitions), time.monotonic())

    def close(self) -> None:
        with contextlib.suppress(LanewayError):
            self._source.close()
