"""``laneway lag`` and ``laneway dlq`` on a durable embedded log, through the real CLI, on
records a real laneway consumer committed and dead-lettered."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ops_cli import laneway, laneway_json

import laneway as lw
from laneway.sources.base import IgnoreRebalances
from laneway.types import CommitPosition, Message

GROUP = "billing"


def wait_until(condition: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def hold_one_key(path: Path) -> set[tuple[int, int]]:
    """Partition 0 of ``orders``: a slow key at offset 0, then 9 other keys; partition 1:
    5 records. A consumer finishes everything but the slow key, is stopped while it is in
    its handler, and its last commit is left. Returns the (partition, offset) finished."""
    log = lw.EmbeddedLog(path)
    log.create_topic("orders", partitions=2)
    log.produce("orders", b"held", key=b"slow", partition=0)
    for i in range(9):
        log.produce("orders", b"%d" % i, key=b"k%d" % i, partition=0)
    for i in range(5):
        log.produce("orders", b"%d" % i, key=b"x%d" % i, partition=1)
    release = threading.Event()
    finished: set[tuple[int, int]] = set()

    def handle(message: Message) -> None:
        if message.key == b"slow":
            release.wait(30)
        else:
            finished.add((message.partition, message.offset))

    consumer = lw.Consumer(
        log.subscribe(["orders"], GROUP),
        handle,
        engine="thread",
        ordering="key",
        concurrency=8,
        commit_interval=0.05,
        drain_timeout=0.2,
        handle_signals=False,
    )
    running = threading.Thread(target=consumer.run)
    running.start()

    def committed_everything_but_the_slow_key() -> bool:
        positions = log.committed(GROUP, "orders")
        held = positions.get(0)
        return (
            len(finished) == 14
            and held is not None
            and held.offset == 0
            and held.metadata != ""
            and positions.get(1) == CommitPosition(5)
        )

    wait_until(committed_everything_but_the_slow_key)
    consumer.stop()
    running.join(30)
    release.set()
    log.close()
    return finished


def test_lag_backlog_and_totals_from_a_held_key(tmp_path: Path) -> None:
    finished = hold_one_key(tmp_path / "log")
    log = lw.EmbeddedLog(tmp_path / "log")  # the figures, independently of laneway lag
    committed = {p: c.offset for p, c in log.committed(GROUP, "orders").items()}
    ends = log.end_offsets("orders")
    log.close()
    expected = []
    for p in (0, 1):
        done = sum(1 for q, o in finished if q == p and committed[p] < o < ends[p])
        lag = ends[p] - committed[p]
        expected.append(
            {"topic": "orders", "partition": p, "committed": committed[p], "end": ends[p],
             "lag": lag, "finished_beyond": done, "backlog": lag - done}
        )  # fmt: skip
    assert expected[0]["finished_beyond"] == 9 and expected[0]["backlog"] == 1

    found = laneway_json("lag", "--log-dir", str(tmp_path / "log"), "--group", GROUP, cwd=tmp_path)

    assert found == {"partitions": expected, "lag": 10, "backlog": 1}
    table = laneway("lag", "--log-dir", str(tmp_path / "log"), "--group", GROUP, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    rows = [line.split() for line in table.stdout.splitlines()]
    assert ["orders", "0", "0", "10", "10", "9", "1"] in rows
    assert ["total", "-", "-", "-", "10", "9", "1"] in rows


def test_lag_exit_codes_name_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "log"
    lw.EmbeddedLog(path).close()
    missing_group = laneway("lag", "--log-dir", str(path), "--group", "nobody", cwd=tmp_path)
    assert missing_group.returncode == 3
    assert "unknown group 'nobody'" in missing_group.stderr
    no_group = laneway("lag", "--log-dir", str(path), cwd=tmp_path)
    assert no_group.returncode == 2 and "--group" in no_group.stderr
    not_a_log = laneway("lag", "--log-dir", str(tmp_path / "nothing"), "--group", "g", cwd=tmp_path)
    assert not_a_log.returncode == 3 and "not an embedded log directory" in not_a_log.stderr
    assert not (tmp_path / "nothing").exists()
    holder = lw.EmbeddedLog(path)
    try:
        busy = laneway("lag", "--log-dir", str(path), "--group", "g", cwd=tmp_path)
    finally:
        holder.close()
    assert busy.returncode == 3 and "stop it first" in busy.stderr


def read_all(log: lw.EmbeddedLog, topic: str, count: int) -> list[Message]:
    """``count`` records of ``topic``, read by a group of their own."""
    reader = log.subscribe([topic], f"reader-{time.monotonic_ns()}")
    reader.open(IgnoreRebalances())
    read: list[Message] = []
    deadline = time.monotonic() + 10
    while len(read) < count and time.monotonic() < deadline:
        read += reader.poll(100, 0.1)
    reader.close()
    assert len(read) == count, read
    return read


def dead_letters(path: Path) -> tuple[dict[tuple[int, int], bytes], dict[int, int]]:
    """``orders`` (2 partitions) consumed by a laneway consumer whose handler fails on
    some records, so its router writes them to ``orders.dlq``; plus three forged dead
    letters: one replayed 3 times already, one whose original topic is not a topic name
    and one whose original topic does not exist. Returns the (partition, offset) of each
    record the router dead-lettered, with its value, and the ends of ``orders``."""
    log = lw.EmbeddedLog(path)
    log.create_topic("orders", partitions=2)
    for i in range(12):
        value = b"bad-%d" % i if i % 3 == 0 else b"miss-%d" % i if i % 4 == 1 else b"ok-%d" % i
        log.produce("orders", value, key=b"k%d" % i)

    failed: dict[tuple[int, int], bytes] = {}

    def handle(message: Message) -> None:
        if message.value and not message.value.startswith(b"ok"):
            failed[(message.partition, message.offset)] = message.value
        if message.value and message.value.startswith(b"bad"):
            raise ValueError("bad amount")
        if message.value and message.value.startswith(b"miss"):
            raise KeyError("customer")

    consumer = lw.Consumer(
        log.subscribe(["orders"], GROUP), handle, max_retries=0, handle_signals=False
    )
    consumer.run(idle_timeout=0.5)
    origin = [("laneway.original.partition", b"0"), ("laneway.original.offset", b"1")]
    forged = [
        [("laneway.original.topic", b"orders"), *origin, ("laneway.replay.count", b"3")],
        [("laneway.original.topic", b"bad topic!"), *origin],
        [("laneway.original.topic", b"nowhere"), *origin],
    ]
    for headers in forged:
        log.produce("orders.dlq", b"forged", key=b"f", headers=headers)
    ends = log.end_offsets("orders")
    log.close()
    return failed, ends


def test_dlq_list_show_and_replay_once_with_the_loop_guard(tmp_path: Path) -> None:
    path = tmp_path / "log"
    failed, ends = dead_letters(path)
    where = ("--log-dir", str(path), "--topic", "orders.dlq")
    assert len(failed) == 6

    listed = laneway_json("dlq", "list", *where, "--by", "message", cwd=tmp_path)
    counts = {(g["original_topic"], g["error_type"], g["error_message"]): g["count"]
              for g in listed["groups"]}  # fmt: skip
    assert listed["records"] == 9
    assert counts[("orders", "ValueError", "bad amount")] == 4
    assert counts[("orders", "KeyError", "'customer'")] == 2

    shown = laneway("dlq", "show", *where, "--where", "type=ValueError", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "laneway.error.message: bad amount" in shown.stdout
    assert "bad-" not in shown.stdout  # record contents only when asked
    assert "shown 4 of 4 dead letters (type ValueError)" in shown.stdout
    with_values = laneway("dlq", "show", *where, "--values", "--limit", "1", cwd=tmp_path)
    assert "value: b'" in with_values.stdout and "shown 1 of 9 dead letters" in with_values.stdout

    dry = laneway_json("dlq", "replay", *where, "--dry-run", cwd=tmp_path)
    assert (dry["replayed"], dry["at_max_replays"], dry["dry_run"]) == (6, 1, True)
    log = lw.EmbeddedLog(path)
    assert sum(log.end_offsets("orders").values()) == 12  # nothing written
    assert log.committed(dry["group"], "orders.dlq") == {}  # nothing committed
    log.close()

    report = laneway_json("dlq", "replay", *where, cwd=tmp_path)
    assert (report["read"], report["replayed"], report["at_max_replays"]) == (9, 6, 1)
    assert report["complete"] and report["targets"] == {"orders": 6}
    assert sorted(report["unusable"].values()) == [1, 1]
    assert any("'bad topic!' is not a valid topic name" in why for why in report["unusable"])
    assert any("'nowhere' does not exist" in why for why in report["unusable"])

    log = lw.EmbeddedLog(path)
    replayed = read_all(log, "orders", 6)  # what the group committed is released on open
    assert all(m.offset >= ends[m.partition] for m in replayed)
    log.close()
    assert sorted((m.partition, m.value) for m in replayed) == sorted(
        (p, v) for (p, _), v in failed.items()
    )
    for m in replayed:
        names = [name for name, _ in m.headers]
        assert dict(m.headers)["laneway.replay.count"] == b"1"
        assert not [n for n in names if n.startswith(("laneway.error.", "laneway.original."))]

    again = laneway_json("dlq", "replay", *where, cwd=tmp_path)
    assert (again["read"], again["replayed"], again["complete"]) == (0, 0, True)
