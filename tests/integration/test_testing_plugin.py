"""The ``laneway`` pytest plugin, as a user's project meets it: a test module of theirs,
run by pytest in a subprocess, with the fixtures found through the entry point alone."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

USER_TESTS = """
import asyncio
import collections
import threading

import laneway


def test_every_message_reaches_the_handler(laneway_run):
    seen = []

    def handle(message: laneway.Message) -> None:
        seen.append((message.key, message.value))

    run = laneway_run(handle, [(b"a", b"1"), ("b", "2"), (None, b"3"), b"4"])
    assert sorted(seen, key=repr) == sorted(
        [(b"a", b"1"), (b"b", b"2"), (None, b"3"), (None, b"4")], key=repr
    )
    assert run.stats.processed == 4 and run.stats.failed == 0
    run.assert_no_dead_letters()


def test_a_failing_message_goes_to_dead_letters_alone(laneway_run):
    def handle(message: laneway.Message) -> None:
        if message.value == b"bad":
            raise ValueError("cannot parse " + message.value.decode())

    run = laneway_run(
        handle,
        [("k1", "ok"), ("k2", "bad", [("source", b"web")]), ("k3", "ok")],
        max_retries=1,
        retry_backoff=0.01,
    )
    [letter] = run.assert_dead_lettered("k2", error=ValueError)
    assert letter.value == b"bad" and letter.headers == (("source", b"web"),)
    assert letter.error_message == "cannot parse bad" and letter.attempts == 2
    assert "ValueError" in letter.traceback
    assert letter.topic == run.topic
    assert run.stats.processed == 2 and run.stats.failed == 1


def test_async_handlers_keep_each_key_in_order(laneway_run):
    seen = collections.defaultdict(list)

    async def handle(message: laneway.Message) -> None:
        await asyncio.sleep(0.001)
        seen[message.key].append(int(message.value))

    records = [(f"key-{i % 5}", str(i)) for i in range(200)]
    run = laneway_run(handle, records, engine="async", concurrency=16, partitions=2)
    assert run.stats.processed == 200
    assert all(values == sorted(values) for values in seen.values()), seen


def test_process_engine_handlers_run_in_workers(laneway_run):
    run = laneway_run(double, [("k", "1"), ("k", "2")], engine="process", concurrency=1)
    assert run.stats.processed == 2


def double(message: laneway.Message) -> None:
    assert int(message.value) * 2 > 0


def test_the_log_fixture_is_an_embedded_log(laneway_log):
    laneway_log.create_topic("orders", partitions=2)
    laneway_log.produce("orders", value=b"x", key=b"k")
    consumer = laneway.Consumer(
        laneway_log.subscribe(["orders"], group="g"), lambda m: None, handle_signals=False
    )
    assert consumer.run(max_messages=1).processed == 1


def test_fails_when_a_message_was_dead_lettered(laneway_run):
    def handle(message: laneway.Message) -> None:
        raise KeyError("no such account")

    run = laneway_run(handle, [("acct-9", "10.00")], max_retries=0)
    run.assert_no_dead_letters()


def test_fails_when_other_keys_were_dead_lettered(laneway_run):
    def handle(message: laneway.Message) -> None:
        if message.key == b"k2":
            raise RuntimeError("down")

    run = laneway_run(handle, [("k1", "a"), ("k2", "b")], max_retries=0)
    run.assert_dead_lettered("k1", error=RuntimeError)


def test_fails_when_the_error_differs(laneway_run):
    def handle(message: laneway.Message) -> None:
        raise RuntimeError("down")

    run = laneway_run(handle, [("k1", "a")], max_retries=0)
    run.assert_dead_lettered("k1", error=ValueError)


def test_fails_when_the_run_does_not_finish_in_time(laneway_run):
    release = threading.Event()

    def handle(message: laneway.Message) -> None:
        release.wait(1.0)

    laneway_run(handle, ["x"], timeout=0.3, drain_timeout=0.05)
"""


def test_the_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    [plugin] = [e for e in entry_points(group="pytest11") if e.value == "laneway.testing"]
    assert plugin.name == "laneway"


def test_users_test_their_handlers_with_the_fixtures_and_get_clear_failures(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_user_handlers=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=5, failed=4)
    result.stdout.re_match_lines(
        [
            r".*AssertionError: 1 message\(s\) went to dead letters: laneway-test-1\[\d\]@0 "
            r"key b'acct-9': KeyError: 'no such account' after 1 attempt\(s\)",
            r".*AssertionError: dead-lettered keys \[b'k2'\] are not the expected \[b'k1'\].*",
            r".*AssertionError: expected every dead letter to come from ValueError, but: .*"
            r"RuntimeError: down after 1 attempt\(s\)",
            r".*AssertionError: the consumer handled 0 of 1 messages within timeout=0.3 s.*",
        ],
        consecutive=False,
    )
