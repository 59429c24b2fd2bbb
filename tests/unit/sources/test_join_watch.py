"""JoinWatch: a member's join judged by what the group coordinator answers (fakes for the
admin client and the consumer; the real brokers are in tests/compat)."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from laneway.sources.kafka import join_watch
from laneway.sources.kafka.join_watch import FALL_BACK, JoinWatch


@dataclass
class Member:
    member_id: str


@dataclass
class Coordinator:
    id: int = 1
    host: str = "127.0.0.1"
    port: int = 9092


@dataclass
class Described:
    members: list[Member]
    state: str = "STABLE"
    coordinator: Coordinator = field(default_factory=Coordinator)


class FakeAdmin:
    """Answers each describe with the next of ``answers`` (a list of member ids, or an
    exception)."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.asked = 0

    def describe_consumer_groups(self, groups: list[str], request_timeout: float) -> Any:
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        done: Future[Any] = Future()
        if isinstance(answer, Exception):
            done.set_exception(answer)
        else:
            done.set_result(Described([Member(m) for m in answer]))
        return {groups[0]: done}


class FakeConsumer:
    def memberid(self) -> str:
        return "me"


def watch(admin: FakeAdmin, fallback: bool = True) -> JoinWatch:
    return JoinWatch("src", "g", {}, fallback, admin=lambda config: admin)


def run_until(watcher: JoinWatch, start: float, end: float) -> list[tuple[float, str | None]]:
    """Check every 0.1 s from ``start`` to ``end``; the verdicts that were not None."""
    verdicts = []
    now = start
    while now <= end:
        verdict = watcher.check(FakeConsumer(), now)  # type: ignore[arg-type]
        if verdict is not None:
            verdicts.append((round(now, 1), verdict))
        now += 0.1
    return verdicts


def test_a_member_the_coordinator_lists_has_joined_without_partitions() -> None:
    admin = FakeAdmin([["other", "me"]])
    watcher = watch(admin)
    watcher.subscribed("consumer", 0.0)
    assert run_until(watcher, 0.0, 10.0) == []
    assert watcher.joined and watcher.waiting() == ""
    assert admin.asked == 1


def test_an_assignment_proves_the_join_and_nothing_is_asked() -> None:
    admin = FakeAdmin([[]])
    watcher = watch(admin)
    watcher.subscribed("consumer", 0.0)
    watcher.assigned()
    assert run_until(watcher, 0.0, 10.0) == []
    assert admin.asked == 0


def test_a_kip848_member_never_taken_in_falls_back_within_seconds() -> None:
    watcher = watch(FakeAdmin([[]]))
    watcher.subscribed("consumer", 0.0)
    verdicts = run_until(watcher, 0.0, 10.0)
    assert verdicts and verdicts[0][1] == FALL_BACK
    assert verdicts[0][0] <= join_watch.FIRST_LOOK_S + join_watch.MISSES * 1.2


def test_answers_that_are_errors_decide_nothing() -> None:
    loading = KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
    watcher = watch(FakeAdmin([loading, loading, loading, loading, ["me"]]))
    watcher.subscribed("consumer", 0.0)
    assert run_until(watcher, 0.0, 12.0) == []
    assert watcher.joined


def test_a_user_chosen_protocol_is_not_replaced_but_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    admin = FakeAdmin([[]])
    watcher = watch(admin, fallback=False)
    watcher.subscribed("consumer", 0.0)
    with caplog.at_level(logging.INFO, logger="laneway.sources.kafka.source"):
        assert run_until(watcher, 0.0, join_watch.JOIN_DEADLINE_S + 5) == []
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1
        assert "not in group 'g'" in errors[0].getMessage()
        assert "group.protocol=consumer" in errors[0].getMessage()
        assert "state STABLE with 0 member(s)" in watcher.waiting()
        admin.answers = [["me"]]
        run_until(watcher, join_watch.JOIN_DEADLINE_S + 5, join_watch.JOIN_DEADLINE_S + 8)
    assert watcher.joined and watcher.waiting() == ""
    assert any("is in group 'g' now" in r.getMessage() for r in caplog.records)


def test_a_classic_member_never_taken_in_is_an_error_after_the_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watcher = watch(FakeAdmin([[]]))
    watcher.subscribed("classic", 0.0)
    with caplog.at_level(logging.ERROR, logger="laneway.sources.kafka.source"):
        assert run_until(watcher, 0.0, join_watch.JOIN_DEADLINE_S - 1) == []
        assert caplog.records == [] and watcher.waiting() == ""
        run_until(watcher, join_watch.JOIN_DEADLINE_S - 1, join_watch.JOIN_DEADLINE_S + 2)
    assert len(caplog.records) == 1
    assert "group.protocol=classic" in watcher.waiting()


def test_a_run_ending_before_the_deadline_still_says_why_it_read_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watcher = watch(FakeAdmin([[]]), fallback=False)
    watcher.subscribed("consumer", 0.0)
    run_until(watcher, 0.0, 6.0)
    with caplog.at_level(logging.ERROR, logger="laneway.sources.kafka.source"):
        watcher.close()
    assert len(caplog.records) == 1
    assert "not in group 'g' with group.protocol=consumer" in caplog.records[0].getMessage()
