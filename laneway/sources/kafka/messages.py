"""How a confluent-kafka record becomes a laneway :class:`~laneway.types.Message`, and the
leader epochs of the records a poll returned.

Shared by the consumer-group source and the share-group source. This loop runs for every
record a consumer reads, so it builds each Message with ``tuple.__new__`` (one C call, no
Python-level ``__new__``) and reads each field once. The leader epoch is not read per
record: :class:`PolledEpochs` reads it of the first and last record of each partition's
share of a batch, and of every record only where those two differ (a leader change).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence

from confluent_kafka import KafkaError
from confluent_kafka import Message as KafkaMessage

from laneway.errors import AccessDeniedError
from laneway.offsets.claim_epochs import UNKNOWN, EpochRuns
from laneway.sources.kafka.denials import is_permanent
from laneway.types import Message

Refusal = Callable[[KafkaError, "str | None"], AccessDeniedError]
"""Makes the error a permanent refusal of a record's topic (or of the group) raises."""


def messages_of(
    batch: Iterable[KafkaMessage],
    on_error: Callable[[KafkaError], None],
    count_deliveries: bool = False,
    refusal: Refusal | None = None,
) -> list[Message]:
    """The records of ``batch`` as Messages, in order; an error event is handed to
    ``on_error`` (which skips it or raises) instead. ``count_deliveries``: fill
    ``Message.delivery_count`` (share groups count; a consumer group does not).
    ``refusal``: an event that is a permanent refusal (a missing ACL, see
    :mod:`laneway.sources.kafka.denials`) raises what it makes of the error and the
    event's topic instead of going to ``on_error``."""
    messages: list[Message] = []
    append = messages.append
    new_message = tuple.__new__
    for m in batch:
        error = m.error()
        if error is not None:
            if refusal is not None and is_permanent(error):
                raise refusal(error, m.topic())
            on_error(error)
            continue
        # A consumed record's headers are a list of (str, bytes | None) or None.
        headers: list[tuple[str, bytes | None]] | None = m.headers()  # type: ignore[assignment]
        append(
            new_message(
                Message,
                (
                    m.topic(),
                    m.partition(),
                    m.offset(),
                    m.key(),
                    m.value(),
                    () if headers is None else tuple(headers),
                    m.timestamp()[1],
                    m.delivery_count() if count_deliveries else None,
                ),
            )
        )
    return messages


class PolledEpochs:
    """The leader epochs of the records a consumer's last polls returned (the
    :class:`~laneway.types.RecordEpochs` of a
    :class:`~laneway.sources.kafka.source.KafkaSource`).

    The source hands it each batch as librdkafka returned it with the Messages made of it
    (:meth:`polled`); the offset progress asks for the epochs of one partition's messages
    (:meth:`runs`). A record's epoch is the one its leader wrote it in
    (``Message.leader_epoch()``: the record batch's partition leader epoch, KIP-320); ``-1``
    where librdkafka does not know. The messages are found by identity: at the index the
    consumer's control loop passes (it hands each poll on as it came), else among the
    last eight polls that returned messages (a caller that sorted or gathered them); messages found
    in neither have no known epochs.
    """

    __slots__ = ("_polls",)

    KEPT_POLLS = 8

    def __init__(self) -> None:
        self._polls: deque[tuple[list[KafkaMessage], list[Message]]] = deque(maxlen=self.KEPT_POLLS)

    def polled(self, batch: list[KafkaMessage], messages: list[Message]) -> None:
        """The raw ``batch`` a poll made ``messages`` of (its error events skipped)."""
        if not messages:
            return
        raw = batch if len(batch) == len(messages) else [m for m in batch if m.error() is None]
        self._polls.append((raw, messages))

    def runs(self, start: int, messages: Sequence[Message]) -> EpochRuns | None:
        if not messages or not self._polls:
            return None
        raw, polled = self._polls[-1]
        end = start + len(messages) - 1
        if end < len(polled) and polled[start] is messages[0] and polled[end] is messages[-1]:
            first, last = _epoch(raw[start]), _epoch(raw[end])
            if first == last:  # epochs only grow along a partition's offsets
                return [(messages[0].offset, first)]
            records = raw[start : end + 1]
        else:
            found = self._find(messages)
            if found is None:
                return None
            records = found
        runs: EpochRuns = []
        for record, message in zip(records, messages, strict=True):
            epoch = _epoch(record)
            if not runs or runs[-1][1] != epoch:
                runs.append((message.offset, epoch))
        return runs

    def _find(self, messages: Sequence[Message]) -> list[KafkaMessage] | None:
        """The raw record of each of ``messages`` in the kept polls, else ``None``."""
        where = {
            id(message): record
            for raw, polled in self._polls
            for record, message in zip(raw, polled, strict=True)
        }
        records: list[KafkaMessage] = []
        for message in messages:
            record = where.get(id(message))
            if record is None:
                return None
            records.append(record)
        return records


def _epoch(record: KafkaMessage) -> int:
    epoch = record.leader_epoch()
    return UNKNOWN if epoch is None else epoch
