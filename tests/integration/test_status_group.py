"""``laneway status --group``: one page for a group, joining the log's view of every partition
with each member's /status.json, run as a user runs it (the real CLI in its own process)."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import kafka_helpers
import pytest
from ops_cli import command, environment, laneway_json
from playwright.sync_api import sync_playwright
from status_pages import rendered, watch

import laneway
from laneway.ops.group_status import HELD_NOTE
from laneway.service.health_server import HealthServer
from laneway.sources.base import Source
from laneway.status.member import MemberStatus

GROUP_CONFIG = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}


@contextmanager
def member(source: Source) -> Iterator[str]:
    """A consumer of ``source`` with its status page; its status URL."""
    consumer = laneway.Consumer(
        source, lambda m: time.sleep(0.001), engine="thread", handle_signals=False
    )
    server = HealthServer(consumer.health, 0, status=MemberStatus(consumer))
    server.start()
    runner = threading.Thread(target=consumer.run, daemon=True)
    runner.start()
    try:
        yield f"127.0.0.1:{server.port}"
    finally:
        consumer.stop()
        runner.join(20.0)
        server.stop()


def dead_address() -> str:
    """A loopback address where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@contextmanager
def group_page(*args: str, cwd: Path) -> Iterator[str]:
    """``laneway status ARGS`` serving on a free port; the page's URL."""
    process = subprocess.Popen(
        [*command("status", "--port", "0", "--interval", "0.5", *args)],
        cwd=cwd,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "http://" in line, (line, process.stderr.read() if process.stderr else "")
        yield line.split("http://", 1)[1].split()[0].join(["http://", ""])
    finally:
        process.terminate()
        assert process.wait(20) == 0


@pytest.mark.kafka
@pytest.mark.browser
def test_the_group_page_shows_two_members_and_a_dead_one(
    kafka_bootstrap: str, chromium_path: str, tmp_path: Path
) -> None:
    topic = kafka_helpers.unique_name("orders")
    group = kafka_helpers.unique_name("billing")
    kafka_helpers.create_topic(kafka_bootstrap, topic, 4)
    kafka_helpers.produce(kafka_bootstrap, topic, [(b"k%d" % i, b"v") for i in range(400)])
    dead = dead_address()
    with ExitStack() as stack:
        urls = [
            stack.enter_context(
                member(laneway.KafkaSource(kafka_bootstrap, group, [topic], GROUP_CONFIG))
            )
            for _ in range(2)
        ]
        args = ["--group", group, "--bootstrap-servers", kafka_bootstrap, "--topic", topic]
        for url in [*urls, dead]:
            args += ["--member", url]
        page_url = stack.enter_context(group_page(*args, cwd=tmp_path))
        playwright = stack.enter_context(sync_playwright())
        browser = playwright.chromium.launch(executable_path=chromium_path, headless=True)
        stack.callback(browser.close)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        seen = watch(page)
        page.goto(page_url)
        rendered(page)
        owners = page.locator("tr[data-pid] td:nth-child(10)")
        # Both members joined and each owns some of the 4 partitions (a rebalance may
        # take a few seconds): every row names one of them, and both appear.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            named = {owners.nth(i).inner_text() for i in range(owners.count())}
            if owners.count() == 4 and named == {f"http://{u}/status.json" for u in urls}:
                break
            page.wait_for_timeout(250)
        else:
            raise AssertionError(f"partition owners never settled: {named}")
        rows = page.locator("tr[data-member]")
        assert rows.count() == 3
        for url in urls:
            row = page.locator(f'tr[data-member="http://{url}/status.json"]')
            assert "ready" in row.inner_text()
        gone = page.locator(f'tr[data-member="http://{dead}/status.json"]')
        assert "no answer" in gone.inner_text()
        assert "1 not answering" in page.locator("#pill").inner_text()
        document = seen.documents[rendered(page)]
        assert sum(p["end"] for p in document["partitions"]) == 400
        assert seen.errors == []


def test_an_embedded_log_held_by_its_consumer_is_shown_as_its_member_reports_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log"
    log = laneway.EmbeddedLog(path)
    log.create_topic("orders", partitions=2)
    for i in range(50):
        log.produce("orders", b"v", key=b"k%d" % i)
    with member(log.subscribe(["orders"], "billing")) as url:
        deadline = time.monotonic() + 10
        while True:
            held = laneway_json(
                "status", "--group", "billing", "--log-dir", str(path), "--member", url,
                "--interval", "0.2", cwd=tmp_path,
            )  # fmt: skip
            if (
                sum(p.get("backlog") or 0 for p in held["partitions"]) == 0
                and len(held["partitions"]) == 2
            ):
                break
            assert time.monotonic() < deadline, json.dumps(held)
            time.sleep(0.2)
    log.close()
    assert held["note"] == HELD_NOTE
    assert [p["member"] for p in held["partitions"]] == [f"http://{url}/status.json"] * 2
    assert [m["ok"] for m in held["members"]] == [True]
    free = laneway_json(
        "status", "--group", "billing", "--log-dir", str(path), "--member", url,
        "--interval", "0.2", cwd=tmp_path,
    )  # fmt: skip
    assert free["note"] == "" and free["error"] == ""
    assert [(p["committed"], p["end"]) for p in free["partitions"]] == [
        (p["end"], p["end"]) for p in free["partitions"]
    ]
    assert sum(p["end"] for p in free["partitions"]) == 50
    assert [m["ok"] for m in free["members"]] == [False]  # the member is gone now
