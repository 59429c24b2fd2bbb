"""A transactional producer that fails ends the run with laneway's TransactionError (its
inputs run again in the next life), never the client's own KafkaException, and nothing
commits after it. Seen on the three-broker cluster with the transaction coordinator's
broker killed: mid-commit, it left the producer in INVALID_TXN_STATE, raised from ``poll``;
with records timed out, the abort raised a fatal fence."""

from __future__ import annotations

from typing import cast

import pytest
from confluent_kafka import KafkaError, KafkaException

from laneway.errors import TransactionError
from laneway.sources.kafka.transactions import GroupMember, KafkaTransaction
from laneway.types import CommitPosition


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


class FencedAfterTimeouts:
    """A producer whose records timed out (the coordinator's broker was killed) and whose
    abort then raises the fatal fence librdkafka raised there on the three-broker cluster."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort")
        fence = "Producer attempted an operation with an old epoch"
        raise KafkaException(KafkaError(KafkaError._FENCED, fence, fatal=True))

    def send_offsets_to_transaction(self, *args: object) -> None:
        self.calls.append("send offsets")

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append("commit")


def fenced_transaction() -> tuple[KafkaTransaction, FencedAfterTimeouts]:
    transaction = KafkaTransaction(
        {"bootstrap.servers": "127.0.0.1:9"}, cast(GroupMember, object()), "member-1", "test"
    )
    producer = FencedAfterTimeouts()
    transaction._producer = producer  # type: ignore[assignment]
    transaction._ready = True
    transaction._failed = "writing to out failed: Local: Message timed out"
    return transaction, producer


def test_a_failed_abort_ends_the_run_with_a_transaction_error() -> None:
    """Not the client's KafkaException: that escaped the consumer's shutdown before it
    closed the source and the engine, and left the member in its group."""
    transaction, _ = fenced_transaction()
    with pytest.raises(TransactionError, match=r"timed out, and aborting failed: .*old epoch"):
        transaction.commit({("in", 0): CommitPosition(3)})


def test_nothing_commits_after_a_transactional_call_failed() -> None:
    """The failed transaction's results are gone: a later commit (the shutdown's, the
    revocation's) must not commit offsets past their inputs, nor wait on a dead producer."""
    transaction, producer = fenced_transaction()
    with pytest.raises(TransactionError):
        transaction.commit({("in", 0): CommitPosition(3)})
    with pytest.raises(TransactionError, match=r"^member-1: not committed, a call failed: "):
        transaction.commit({("in", 0): CommitPosition(5)})
    assert producer.calls == ["begin", "abort"]
