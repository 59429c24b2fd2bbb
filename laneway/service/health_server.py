"""``/livez`` and ``/readyz`` over HTTP, from a consumer's :class:`~laneway.health.Health`,
and ``/backlog``, its :class:`~laneway.control.backlog.Backlog` (an autoscaling signal)."""

from __future__ import annotations

import http.client
import io
import json
import socket
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from laneway.control.backlog import Backlog
from laneway.errors import ConfigError
from laneway.health import Health
from laneway.logs import get_logger

log = get_logger(__name__)

MAX_CONNECTIONS = 16
"""Connections served at once (a thread each); one more is answered 503 at once and
closed. Probes need one or two."""
REQUEST_TIMEOUT = 5.0
"""Seconds a connection may take to send its request (and to take the answer) before it
is closed, so a client that connects and says nothing does not hold a thread."""
MAX_REQUEST_BYTES = 8_192
"""The most a request's line and headers may hold; more is answered 414 or 431."""

_BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Connection: close\r\n\r\n"
    b'{"error": "too many connections to the health server"}'
)


class HealthServer:
    """Serves ``GET /livez`` (200 while the consumer's run is in progress),
    ``GET /readyz`` (200 when it is connected and nothing is stalled, else 503 with a JSON
    body naming the reason and the stalled messages' positions) and, given ``backlog``,
    ``GET /backlog`` (always 200: the JSON of :meth:`Backlog.as_json
    <laneway.control.backlog.Backlog.as_json>`, for KEDA's metrics-api scaler) on
    ``host:port``, from a thread of its own. Port 0 picks a free port (see :attr:`port`).

    Secure by default: it listens on 127.0.0.1 (``host="0.0.0.0"`` or ``"::"`` for every
    interface, e.g. in a container probed from outside) and shows message keys only with
    ``show_keys=True``. It holds at most :data:`MAX_CONNECTIONS` connections, each for at
    most :data:`REQUEST_TIMEOUT` seconds, reads at most :data:`MAX_REQUEST_BYTES` of a
    request, and answers any method but GET with 405.
    """

    def __init__(
        self,
        health: Callable[[], Health],
        port: int,
        host: str = "127.0.0.1",
        *,
        show_keys: bool = False,
        max_connections: int = MAX_CONNECTIONS,
        timeout: float = REQUEST_TIMEOUT,
        backlog: Callable[[], Backlog] | None = None,
    ) -> None:
        self._health = health
        self._backlog = backlog
        self._paths = ("/livez", "/readyz") + (() if backlog is None else ("/backlog",))
        self._show_keys = show_keys
        server = self

        class Handler(_BoundedRequest):
            def do_GET(self) -> None:
                server._answer(self)

        Handler.timeout = timeout
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            self._server = _BoundedServer((host, port), Handler, family, max_connections)
        except OSError as error:
            raise ConfigError(
                f"health_port={port} on health_address={host} cannot be used: "
                f"{error.strerror or error}"
            ) from None
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="laneway-health", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def connections(self) -> int:
        """Connections being served now (each in a thread of its own)."""
        return self._server.active

    def start(self) -> None:
        self._thread.start()
        host = self._server.server_address[0]
        log.info("health probes on %s port %d: %s", host, self.port, " ".join(self._paths))

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, request: BaseHTTPRequestHandler) -> None:
        path = request.path.split("?", 1)[0]
        if path not in self._paths:
            known = ", ".join(self._paths)
            self._send(request, 404, {"error": f"unknown path {path}; try {known}"})
            return
        if path == "/backlog" and self._backlog is not None:
            self._send(request, 200, self._backlog().as_json())
            return
        health = self._health()
        ok = health.live if path == "/livez" else health.ready
        self._send(request, 200 if ok else 503, health.as_json(keys=self._show_keys))

    @staticmethod
    def _send(request: BaseHTTPRequestHandler, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most ``limit`` at once; more are accepted (the listen
    queue holds 64) only to be refused at once."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        family: socket.AddressFamily,
        limit: int,
    ) -> None:
        self.address_family = family
        self._slots = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self.active = 0
        super().__init__(address, handler)

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


def _refuse(request: socket.socket) -> None:
    """Tell a connection over the limit why it is closed, without waiting for it."""
    try:
        request.setblocking(False)
        request.send(_BUSY)
    except OSError:
        pass


class _BoundedRequest(BaseHTTPRequestHandler):
    """One request per connection, its line and headers bounded, GET only."""

    def setup(self) -> None:
        super().setup()
        self.rfile = _Bounded(self.rfile, MAX_REQUEST_BYTES)  # type: ignore[assignment]

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

    def log_message(self, format: str, *args: object) -> None:
        log.debug("health %s", format % args)


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
