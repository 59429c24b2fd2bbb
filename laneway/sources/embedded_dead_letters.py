"""Dead letters on the embedded log: records appended to ``<topic>.dlq``-style topics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from laneway.errors import LanewayError
from laneway.types import Header, Message

if TYPE_CHECKING:
    from laneway.sources.embedded import EmbeddedLog

Done = Callable[[str | None], None]

WRITE_TIMEOUT = 1.0
"""Seconds a dead-letter append may wait for room in a bounded log before it is retried."""


class EmbeddedDeadLetters:
    """Appends dead letters to the same :class:`~laneway.EmbeddedLog`.

    A missing dead-letter topic is created with the source topic's partition count.
    Appends are immediate, but acknowledgements are still handed back through
    :meth:`poll`, like on Kafka. With ``capacity`` set, subscribe a group to the
    dead-letter topic (or it fills up and later dead letters wait, their partition's
    commits with them).
    """

    def __init__(self, log: EmbeddedLog) -> None:
        self._log = log
        self._acknowledged: list[tuple[Done, str | None]] = []

    def write(self, topic: str, message: Message, headers: Sequence[Header], done: Done) -> None:
        try:
            if topic not in self._log.topics():
                self._log.create_topic(topic, partitions=self._log.partitions(message.topic))
            _, offset = self._log.produce(
                topic, value=message.value, key=message.key, headers=headers, timeout=WRITE_TIMEOUT
            )
        except LanewayError as error:
            self._acknowledged.append((done, f"{type(error).__name__}: {error}"))
            return
        self._acknowledged.append((done, None if offset >= 0 else "dropped: the log is full"))

    def poll(self) -> None:
        acknowledged, self._acknowledged = self._acknowledged, []
        for done, error in acknowledged:
            done(error)

    def close(self, timeout: float) -> None:
        self.poll()
