"""BoundedServer: the HTTP server behind laneway's probes and ``/metrics``, bounded so a
client cannot take it over.

Python's ``ThreadingHTTPServer`` (and prometheus-client's exporter, built on it) gives
every connection a thread for as long as the connection stays open, and reads as much
request as it is sent: 300 connections that say nothing hold 300 threads, forever
(measured on prometheus-client's ``start_http_server``). Here a server holds at most
``limit`` connections (one more is answered 503 at once and closed), each for at most
``timeout`` seconds *from accept* (a deadline, not a socket timeout, which a client
sending a byte a second would restart forever), reads at most :data:`MAX_REQUEST_BYTES`
of a request, and answers any method but GET with 405. A probe or a scraper needs one or
two connections. A client that goes away before its answer is logged at DEBUG through
laneway's logging, not as a traceback on stderr.
"""

from __future__ import annotations

import http.client
import io
import socket
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from laneway.logs import get_logger

log = get_logger(__name__)

MAX_CONNECTIONS = 16
"""Connections served at once (a thread each); one more is answered 503 at once and
closed. Probes and scrapers need one or two."""
REQUEST_TIMEOUT = 5.0
"""Seconds from accept within which a connection must send its request and take the
answer, else it is closed: a client that connects and says nothing, or says it slowly,
does not hold a thread."""
MAX_REQUEST_BYTES = 8_192
"""The most a request's line and headers may hold; more is answered 414 or 431."""

_BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Connection: close\r\n\r\n"
    b'{"error": "too many connections to this server"}'
)


class BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most ``limit`` at once; more are accepted (the listen
    queue holds 64) only to be refused at once. ``handler`` should extend
    :class:`BoundedRequest` (its ``timeout`` bounds each connection). Raises
    ``OSError`` when ``address`` cannot be bound."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        limit: int = MAX_CONNECTIONS,
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._slots = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self.active = 0
        """Connections being served now."""
        super().__init__(address, handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            _refuse(request)
            self.shutdown_request(request)
            return
        with self._lock:
            self.active += 1
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self._lock:
            self.active -= 1
        self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A request that failed: a client that went away (or ran out of time) before its
        answer at DEBUG, anything else as a WARNING with its traceback, both through
        laneway's logging (its format and level) instead of ``socketserver``'s print to
        stderr."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            log.debug("%s: a client went away before its answer: %s", type(self).__name__, error)
        else:
            log.warning("%s: a request failed", type(self).__name__, exc_info=True)


def _refuse(request: socket.socket) -> None:
    """Tell a connection over the limit why it is closed, without waiting for it."""
    try:
        request.setblocking(False)
        request.send(_BUSY)
    except OSError:
        pass


class BoundedRequest(BaseHTTPRequestHandler):
    """One request per connection, its line and headers bounded, GET only, within
    ``timeout`` seconds of the connection's accept (a class attribute:
    :data:`REQUEST_TIMEOUT` unless set)."""

    timeout = REQUEST_TIMEOUT

    def setup(self) -> None:
        super().setup()
        self.deadline = time.monotonic() + float(self.timeout or REQUEST_TIMEOUT)
        reader = io.BufferedReader(_DeadlineReader(self.connection, self.deadline))
        self.rfile = _Bounded(reader, MAX_REQUEST_BYTES)  # type: ignore[assignment]

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if self.command != "GET":
            self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
            self.send_header("Allow", "GET")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return False
        return True

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except http.client.LineTooLong:
            self.requestline, self.request_version, self.command = "", "", ""
            self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
            self.close_connection = True
        except TimeoutError:
            self.close_connection = True

    def reply(
        self, status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None
    ) -> None:
        """Send ``body`` as the whole answer (with ``headers`` besides the content's), within
        what is left of the deadline."""
        self.connection.settimeout(max(0.001, self.deadline - time.monotonic()))
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s %s", type(self).__name__, format % args)


class _DeadlineReader(io.RawIOBase):
    """A connection's input that raises ``TimeoutError`` once ``deadline`` has passed:
    each read may wait only for what is left of it."""

    def __init__(self, connection: socket.socket, deadline: float) -> None:
        super().__init__()
        self._connection = connection
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the connection's time is up")
        self._connection.settimeout(left)
        return self._connection.recv_into(buffer)


class _Bounded:
    """A request's input that raises ``LineTooLong`` past ``limit`` bytes in all."""

    def __init__(self, raw: io.BufferedIOBase, limit: int) -> None:
        self._raw = raw
        self._left = limit

    def readline(self, size: int = -1) -> bytes:
        wanted = self._left + 1 if size < 0 else min(size, self._left + 1)
        line = self._raw.readline(wanted)
        self._left -= len(line)
        if self._left < 0:
            raise http.client.LineTooLong("request line or headers")
        return line

    def close(self) -> None:
        self._raw.close()
