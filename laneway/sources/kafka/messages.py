"""How a confluent-kafka record becomes a laneway :class:`~laneway.types.Message`.

Shared by the consumer-group source and the share-group source. This loop runs for every
record a consumer reads, so it builds each Message with ``tuple.__new__`` (one C call, no
Python-level ``__new__``) and reads each field once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from confluent_kafka import KafkaError
from confluent_kafka import Message as KafkaMessage

from laneway.errors import AccessDeniedError
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
