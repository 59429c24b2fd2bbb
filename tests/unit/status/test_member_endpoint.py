"""/status and /status.json on the health port, with a real consumer on the embedded log:
what the document holds, the page's headers, GET only, and what is not served without it."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

import laneway
from laneway.health import Health
from laneway.printable import KEY_CHARACTERS
from laneway.service.health_server import HealthServer
from laneway.status.member import MemberStatus

GROUP = "billing"


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, laneway.Consumer]]:
    """A consumer that finished 300 records, failed one, and runs on (idle)."""
    log = laneway.EmbeddedLog()
    log.create_topic("orders", partitions=2)
    for i in range(300):
        log.produce("orders", value=b"secret-value-%d" % i, key=b"acct-%d" % i)

    def handle(message: laneway.Message) -> None:
        if message.offset == 5 and message.partition == 0:
            raise KeyError("no such account")

    consumer = laneway.Consumer(
        log.subscribe(["orders"], GROUP), handle, engine="thread", max_retries=0,
        handle_signals=False,
    )  # fmt: skip
    server = HealthServer(consumer.health, 0, status=MemberStatus(consumer, source="test"))
    server.start()
    runner = threading.Thread(target=consumer.run, daemon=True)
    runner.start()
    base = f"http://127.0.0.1:{server.port}"
    deadline = time.monotonic() + 15
    while consumer.stats().handled < 300 or not consumer.backlog().partitions:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield base, consumer
    consumer.stop()
    runner.join(10)
    server.stop()


def document(base: str) -> Any:
    status, headers, body = get(base + "/status.json")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert headers["Cache-Control"] == "no-store"
    return json.loads(body)


def test_the_document_says_what_the_consumer_knows(served: tuple[str, laneway.Consumer]) -> None:
    shown = document(served[0])
    assert shown["kind"] == "member" and shown["health"]["state"] == "running"
    assert shown["counters"]["processed"] == 299 and shown["counters"]["failed"] == 1
    assert [(p["topic"], p["partition"]) for p in shown["partitions"]] == [
        ("orders", 0), ("orders", 1)
    ]  # fmt: skip
    assert sum(p["end"] for p in shown["partitions"]) == 300
    assert all(p["backlog"] == 0 and p["blocking_offset"] is None for p in shown["partitions"])
    [failure] = shown["failures"]
    assert (failure["partition"], failure["offset"], failure["error_type"]) == (0, 5, "KeyError")
    assert failure["outcome"].startswith("dead-lettered to orders.dlq")
    [assigned] = shown["rebalances"]
    assert assigned["kind"] == "assigned" and assigned["partitions"] == ["orders[0]", "orders[1]"]
    assert {"name": "engine", "value": "thread", "origin": "code"} in shown["config"]
    assert shown["lists"]["stalled"]["entries"] == []
    text = json.dumps(shown)
    assert "secret-value" not in text and "acct-" not in text  # never values, keys not asked


def test_the_page_is_self_contained_under_a_strict_policy(
    served: tuple[str, laneway.Consumer],
) -> None:
    status, headers, body = get(served[0] + "/status")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    policy = headers["Content-Security-Policy"]
    assert policy.startswith("default-src 'none'; script-src 'sha256-")
    assert "'unsafe-inline'" not in policy and "connect-src 'self'" in policy
    assert headers["X-Frame-Options"] == "DENY"
    page = body.decode()
    assert "<script>" in page and "/*SCRIPT*/" not in page and "/*STYLE*/" not in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page


@pytest.mark.parametrize("method", [b"POST", b"PUT", b"DELETE"])
def test_only_get_is_answered(served: tuple[str, laneway.Consumer], method: bytes) -> None:
    port = int(served[0].rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(method + b" /status.json HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.0 405")


def test_without_a_status_the_paths_are_unknown() -> None:
    probes = HealthServer(lambda: Health(True, True, "running"), 0)
    probes.start()
    try:
        status, _, body = get(f"http://127.0.0.1:{probes.port}/status")
        assert status == 404 and b"/livez" in body
    finally:
        probes.stop()


def test_a_huge_key_is_cut_so_every_answer_stays_small() -> None:
    # Before: a 100 KB key was embedded whole wherever it is shown (the stalled message, the
    # partition's blocking key, what waits behind it): each /status.json was 208 KB.
    log = laneway.EmbeddedLog()
    log.create_topic("orders", partitions=1)
    huge = b"k" * 100_000 + b"\x1b[2J"
    log.produce("orders", value=b"v", key=huge)
    log.produce("orders", value=b"v", key=huge)  # waits behind the first
    release = threading.Event()

    def handle(message: laneway.Message) -> None:
        release.wait(10)

    consumer = laneway.Consumer(
        log.subscribe(["orders"], GROUP), handle, engine="thread", stall_timeout=0.2,
        handle_signals=False,
    )  # fmt: skip
    status = MemberStatus(consumer, show_keys=True)
    server = HealthServer(
        consumer.health, 0, show_keys=True, backlog=consumer.backlog, status=status
    )
    server.start()
    runner = threading.Thread(target=consumer.run, daemon=True)
    runner.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        deadline = time.monotonic() + 10
        while True:  # until the stall is seen and the backlog sampled with it
            _, _, body = get(base + "/status.json")
            shown = json.loads(body)
            rows = shown["partitions"]
            if rows and rows[0]["blocking_key"] and shown["lists"]["stalled"]["entries"]:
                break
            assert time.monotonic() < deadline, "the first message stalls"
            time.sleep(0.05)
        [row] = rows
        [stalled] = shown["lists"]["stalled"]["entries"]
        marker = "k" * KEY_CHARACTERS + "...[100004 bytes]"
        assert row["blocking_key"] == marker and stalled["key"] == marker
        assert len(body) < 20_000, len(body)
        for path in ("/readyz", "/backlog"):
            _, _, probe = get(base + path)
            [stall] = json.loads(probe)["stalled"]
            assert stall["key"] == marker and stall["waiting"]["keys_named"] == [marker]
            assert len(probe) < 2_000, (path, len(probe))
    finally:
        release.set()
        consumer.stop()
        runner.join(10)
        server.stop()
