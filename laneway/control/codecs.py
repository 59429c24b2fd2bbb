"""MessageCodecs: the consumer's deserializers and serializers, as the control plane
applies them (see :mod:`laneway.serde`).

* :meth:`MessageCodecs.decoded`, once per batch the plane dispatches (sync, thread and
  async engines): the messages with their typed views, and the failures of those that did
  not decode, which go to the dead-letter path at once (never to the engine, never
  retried). The process engine decodes in its workers: nothing is decoded here.
* :meth:`MessageCodecs.undecodable`, on the failures an engine reports: those of records a
  process worker could not decode, to be counted and dead-lettered the same way (a share
  group would otherwise release them for redelivery, a retry).
* :meth:`MessageCodecs.encoded`, once per batch of handler results: every record in bytes,
  and the failures of the messages whose results could not be encoded.
"""

from __future__ import annotations

from laneway.config import ConsumerConfig
from laneway.control.encoding import Encoding, Group
from laneway.options import EngineKind
from laneway.serde.codec import DESERIALIZATION
from laneway.serde.decoding import Decoding
from laneway.types import Failure, Message


class MessageCodecs:
    """Decoding and encoding for one consumer; :attr:`failures` counts the messages that
    did not decode (``stats().deserialization_failures``). Used from the control thread."""

    def __init__(self, config: ConsumerConfig) -> None:
        self._decoding = Decoding(
            config.value_deserializer, config.key_deserializer, config.metrics
        )
        self._here = self._decoding.active and config.engine is not EngineKind.PROCESS
        self._in_workers = self._decoding.active and not self._here
        self._encoding = Encoding(config.value_serializer, config.key_serializer)

    @property
    def failures(self) -> int:
        """Messages that did not decode so far."""
        return self._decoding.failures

    def decoded(self, messages: list[Message]) -> tuple[list[Message], list[Failure]]:
        """The messages to dispatch (with their views) and those that did not decode."""
        if not self._here:
            return messages, []
        return self._decoding.decode(messages)

    def undecodable(self, failed: list[Failure]) -> tuple[list[Failure], list[Failure]]:
        """``failed`` split into the other failures and those of records a worker could
        not decode (counted)."""
        if not self._in_workers or not any(f.error_type == DESERIALIZATION for f in failed):
            return failed, []
        undecodable = [f for f in failed if f.error_type == DESERIALIZATION]
        self._decoding.counted(undecodable)
        return [f for f in failed if f.error_type != DESERIALIZATION], undecodable

    def encoded(self, groups: list[Group]) -> tuple[list[Group], list[Failure]]:
        """The result groups in bytes, and the failures of those that could not be."""
        return self._encoding.encode(groups)
