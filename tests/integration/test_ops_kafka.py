"""``laneway lag``, ``laneway top --once`` and ``laneway dlq`` against the real broker, on
a group a running ``laneway run`` holds by one slow key, and on dead letters a laneway
consumer wrote. The expected figures come from a plain confluent-kafka client."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_helpers import create_topic, plain_figures, produce, read_records, unique_name
from ops_app import finished
from ops_cli import command, environment, laneway, laneway_json
from service_runs import SUPPORT, Service, free_port, wait_until

import laneway as lw
from laneway.control.dead_letters.router import dead_letter_headers
from laneway.types import Failure, Message

FAST = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}


@pytest.fixture
def held_group(kafka_bootstrap: str, tmp_path: Path) -> Iterator[tuple[Service, dict[str, str]]]:
    """``laneway run`` on a 2-partition topic whose first record is the key ``slow``,
    held in its handler; 20 other keys finish."""
    topic, group = unique_name("ops-lag"), unique_name("ops-lag-group")
    create_topic(kafka_bootstrap, topic, 2)
    [(slow_partition, _)] = produce(kafka_bootstrap, topic, [(b"slow", b"held")])
    produce(kafka_bootstrap, topic, [(b"k%d" % i, b"%d" % i) for i in range(20)])
    release, records = tmp_path / "release", tmp_path / "records"
    service = Service(
        tmp_path,
        "ops_app:handle",
        [SUPPORT],
        {"OPS_RELEASE": str(release), "OPS_RECORDS": str(records)},
    )
    metrics_port = free_port()
    service.start(
        "--bootstrap-servers", kafka_bootstrap, "--group", group, "--topic", topic,
        "--engine", "thread", "--ordering", "key", "--concurrency", "8",
        "--commit-interval", "0.1", "--metrics-port", str(metrics_port),
        "--config", str(service.kafka_file),
    )  # fmt: skip
    info = {
        "topic": topic,
        "group": group,
        "release": str(release),
        "records": str(records),
        "metrics": f"http://127.0.0.1:{metrics_port}/metrics",
        "slow_partition": str(slow_partition),
    }
    try:
        yield service, info
    finally:
        release.touch()
        service.close()


@pytest.mark.kafka
def test_lag_and_top_while_a_key_holds_the_commit_point(
    kafka_bootstrap: str, held_group: tuple[Service, dict[str, str]], tmp_path: Path
) -> None:
    _, info = held_group
    topic, group = info["topic"], info["group"]

    slow = int(info["slow_partition"])

    def held_with_everything_else_committed() -> bool:
        figures = plain_figures(kafka_bootstrap, group, topic)
        return len(finished(info["records"])) == 20 and all(
            committed == (0 if p == slow else end) for p, (committed, end) in figures.items()
        )

    wait_until(held_with_everything_else_committed, 60, "every key but slow committed")
    time.sleep(0.5)  # a commit interval more: the metadata carries the last finished ones
    figures = plain_figures(kafka_bootstrap, group, topic)
    done = finished(info["records"])
    expected = []
    for p, (committed, end) in sorted(figures.items()):
        assert committed is not None
        beyond = sum(1 for q, o in done if q == p and committed < o < end)
        expected.append(
            {"topic": topic, "partition": p, "committed": committed, "end": end,
             "lag": end - committed, "finished_beyond": beyond,
             "backlog": end - committed - beyond}
        )  # fmt: skip
    lag = sum(e["lag"] for e in expected)
    backlog = sum(e["backlog"] for e in expected)
    assert backlog == 1 and lag > backlog  # only the slow key is left

    connection = ("--bootstrap-servers", kafka_bootstrap, "--group", group)
    for found in (
        laneway_json("lag", *connection, "--topic", topic, cwd=tmp_path),
        laneway_json("lag", *connection, cwd=tmp_path),  # the group's own partitions
    ):
        assert found == {"partitions": expected, "lag": lag, "backlog": backlog}

    top = laneway(
        "top", *connection, "--once", "--interval", "0.5", "--metrics", info["metrics"],
        cwd=tmp_path,
    )  # fmt: skip
    assert top.returncode == 0, top.stderr
    rows = {tuple(line.split()[:6]) for line in top.stdout.splitlines()}
    held = next(e for e in expected if e["backlog"] == 1)
    assert (
        topic,
        str(held["partition"]),
        str(held["committed"]),
        str(held["end"]),
        "1",
        "1",
    ) in rows
    assert f"lag {lag}  backlog {backlog}" in top.stdout
    assert "members (1 of 1 answered)" in top.stdout and "dead letters 0.0/s" in top.stdout
    assert "in flight 1" in top.stdout  # the slow key

    Path(info["release"]).touch()
    wait_until(
        lambda: all(c == e for c, e in plain_figures(kafka_bootstrap, group, topic).values()),
        30,
        "the slow key committed",
    )
    after = laneway_json("lag", *connection, cwd=tmp_path)
    assert (after["lag"], after["backlog"]) == (0, 0)


@pytest.mark.kafka
def test_lag_exit_codes_for_unknown_groups_and_topics(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = unique_name("ops-known")
    create_topic(kafka_bootstrap, topic, 1)
    group = laneway("lag", "--bootstrap-servers", kafka_bootstrap, "--group", "no-such-group-x",
                    cwd=tmp_path)  # fmt: skip
    assert group.returncode == 3 and "unknown group 'no-such-group-x'" in group.stderr
    missing = laneway("lag", "--bootstrap-servers", kafka_bootstrap, "--group", "g", "--topic",
                      unique_name("nope"), cwd=tmp_path)  # fmt: skip
    assert missing.returncode == 3 and "unknown topic" in missing.stderr


def test_lag_of_an_unreachable_cluster_exits_3_naming_it(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{sock.getsockname()[1]}"
    done = laneway("lag", "--bootstrap-servers", closed, "--group", "g", cwd=tmp_path,
                   env={"LANEWAY_CONNECT_TIMEOUT": "1"})  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert f"cannot reach the Kafka cluster at {closed}" in done.stderr
    # one line: librdkafka's own connection failures are not written beside it
    assert done.stderr.splitlines() == [done.stderr.strip()], done.stderr
    assert done.stderr.startswith("laneway lag: error: ")


def dead_lettered(bootstrap: str, topic: str, count: int) -> dict[tuple[int, int], bytes]:
    """``count`` records in ``topic``, a third of which a laneway consumer fails
    (ValueError) and dead-letters to ``topic.dlq``. Returns those values by position."""
    create_topic(bootstrap, topic, 2)
    records = [(b"k%d" % i, b"bad-%d" % i if i % 3 == 0 else b"ok-%d" % i) for i in range(count)]
    placed = produce(bootstrap, topic, records)

    def handle(message: Message) -> None:
        if message.value and message.value.startswith(b"bad"):
            raise ValueError("bad amount")

    source = lw.KafkaSource(bootstrap, unique_name("ops-dlq-writer"), [topic], FAST)
    lw.Consumer(source, handle, max_retries=0, handle_signals=False).run(max_messages=count)
    pairs = zip(placed, records, strict=True)
    return {place: value for place, (_, value) in pairs if b"bad" in value}


def forged(bootstrap: str, dlq: str, original: str, entries: list[tuple[bytes, int]]) -> None:
    """Dead letters as the router writes them, for records of ``original`` partition 0,
    with the given values and replay counts."""
    records = []
    for value, replays in entries:
        failure = Failure(Message(original, 0, 1, b"f", value, (), 0), "ValueError", "forged", 1)
        headers = dead_letter_headers(failure)
        if replays:
            headers.append(("laneway.replay.count", str(replays).encode()))
        records.append((b"f", value, headers))
    produce(bootstrap, dlq, records)


@pytest.mark.kafka
def test_dlq_list_show_replay_once_loop_guard_and_dry_run(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = unique_name("ops-orders")
    dlq = f"{topic}.dlq"
    failed = dead_lettered(kafka_bootstrap, topic, 12)
    forged(kafka_bootstrap, dlq, topic, [(b"again", 3)])
    forged(kafka_bootstrap, dlq, "bad topic!", [(b"nameless", 0)])
    where = ("--bootstrap-servers", kafka_bootstrap, "--topic", dlq)

    listed = laneway_json(
        "dlq", "list", *where, "--where", f"topic={topic}", "--by", "message", cwd=tmp_path
    )
    assert listed["records"] == len(failed) + 1
    assert {(g["error_type"], g["error_message"]): g["count"] for g in listed["groups"]} == {
        ("ValueError", "bad amount"): len(failed),
        ("ValueError", "forged"): 1,
    }
    shown = laneway("dlq", "show", *where, cwd=tmp_path)
    assert "laneway.error.type: ValueError" in shown.stdout and "bad-" not in shown.stdout

    before = sum(end for _, end in plain_figures(kafka_bootstrap, "x", topic).values())
    dry = laneway_json("dlq", "replay", *where, "--dry-run", cwd=tmp_path)
    assert (dry["replayed"], dry["at_max_replays"], sum(dry["unusable"].values())) == (4, 1, 1)
    assert sum(end for _, end in plain_figures(kafka_bootstrap, "x", topic).values()) == before
    assert all(c is None for c, _ in plain_figures(kafka_bootstrap, dry["group"], dlq).values())

    report = laneway_json("dlq", "replay", *where, cwd=tmp_path)
    assert (report["replayed"], report["at_max_replays"], report["complete"]) == (4, 1, True)
    assert list(report["unusable"]) == [
        "laneway.original.topic 'bad topic!' is not a valid topic name"
    ]
    back = [r for r in read_records(kafka_bootstrap, topic, 16) if r.value and b"bad" in r.value]
    assert sorted(r.value for r in back) == sorted([*failed.values(), *failed.values()])
    replayed = [r for r in back if ("laneway.replay.count", b"1") in r.headers]
    assert sorted(r.value for r in replayed) == sorted(failed.values())
    assert not [n for r in replayed for n, _ in r.headers if n.startswith("laneway.error.")]

    again = laneway_json("dlq", "replay", *where, cwd=tmp_path)
    assert (again["read"], again["replayed"], again["complete"]) == (0, 0, True)
    still = laneway_json("dlq", "list", *where, "--where", "message~forged", cwd=tmp_path)
    assert still["records"] == 2  # the one at --max-replays stays in the dead-letter topic


@pytest.mark.kafka
def test_a_replay_killed_midway_resumes_without_loss(kafka_bootstrap: str, tmp_path: Path) -> None:
    target, dlq = unique_name("ops-target"), unique_name("ops-kill") + ".dlq"
    create_topic(kafka_bootstrap, target, 1)
    create_topic(kafka_bootstrap, dlq, 1)
    total, rate = 100, 10  # batches of 10, one a second
    forged(kafka_bootstrap, dlq, target, [(b"v-%d" % i, 0) for i in range(total)])
    group = f"laneway-dlq-replay.{dlq}"
    args = ("dlq", "replay", "--bootstrap-servers", kafka_bootstrap, "--topic", dlq)
    replay = subprocess.Popen(
        command(*args, "--max-rate", str(rate)), cwd=tmp_path, env=environment(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_until(
            lambda: (plain_figures(kafka_bootstrap, group, dlq)[0][0] or 0) >= 2 * rate,
            60,
            "two batches committed",
        )
        replay.send_signal(signal.SIGKILL)
        replay.communicate(timeout=30)
    finally:
        if replay.poll() is None:
            replay.kill()
    killed_at = plain_figures(kafka_bootstrap, group, dlq)[0][0] or 0
    assert killed_at < total, "the replay ended before the kill: nothing was tested"

    report = laneway_json(*args, cwd=tmp_path)

    assert report["complete"] and report["read"] == total - killed_at
    end = plain_figures(kafka_bootstrap, "x", target)[0][1]
    written = Counter(r.value for r in read_records(kafka_bootstrap, target, end))
    assert set(written) == {b"v-%d" % i for i in range(total)}  # nothing lost
    duplicates = sum(written.values()) - total
    assert duplicates <= rate  # at most the batch in hand when killed


@pytest.mark.kafka
def test_a_share_group_is_invisible_to_the_client_and_lag_says_so(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic, group = unique_name("ops-share"), unique_name("ops-share-group")
    create_topic(kafka_bootstrap, topic, 2)
    produce(kafka_bootstrap, topic, [(b"k%d" % i, b"v") for i in range(10)])
    source = lw.KafkaShareSource(kafka_bootstrap, group, [topic], crash_journal=False)
    consumer = lw.Consumer(source, lambda message: None, ordering="unordered",
                           handle_signals=False)  # fmt: skip
    assert consumer.run(max_messages=10).processed == 10  # the share group exists now
    connection = ("--bootstrap-servers", kafka_bootstrap, "--group", group)

    unseen = laneway("lag", *connection, cwd=tmp_path)
    assert unseen.returncode == 3 and "add --share" in unseen.stderr

    found = laneway_json("lag", *connection, "--share", "--topic", topic, cwd=tmp_path)
    ends = {p: end for p, (_, end) in plain_figures(kafka_bootstrap, "x", topic).items()}
    assert [(p["partition"], p["end"], p["lag"], p["backlog"]) for p in found["partitions"]] == [
        (p, ends[p], None, None) for p in sorted(ends)
    ]
    assert (found["lag"], found["backlog"], found["share_group"]) == (None, None, True)
    assert "confluent-kafka cannot read a share group's start offsets" in found["note"]
