"""What the status page's tests share: a consumer on the embedded log under a steady flow of
records, with its status page served, and the checks a headless Chromium makes of a page."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import laneway
from laneway.service.health_server import HealthServer
from laneway.status.member import MemberStatus

STUCK_KEY = b"acct-7f3a9"
"""A key whose handler blocks until released (never in any other text the page shows)."""
POISON_KEY = b"poison-51c2"
"""A key whose handler always raises."""
TOPIC = "orders"


@dataclass
class Flow:
    """A running consumer and its status page: ``url`` of the page, ``log`` to produce
    more, ``release`` to end the stuck handler."""

    url: str
    log: laneway.EmbeddedLog
    consumer: laneway.Consumer
    release: threading.Event = field(default_factory=threading.Event)

    def produce(self, key: bytes, value: bytes = b"{}") -> tuple[int, int]:
        """Produce one record; its partition and offset."""
        return self.log.produce(TOPIC, value=value, key=key)


def handler(release: threading.Event) -> Callable[[laneway.Message], None]:
    def handle(message: laneway.Message) -> None:
        if message.key == STUCK_KEY:
            release.wait(60.0)
        elif message.key == POISON_KEY:
            raise ValueError("amount must be positive")
        else:
            time.sleep(0.0005)

    return handle


@contextmanager
def flowing(show_keys: bool, rate: int = 400) -> Iterator[Flow]:
    """A thread-engine consumer of a 3-partition embedded topic, records produced at about
    ``rate`` a second (by key, 50 keys) while it runs, its page on a free loopback port."""
    log = laneway.EmbeddedLog()
    log.create_topic(TOPIC, partitions=3)
    release, stop = threading.Event(), threading.Event()
    consumer = laneway.Consumer(
        log.subscribe([TOPIC], group="billing"),
        handler(release),
        engine="thread",
        concurrency=8,
        max_retries=0,
        stall_timeout=1.0,
        handle_signals=False,
        drain_timeout=5.0,
    )
    status = MemberStatus(consumer, show_keys=show_keys, source="orders on the embedded log")
    server = HealthServer(consumer.health, 0, show_keys=show_keys, status=status)
    server.start()

    def produce() -> None:
        n = 0
        while not stop.wait(0.05):
            for _ in range(rate // 20):
                log.produce(TOPIC, value=b"{}", key=b"acct-%d" % (n % 50))
                n += 1

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    runner = threading.Thread(target=consumer.run, daemon=True)
    runner.start()
    flow = Flow(f"http://127.0.0.1:{server.port}/status", log, consumer, release)
    try:
        yield flow
    finally:
        stop.set()
        release.set()
        consumer.stop()
        runner.join(15.0)
        producer.join(5.0)
        server.stop()
        log.close()


@dataclass
class Watched:
    """What a page did: console messages of type error (and uncaught errors), every
    request's URL, and each status.json it read, by its ``at``."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)


def watch(page: Any) -> Watched:
    """Start watching ``page`` (a Playwright page) before it loads."""
    seen = Watched()
    page.on("console", lambda m: seen.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.errors.append(str(e)))
    page.on("request", lambda r: seen.requests.append(r.url))

    def read(response: Any) -> None:
        if urlsplit(response.url).path.endswith("/status.json") and response.ok:
            document = json.loads(response.body())
            seen.documents[repr(document["at"])] = document

    page.on("response", read)
    return seen


def rendered(page: Any, after: str | None = None, timeout: float = 5.0) -> str:
    """The ``at`` of the document the page shows, once it shows one (newer than ``after``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        at = page.evaluate("document.body.dataset.rendered || null")
        if at is not None and at != after:
            return str(at)
        page.wait_for_timeout(50)
    raise AssertionError(f"the page showed no new status.json within {timeout} s")


def shown_numbers(page: Any) -> tuple[str, list[tuple[str, str, str]]]:
    """The document shown and every bound number: (path, JSON value, text), read at once."""
    found = page.evaluate(
        """() => [document.body.dataset.rendered,
             [...document.querySelectorAll('[data-k]')].map(e => [e.dataset.k, e.dataset.v,
                                                                  e.textContent])]"""
    )
    return str(found[0]), [tuple(item) for item in found[1]]


def at_path(document: Any, path: str) -> Any:
    for part in path.split("."):
        document = document[int(part)] if isinstance(document, list) else document[part]
    return document
