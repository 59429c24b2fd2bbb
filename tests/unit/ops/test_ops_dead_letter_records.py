"""Reading dead letters back: laneway's headers read defensively, the headers of a replay,
the selection (--where, --since, --until) and the replay group's default name."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from laneway.control.dead_letters.router import dead_letter_headers
from laneway.errors import ConfigError
from laneway.ops.dlq.records import REPLAY_COUNT, DeadLetter
from laneway.ops.dlq.replay import Pacer, batch_size, default_group, internal, named_for
from laneway.ops.dlq.selection import Selection, parse_time
from laneway.types import Failure, Message

NOW_MS = 1_764_081_000_000


def letter(headers: list[tuple[str, bytes | None]], timestamp: int = NOW_MS) -> DeadLetter:
    return DeadLetter.of(Message("orders.dlq", 0, 7, b"k", b"v", tuple(headers), timestamp))


def routed(error_type: str = "ValueError", message: str = "bad amount") -> DeadLetter:
    """A dead letter with the headers the router really writes."""
    original = Message("orders", 3, 41, b"acct-1", b"{}", (("trace", b"t1"),), NOW_MS - 5)
    headers = dead_letter_headers(Failure(original, error_type, message, 3, "Traceback..."))
    return letter(headers)


def test_the_routers_headers_are_read_back() -> None:
    found = routed()
    assert (found.error_type, found.error_message) == ("ValueError", "bad amount")
    assert (found.original_topic, found.original_partition, found.replays) == ("orders", 3, 0)
    assert found.problem is None and found.original_problem() is None


def test_a_replay_drops_the_dead_letter_headers_and_counts_itself() -> None:
    first = routed().replay_headers()
    assert first == [("trace", b"t1"), (REPLAY_COUNT, b"1")]
    again = letter([*first, ("laneway.error.type", b"KeyError")]).replay_headers()
    assert again == [("trace", b"t1"), (REPLAY_COUNT, b"2")]


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ([], "no laneway.original.topic header"),
        ([("laneway.original.topic", b"bad topic!")], "is not a valid topic name"),
        ([("laneway.original.topic", b"\xff\xfe")], "is not a valid topic name"),
        ([("laneway.original.topic", b"orders")], "no usable laneway.original.partition"),
        (
            [("laneway.original.topic", b"orders"), ("laneway.original.partition", b"-1")],
            "no usable laneway.original.partition",
        ),
    ],
)
def test_unusable_origins_are_named(headers: list[tuple[str, bytes | None]], problem: str) -> None:
    assert problem in (letter(headers).original_problem() or "")


def test_a_replay_count_that_is_not_a_count_is_a_problem_not_a_crash() -> None:
    assert letter([(REPLAY_COUNT, b"many")]).replays is None
    assert "not a whole number" in (letter([(REPLAY_COUNT, b"many")]).problem or "")
    assert letter([(REPLAY_COUNT, b"1"), (REPLAY_COUNT, b"2")]).replays == 2


def test_a_second_replay_count_cannot_lower_the_first() -> None:
    # Before: the last header won, so a letter carrying 5 and then a forged 0 passed the
    # loop guard and went round again.
    forged = letter([(REPLAY_COUNT, b"5"), (REPLAY_COUNT, b"0")])
    assert forged.replays == 5
    assert forged.replay_headers() == [(REPLAY_COUNT, b"6")]


def test_where_clauses_on_one_field_are_alternatives_and_fields_combine() -> None:
    selection = Selection.parse(["type=ValueError", "type=KeyError", "message~amount"])
    assert selection.matches(routed("ValueError", "bad amount"))
    assert selection.matches(routed("KeyError", "no amount"))
    assert not selection.matches(routed("KeyError", "no customer"))
    assert not selection.matches(routed("TypeError", "bad amount"))
    assert Selection.parse(["topic=orders"]).matches(routed())
    assert not Selection.parse(["topic=payments"]).matches(routed())


@pytest.mark.parametrize("clause", ["type", "kind=ValueError", "message=x", "type="])
def test_a_bad_where_clause_names_the_option_and_the_forms(clause: str) -> None:
    with pytest.raises(ConfigError, match=r"--where .* expected type=NAME, topic=NAME or message~"):
        Selection.parse([clause])


def test_times_are_iso_8601_utc_by_default_or_ages() -> None:
    expected = int(datetime(2026, 11, 25, 14, tzinfo=timezone.utc).timestamp() * 1000)
    assert parse_time("2026-11-25T14:00:00Z", "--since") == expected
    assert parse_time("2026-11-25T14:00:00", "--since") == expected
    assert parse_time("2026-11-25T15:00:00+01:00", "--since") == expected
    assert parse_time("2h", "--since", now=expected / 1000 + 7200) == expected
    with pytest.raises(ConfigError, match="--until 'yesterday' is not valid"):
        parse_time("yesterday", "--until")


def test_since_and_until_bound_the_dead_letter_time() -> None:
    selection = Selection.parse([], since="2025-11-25T14:00:00Z", until="2025-11-25T15:00:00Z")
    inside = int(datetime(2025, 11, 25, 14, 30, tzinfo=timezone.utc).timestamp() * 1000)
    assert selection.matches(letter([], inside))
    assert not selection.matches(letter([], inside + 3_600_000))
    with pytest.raises(ConfigError, match=r"--since .* is after --until"):
        Selection.parse([], since="2025-11-25T16:00:00Z", until="2025-11-25T15:00:00Z")


def test_only_a_dead_letter_topic_named_as_laneway_names_them_has_a_home_topic() -> None:
    assert named_for("orders.dlq") == "orders"
    assert named_for("orders.dlq.dlq") == "orders.dlq"
    assert named_for(".dlq") is None and named_for("failures") is None
    assert internal("__consumer_offsets") and not internal("_schemas")


def test_the_default_replay_group_is_the_same_for_the_same_command() -> None:
    everything = Selection.parse([])
    assert default_group("orders.dlq", everything, None) == "laneway-dlq-replay.orders.dlq"
    aged = default_group("orders.dlq", Selection.parse(["type=X"], since="2h"), None)
    assert aged == default_group("orders.dlq", Selection.parse(["type=X"], since="2h"), None)
    others = {
        default_group("orders.dlq", Selection.parse(["type=Y"], since="2h"), None),
        default_group("orders.dlq", Selection.parse(["type=X"], since="2h"), "fixed"),
        default_group("orders.dlq", everything, "fixed"),
    }
    assert aged not in others and len(others) == 3


def test_the_batch_is_about_one_second_at_the_max_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (batch_size(None), batch_size(20), batch_size(0.5), batch_size(10_000)) == (
        500,
        20,
        1,
        500,
    )
    clock = [100.0]
    slept: list[float] = []
    monkeypatch.setattr("laneway.ops.dlq.replay.time.monotonic", lambda: clock[0])
    monkeypatch.setattr("laneway.ops.dlq.replay.time.sleep", slept.append)
    pacer = Pacer(10.0)
    for _ in range(3):
        pacer.wait(10)
    assert slept == [1.0, 2.0]  # 30 records at 10/s: the 2nd batch waits 1 s, the 3rd 2 s
