"""KeyCircuitBreaker: when a key's circuit opens, what it diverts, when it closes."""

from __future__ import annotations

import threading

from laneway.engines.circuit import KeyCircuitBreaker, open_failure
from laneway.types import Failure, Message


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def message(key: bytes, offset: int = 0, partition: int = 0) -> Message:
    return Message("orders", partition, offset, key, b"v", [], 0)


def test_the_threshold_th_failure_opens_the_key_s_circuit_only() -> None:
    breaker = KeyCircuitBreaker(3, 30.0, Clock())
    assert [breaker.record_failure(message(b"bad")) for _ in range(3)] == [False, False, True]
    assert breaker.is_open(message(b"bad", 9))
    assert not breaker.is_open(message(b"good"))
    assert not breaker.is_open(message(b"bad", partition=1)), "a key is per partition"


def test_failures_while_open_neither_count_nor_reopen_it() -> None:
    clock = Clock()
    breaker = KeyCircuitBreaker(2, 30.0, clock)
    breaker.record_failure(message(b"bad"))
    assert breaker.record_failure(message(b"bad"))
    # Messages of the key that were running when it opened fail too: told once, not again.
    assert [breaker.record_failure(message(b"bad")) for _ in range(10)] == [False] * 10
    clock.now += 30.0
    assert not breaker.is_open(message(b"bad"))
    assert not breaker.record_failure(message(b"bad")), "the count restarts when it closes"
    assert breaker.record_failure(message(b"bad"))


def test_admit_diverts_the_open_keys_in_order() -> None:
    breaker = KeyCircuitBreaker(1, 30.0, Clock())
    batch = [message(b"a", 0), message(b"bad", 1), message(b"a", 2), message(b"bad", 3)]
    diverted: list[Failure] = []
    assert breaker.admit(batch, diverted) is batch  # nothing open: the list as it is
    breaker.record_failure(message(b"bad"))
    assert breaker.admit(batch, diverted) == [batch[0], batch[2]]
    assert diverted == [open_failure(batch[1]), open_failure(batch[3])]
    assert diverted[0].error_type == "CircuitOpen" and diverted[0].attempts == 0


def test_record_counts_only_messages_that_ran() -> None:
    breaker = KeyCircuitBreaker(1, 30.0, Clock())
    breaker.record([open_failure(message(b"bad"))])
    assert not breaker.is_open(message(b"bad"))
    breaker.record([Failure(message(b"bad"), "ValueError", "x", 1)])
    assert breaker.is_open(message(b"bad"))


def test_threads_opening_a_circuit_together_open_it_once() -> None:
    breaker = KeyCircuitBreaker(1000, 30.0)
    opened: list[bool] = []
    lock = threading.Lock()

    def fail_many() -> None:
        mine = [breaker.record_failure(message(b"bad")) for _ in range(500)]
        with lock:
            opened.extend(mine)

    threads = [threading.Thread(target=fail_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert opened.count(True) == 1
    assert breaker.is_open(message(b"bad"))
