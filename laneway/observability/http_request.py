"""Request: one HTTP request as the bounded server reads it, and the answer it is given.

A request is its head only (the request line and the headers, at most
:data:`MAX_REQUEST_BYTES`): the server answers GET alone, which has no body. The head is
read by the server's event loop and parsed here (:func:`head_of`, :func:`parse`); a
handler is given the :class:`Request` and calls :meth:`Request.reply` once; the answer is
the bytes the loop then writes. Every answer closes its connection (HTTP/1.0 with
``Connection: close``): a probe or a scraper makes one request per connection anyway.
"""

from __future__ import annotations

import http.client
import io
import json
import re
from http import HTTPStatus

MAX_REQUEST_BYTES = 8_192
"""The most a request's line and headers may hold; more is answered 414 (a request line
that long) or 431 (headers)."""

_HEAD_END = re.compile(rb"\r?\n\r?\n")
_VERSION = re.compile(r"HTTP/(\d+)\.(\d+)")


class Refused(Exception):
    """A request that is answered with an error (``answer``: the whole answer) instead of
    being handed to a handler."""

    def __init__(self, status: HTTPStatus, why: str, headers: dict[str, str] | None = None):
        super().__init__(why)
        self.status = int(status)
        self.answer = error_answer(status, why, headers)


def head_of(received: bytes) -> bytes | None:
    """The complete head at the start of ``received`` (up to the blank line after the
    headers), ``None`` while it is still coming; :class:`Refused` (414 or 431) once it
    is, or would be, longer than :data:`MAX_REQUEST_BYTES`."""
    found = _HEAD_END.search(received, 0, MAX_REQUEST_BYTES + 4)
    if found is not None and found.end() <= MAX_REQUEST_BYTES:
        return received[: found.end()]
    if found is None and len(received) <= MAX_REQUEST_BYTES:
        return None
    if b"\n" not in received[:MAX_REQUEST_BYTES]:
        raise Refused(HTTPStatus.REQUEST_URI_TOO_LONG, "the request line is too long")
    raise Refused(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "the request headers are too long")


class Request:
    """One request's ``method`` (always GET when a handler sees it), ``path`` (the
    request target, query included), ``headers`` and ``client`` (the peer's address);
    the handler answers it with :meth:`reply`."""

    def __init__(
        self, method: str, path: str, headers: http.client.HTTPMessage, client: str
    ) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.client = client
        self.status = 0
        """The status it was answered with (0: not yet)."""
        self.answer: bytes | None = None
        """The whole answer, once :meth:`reply` was called."""

    def reply(
        self, status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None
    ) -> None:
        """Answer with ``status`` and ``body`` (of ``content_type``), ``headers`` besides."""
        self.status = status
        self.answer = answer(status, {"Content-Type": content_type, **(headers or {})}, body)


def parse(head: bytes, client: str) -> Request:
    """The request of a complete ``head`` (see :func:`head_of`); :class:`Refused` with
    400 for a malformed one, 505 for an HTTP version other than 1.x, 405 for any method
    but GET."""
    line, _, rest = head.partition(b"\n")
    words = line.decode("iso-8859-1").split()
    if len(words) != 3:
        raise Refused(HTTPStatus.BAD_REQUEST, "a request line is METHOD PATH HTTP/1.x")
    method, path, version = words
    numbers = _VERSION.fullmatch(version)
    if numbers is None:
        raise Refused(HTTPStatus.BAD_REQUEST, f"not an HTTP version: {version[:20]!r}")
    if numbers.group(1) != "1":
        raise Refused(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, "HTTP/1.0 and 1.1 only")
    if method != "GET":
        raise Refused(HTTPStatus.METHOD_NOT_ALLOWED, "GET only", {"Allow": "GET"})
    try:
        headers = http.client.parse_headers(io.BytesIO(rest))
    except http.client.HTTPException as error:
        raise Refused(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, str(error)) from None
    return Request(method, path, headers, client)


def answer(status: int, headers: dict[str, str], body: bytes) -> bytes:
    """A whole HTTP/1.0 answer: the status line, ``headers``, the length, ``body``."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    lines = [f"HTTP/1.0 {status} {phrase}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


def error_answer(status: int, why: str, headers: dict[str, str] | None = None) -> bytes:
    """An error answer: ``{"error": why}`` as JSON."""
    body = json.dumps({"error": why}).encode()
    return answer(status, {"Content-Type": "application/json", **(headers or {})}, body)
