"""The autoscaling signal of ``laneway run --members 2`` on the real broker while one key
holds a partition's commit point: each member's ``GET /backlog`` (port + i) and
``laneway_backlog_messages`` add up, over the members, to the figures a plain client reads
(OffsetFetch, ListOffsets) and to ``laneway lag``."""

from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_helpers import create_topic, plain_figures, produce, unique_name
from ops_app import finished
from ops_cli import laneway_json
from service_runs import SUPPORT, Service, wait_until

MEMBERS = 2
_SAMPLE = re.compile(r'^laneway_backlog_messages\{partition="(\d+)",topic="([^"]+)"\} (\S+)$')


def free_ports(count: int) -> int:
    """A port such that it and the ``count - 1`` after it are free (member i: port + i)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = int(probe.getsockname()[1])
        if first + count > 65_535:
            continue
        try:
            for port in range(first, first + count):
                with socket.socket() as taken:
                    taken.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    raise AssertionError("no run of free ports")


def fetch(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return str(reply.read().decode())
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None  # the member is not serving yet


class Group:
    """The running members' endpoints."""

    def __init__(self, health: int, metrics: int) -> None:
        self.health, self.metrics = health, metrics

    def backlogs(self) -> list[dict[str, object]] | None:
        """Each member's ``/backlog``, or None while one does not answer."""
        bodies = [fetch(f"http://127.0.0.1:{self.health + i}/backlog") for i in range(MEMBERS)]
        if any(body is None for body in bodies):
            return None
        return [json.loads(body) for body in bodies if body is not None]

    def gauges(self, topic: str) -> dict[int, float]:
        """``laneway_backlog_messages`` of ``topic`` per partition, summed over members."""
        total: dict[int, float] = {}
        for i in range(MEMBERS):
            text = fetch(f"http://127.0.0.1:{self.metrics + i}/metrics") or ""
            for line in text.splitlines():
                found = _SAMPLE.match(line)
                if found and found.group(2) == topic:
                    number = int(found.group(1))
                    total[number] = total.get(number, 0.0) + float(found.group(3))
        return total


@pytest.fixture
def held(kafka_bootstrap: str, tmp_path: Path) -> Iterator[tuple[Group, dict[str, str]]]:
    """``laneway run --members 2`` on a 2-partition topic whose first record is the key
    ``slow``, held in its handler until the file ``release`` exists; 20 other keys finish."""
    topic, group = unique_name("backlog"), unique_name("backlog-group")
    create_topic(kafka_bootstrap, topic, 2)
    produce(kafka_bootstrap, topic, [(b"slow", b"held")])
    produce(kafka_bootstrap, topic, [(b"k%d" % i, b"%d" % i) for i in range(20)])
    release, records = tmp_path / "release", tmp_path / "records"
    service = Service(
        tmp_path,
        "ops_app:handle",
        [SUPPORT],
        {"OPS_RELEASE": str(release), "OPS_RECORDS": str(records)},
    )
    health, metrics = free_ports(MEMBERS), free_ports(MEMBERS)
    service.start(
        "--bootstrap-servers", kafka_bootstrap, "--group", group, "--topic", topic,
        "--engine", "thread", "--ordering", "key", "--concurrency", "8",
        "--commit-interval", "0.1", "--members", str(MEMBERS),
        # The members join one after the other: the first may own both partitions, and the
        # revocation that hands one to the second waits drain_timeout (10 s by default) for
        # the held call when it is there, which under load left too little of the wait below.
        "--drain-timeout", "2",
        "--health-port", str(health), "--metrics-port", str(metrics),
        "--config", str(service.kafka_file),
    )  # fmt: skip
    info = {"topic": topic, "group": group, "release": str(release), "records": str(records)}
    try:
        yield Group(health, metrics), info
    finally:
        release.touch()
        service.close()


@pytest.mark.kafka
def test_members_backlogs_add_up_to_the_groups(
    kafka_bootstrap: str, held: tuple[Group, dict[str, str]], tmp_path: Path
) -> None:
    members, info = held
    topic, group, records = info["topic"], info["group"], Path(info["records"])

    def expected() -> list[dict[str, object]]:
        """The contract's figures per partition from a plain client and the handler's
        own record of what finished."""
        done = finished(records)
        rows: list[dict[str, object]] = []
        for p, (committed, end) in sorted(plain_figures(kafka_bootstrap, group, topic).items()):
            base = 0 if committed is None else committed
            beyond = sum(1 for q, o in done if q == p and base < o < end)
            rows.append(
                {"topic": topic, "partition": p, "committed": committed, "end": end,
                 "lag": end - base, "finished_beyond": beyond, "backlog": end - base - beyond}
            )  # fmt: skip
        return rows

    def reported() -> list[dict[str, object]]:
        bodies = members.backlogs() or []
        rows = [row for body in bodies for row in body["partitions"]]  # type: ignore[attr-defined]
        return sorted(rows, key=lambda row: row["partition"])

    def settled_on_one_held_key() -> bool:
        want = expected()
        return (
            len(finished(records)) == 20
            and sum(row["backlog"] for row in want) == 1  # type: ignore[misc]
            and reported() == want
        )

    wait_until(settled_on_one_held_key, 90, "both members reporting the held key alone")
    bodies = members.backlogs()
    assert bodies is not None
    want = expected()
    lag = sum(row["lag"] for row in want)  # type: ignore[misc]
    assert sum(body["backlog"] for body in bodies) == 1  # type: ignore[misc]
    assert sum(body["lag"] for body in bodies) == lag > 1  # type: ignore[misc]
    # Each partition is reported by the one member that owns it.
    owned = [row["partition"] for body in bodies for row in body["partitions"]]  # type: ignore[attr-defined]
    assert sorted(owned) == [0, 1]
    # The member holding the key has a backlog left; no member's drain time is unbounded.
    for body in bodies:
        assert isinstance(body["rate"], float) and isinstance(body["drain_seconds"], float)
        assert body["drain_seconds"] >= 0
        if body["backlog"]:
            assert body["drain_seconds"] > 0
    # The same figures in /metrics (summed over members: a partition given away shows 0),
    # and from laneway lag.
    wait_until(
        lambda: members.gauges(topic) == {row["partition"]: row["backlog"] for row in want},
        10,
        "laneway_backlog_messages of both partitions",
    )
    lag_json = laneway_json(
        "lag", "--bootstrap-servers", kafka_bootstrap, "--group", group, "--topic", topic,
        cwd=tmp_path,
    )  # fmt: skip
    assert (lag_json["backlog"], lag_json["lag"]) == (1, lag)

    Path(info["release"]).touch()
    wait_until(
        lambda: (
            (found := members.backlogs()) is not None
            and [(b["backlog"], b["lag"], b["drain_seconds"]) for b in found] == [(0, 0, 0.0)] * 2
        ),
        60,
        "the held key finished and committed",
    )
