"""A fatal producer error raised while the transactional producer is served ends the run
with laneway's TransactionError (its inputs run again in the next life), not the client's
own KafkaException. Seen on the three-broker cluster: the transaction coordinator's broker
killed mid-commit left the producer in INVALID_TXN_STATE, raised from ``poll``."""

from __future__ import annotations

from typing import cast

import pytest
from confluent_kafka import KafkaError, KafkaException

from laneway.errors import TransactionError
from laneway.sources.kafka.transactions import GroupMember, KafkaTransaction


class FatalOnPoll:
    """A producer whose poll raises what librdkafka raised there."""

    def __init__(self) -> None:
        self.aborted = 0

    def poll(self, timeout: float) -> int:
        raise KafkaException(
            KafkaError(KafkaError.INVALID_TXN_STATE, "Failed to end transaction", fatal=True)
        )

    def abort_transaction(self, timeout: float) -> None:
        self.aborted += 1


def test_a_fatal_error_from_poll_ends_the_run_with_a_transaction_error() -> None:
    transaction = KafkaTransaction(
        {"bootstrap.servers": "127.0.0.1:9"}, cast(GroupMember, object()), "member-1", "test"
    )
    transaction._producer = FatalOnPoll()  # type: ignore[assignment]
    transaction._ready = True
    with pytest.raises(TransactionError, match=r"^member-1: ") as raised:
        transaction.poll()
    assert isinstance(raised.value.__cause__, KafkaException)
