"""Acknowledging records one by one: the contract between a share-group source and
:class:`~laneway.sources.share.progress.ShareProgress`.

:class:`Acknowledgement` is the decision for one record (KIP-932's accept, release or
reject); :class:`RecordAcknowledger` is what a source must offer for ShareProgress to make
those decisions and watch the group's record lock
(:class:`~laneway.sources.share.source.KafkaShareSource` implements it).
"""

from __future__ import annotations

import enum
from typing import Protocol

from laneway.types import Message


class Acknowledgement(str, enum.Enum):
    """How a record of a share group is acknowledged (KIP-932)."""

    ACCEPT = "accept"
    RELEASE = "release"
    REJECT = "reject"


class RecordAcknowledger(Protocol):
    """The capability of a source that acknowledges records one by one (a share group)."""

    def acknowledge(self, messages: list[Message], kind: Acknowledgement) -> None:
        """Acknowledge ``messages`` locally; they reach the broker with the next fetch or
        :meth:`flush`."""

    def flush(self) -> bool:
        """Send the acknowledgements made since the last fetch or flush; True if any."""

    def refused(self) -> dict[str, int]:
        """Acknowledgements the broker refused since the last call, per topic."""

    @property
    def awaiting_acknowledgement(self) -> int:
        """Records of the latest fetch that must be acknowledged before the source can
        fetch again (0 when it can, or still holds fetched records to return)."""

    @property
    def unacknowledged(self) -> int:
        """Records of the latest fetch not acknowledged yet."""

    @property
    def acquired_at(self) -> float:
        """``time.monotonic()`` of the latest fetch (its records' locks started then)."""

    @property
    def lock_duration(self) -> float:
        """The group's record lock, in seconds."""

    @property
    def delivery_limit(self) -> int:
        """Deliveries after which the broker archives a record instead of redelivering."""
