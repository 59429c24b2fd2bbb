"""The status page itself: one HTML document with its style and script inline, and the
headers it is served with (a Content-Security-Policy that allows exactly that style and
script, and requests to its own origin only)."""

from __future__ import annotations

import base64
import hashlib
import json
from functools import cache
from importlib import resources
from typing import Any, Protocol

PATHS = ("/status", "/status.json")
"""What a status page serves: the page and its JSON."""


class Replier(Protocol):
    """What answers one HTTP request: a
    :class:`~laneway.observability.http_request.Request`."""

    def reply(
        self, status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None
    ) -> None: ...


@cache
def page() -> tuple[bytes, str]:
    """The page (HTML, UTF-8) and its Content-Security-Policy, built once from the files
    in ``assets``: the policy names the SHA-256 of the inline style and script, so nothing
    else (an injected script, an inline ``style=``) runs, and ``connect-src 'self'`` lets
    the script read its JSON from the same origin only."""
    assets = resources.files("laneway.status") / "assets"
    style = (assets / "page.css").read_text("utf-8")
    script = (assets / "page.js").read_text("utf-8")
    html = (assets / "page.html").read_text("utf-8")
    html = html.replace("/*STYLE*/", style).replace("/*SCRIPT*/", script)
    policy = "; ".join(
        [
            "default-src 'none'",
            f"script-src '{_digest(script)}'",
            f"style-src '{_digest(style)}'",
            "img-src data:",
            "connect-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )
    return html.encode("utf-8"), policy


def _digest(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


SAFE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
"""Headers of every status answer: never cached, never sniffed, framed or referred."""


def send_page(request: Replier) -> None:
    """Answer with the page."""
    html, policy = page()
    headers = {**SAFE_HEADERS, "Content-Security-Policy": policy}
    request.reply(200, "text/html; charset=utf-8", html, headers)


def send_document(request: Replier, document: dict[str, Any]) -> None:
    """Answer with ``document`` as JSON."""
    body = json.dumps(document, separators=(",", ":")).encode()
    request.reply(200, "application/json", body, dict(SAFE_HEADERS))
