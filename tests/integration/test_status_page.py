"""A consumer's status page in a real browser (Debian's headless chromium): it loads with
no console error and no request leaving its origin, shows what /status.json says, follows
records as they flow, shows a stalled key's partition and a new dead letter, and shows keys
only when allowed."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, sync_playwright
from status_pages import (
    POISON_KEY,
    STUCK_KEY,
    Flow,
    at_path,
    flowing,
    rendered,
    shown_numbers,
    watch,
)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path, headless=True)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def flow() -> Iterator[Flow]:
    with flowing(show_keys=False) as running:
        yield running


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    opened = browser.new_page(viewport={"width": 1280, "height": 900})
    yield opened
    opened.close()


def test_the_page_loads_with_no_console_error_and_no_request_leaving_its_origin(
    flow: Flow, page: Page
) -> None:
    seen = watch(page)
    answer = page.goto(flow.url)
    assert answer is not None and answer.ok
    policy = answer.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    assert "unsafe-inline" not in policy
    first = rendered(page)
    rendered(page, after=first)  # a second refresh: the page keeps polling
    origin = f"{urlsplit(flow.url).scheme}://{urlsplit(flow.url).netloc}/"
    assert seen.requests and all(url.startswith(origin) for url in seen.requests), seen.requests
    assert seen.errors == []
    # The policy is enforced: a script cannot reach another origin, even on loopback.
    blocked = page.evaluate(
        """() => new Promise(done => {
             document.addEventListener('securitypolicyviolation', e => done(e.violatedDirective));
             fetch('http://127.0.0.2:9/x').catch(() => {});
           })"""
    )
    assert blocked == "connect-src"


def test_the_numbers_on_the_page_equal_status_json(flow: Flow, page: Page) -> None:
    seen = watch(page)
    page.goto(flow.url)
    rendered(page, after=rendered(page))
    at, numbers = shown_numbers(page)
    document = seen.documents[at]
    paths = {path for path, _, _ in numbers}
    assert {"counters.processed", "backlog.backlog", "partitions.0.end", "rates.processed"} <= paths
    counts = re.compile(
        r"(backlog\.(backlog|lag)|partitions\.\d+\.(committed|end|lag|backlog|gaps))$"
    )
    for path, value, text in numbers:
        assert json.loads(value) == at_path(document, path), path
        if counts.match(path) and value != "null":
            assert text.replace(",", "") == value, (path, text)  # as the JSON says, grouped
    rows = page.locator("tr[data-pid]").count()
    assert rows == len(document["partitions"]) == 3


def test_the_numbers_change_within_two_seconds_while_records_flow(flow: Flow, page: Page) -> None:
    page.goto(flow.url)
    rendered(page)
    processed = page.locator('[data-k="counters.processed"]').first
    before = int(processed.get_attribute("data-v") or 0)
    page.wait_for_function(
        f"""() => Number(document.querySelector('[data-k="counters.processed"]').dataset.v)
                  > {before}""",
        timeout=2_000,
    )


def test_a_stalled_key_and_a_new_dead_letter_appear_without_the_key(flow: Flow, page: Page) -> None:
    page.goto(flow.url)
    rendered(page)
    stuck_partition, stuck_offset = flow.produce(STUCK_KEY)
    poison_partition, poison_offset = flow.produce(POISON_KEY)
    row = page.locator(f'tr[data-pid="orders[{stuck_partition}]"]')
    row.locator(".tag", has_text="stalled").wait_for(timeout=5_000)
    blocking = row.locator('[data-k$=".blocking_offset"]')
    assert blocking.get_attribute("data-v") == str(stuck_offset)
    assert "not ready" in page.locator("#pill").inner_text()
    failures = page.locator("section", has_text="Last messages given up on")
    failures.locator("td", has_text=f"orders[{poison_partition}]").first.wait_for(timeout=5_000)
    assert (
        f"{poison_offset:,}" in failures.inner_text() or str(poison_offset) in failures.inner_text()
    )
    assert "ValueError" in failures.inner_text()
    assert "amount must be positive" in failures.inner_text()
    stalls = page.locator("section", has_text="Stalled messages")
    assert str(stuck_offset) in stalls.inner_text().replace(",", "")
    text, document = page.content(), _document(flow)
    assert STUCK_KEY.decode() not in text and POISON_KEY.decode() not in text
    assert STUCK_KEY.decode() not in json.dumps(document)
    assert "key" not in document["lists"]["stalled"]["entries"][0]


def test_keys_are_shown_when_allowed(browser: Browser) -> None:
    with flowing(show_keys=True, rate=100) as flow:
        page = browser.new_page()
        try:
            page.goto(flow.url)
            rendered(page)
            partition, _ = flow.produce(STUCK_KEY)
            row = page.locator(f'tr[data-pid="orders[{partition}]"]')
            row.locator("code", has_text=STUCK_KEY.decode()).wait_for(timeout=5_000)
            stalls = page.locator("section", has_text="Stalled messages")
            assert STUCK_KEY.decode() in stalls.inner_text()
        finally:
            page.close()


def _document(flow: Flow) -> Any:
    url = flow.url.replace("/status", "/status.json")
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read())
