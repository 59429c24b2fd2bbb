"""Fair under skew, through real consumers on the embedded log and a real Kafka broker:
keyless messages in parallel, a quiet tenant served while another floods, urgent work
first — and key order kept in every case."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import recording
from topics import SOURCES, LogTopic

import laneway


@pytest.fixture
def record_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(recording.RECORD_DIR, str(tmp_path))
    return tmp_path


def tenant_of(message: laneway.Message) -> bytes:
    return (message.key or b"").split(b"-")[0]


def urgency(message: laneway.Message) -> int:
    return 9 if (message.key or b"").startswith(b"urgent") else 0


@pytest.mark.parametrize("source_kind", SOURCES)
@pytest.mark.parametrize("null_keys", ["partition", "unordered"])
def test_keyless_messages_run_in_parallel_only_when_asked(
    null_keys: str,
    source_kind: str,
    record_dir: Path,
    make_topic: Callable[[str, int], LogTopic],
) -> None:
    topic = make_topic(source_kind, 1)
    records = [(None, b"20")] * 40 + [(b"k%d" % (i % 4), b"5") for i in range(40)]
    positions = topic.produce(records)
    consumer = laneway.Consumer(
        topic.source("null-keys"),
        recording.handle,
        engine="thread",
        concurrency=16,
        null_keys=null_keys,  # type: ignore[arg-type]
        handle_signals=False,
    )
    consumer.run(max_messages=len(records), idle_timeout=60)
    calls = recording.read_calls(record_dir)
    assert {(c.partition, c.offset) for c in calls} == set(positions)
    keyless = [c for c in calls if c.key == "-"]
    keyed = [c for c in calls if c.key != "-"]
    assert recording.order_violations(keyed, "key") == []
    if null_keys == "partition":
        assert recording.peak_concurrency(keyless) == 1
        assert recording.order_violations(keyless, "key") == []
    else:
        assert recording.peak_concurrency(keyless) > 4, "keyless messages ran one at a time"


@pytest.mark.parametrize("source_kind", SOURCES)
@pytest.mark.parametrize("fair", [False, True], ids=["fifo", "fair"])
def test_a_quiet_tenant_is_served_while_another_floods(
    fair: bool,
    source_kind: str,
    record_dir: Path,
    make_topic: Callable[[str, int], LogTopic],
) -> None:
    """Tenant A's backlog of 1,200 messages is written before tenant B's 24: without
    fairness B waits for A's backlog; with it B's messages finish among the first few
    percent of everything."""
    topic = make_topic(source_kind, 4)
    flood = [(b"A-%d" % (i % 100), b"2") for i in range(1_200)]
    quiet = [(b"B-%d" % i, b"2") for i in range(24)]
    topic.produce(flood + quiet)
    consumer = laneway.Consumer(
        topic.source("tenants"),
        recording.handle,
        engine="thread",
        concurrency=8,
        fairness=laneway.Fairness(group_by=tenant_of) if fair else None,
        handle_signals=False,
    )
    consumer.run(max_messages=len(flood) + len(quiet), idle_timeout=60)
    calls = sorted(recording.read_calls(record_dir), key=lambda c: c.end)
    assert len(calls) == len(flood) + len(quiet) and recording.duplicates(calls) == 0
    assert recording.order_violations(calls, "key") == []
    b_done = max(i for i, c in enumerate(calls) if bytes.fromhex(c.key).startswith(b"B"))
    share = b_done / len(calls)
    if fair:
        assert share < 0.15, f"B's last message finished after {share:.0%} of all"
    else:
        assert share > 0.5, f"without fairness B should wait for A's backlog ({share:.0%})"


@pytest.mark.parametrize("source_kind", SOURCES)
@pytest.mark.parametrize("engine", ["thread", "async", "process"])
def test_urgent_work_starts_first_without_reordering_a_key(
    engine: str,
    source_kind: str,
    record_dir: Path,
    make_topic: Callable[[str, int], LogTopic],
) -> None:
    topic = make_topic(source_kind, 2)
    normal = [(b"n-%d" % (i % 40), b"2") for i in range(600)]
    urgent = [(b"urgent-%d" % i, b"2") for i in range(12)]
    topic.produce(normal + urgent)
    handler = recording.handle_async if engine == "async" else recording.handle
    consumer = laneway.Consumer(
        topic.source("urgent"),
        handler,
        engine=engine,  # type: ignore[arg-type]
        concurrency=2 if engine == "process" else 8,
        priority=urgency,
        handle_signals=False,
    )
    consumer.run(max_messages=len(normal) + len(urgent), idle_timeout=60)
    calls = sorted(recording.read_calls(record_dir), key=lambda c: c.start)
    assert len(calls) == len(normal) + len(urgent) and recording.duplicates(calls) == 0
    assert recording.order_violations(calls, "key") == []
    started = [i for i, c in enumerate(calls) if bytes.fromhex(c.key).startswith(b"urgent")]
    assert max(started) < len(calls) * 0.2, f"urgent work started late: {started}"
