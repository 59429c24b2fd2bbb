"""``/livez`` and ``/readyz`` over HTTP, from a consumer's :class:`~laneway.health.Health`."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from laneway.health import Health

log = logging.getLogger(__name__)


class HealthServer:
    """Serves ``GET /livez`` (200 while the consumer's run is in progress) and
    ``GET /readyz`` (200 when it is connected and nothing is stalled, else 503 with a JSON
    body naming the reason and the stalled messages) on ``host:port``, from a thread of
    its own. Port 0 picks a free port (see :attr:`port`)."""

    def __init__(self, health: Callable[[], Health], port: int, host: str = "0.0.0.0") -> None:
        self._health = health
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server._answer(self)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("health %s", format % args)

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="laneway-health", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()
        log.info("health probes on port %d: /livez /readyz", self.port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, request: BaseHTTPRequestHandler) -> None:
        path = request.path.split("?", 1)[0]
        if path not in ("/livez", "/readyz"):
            self._send(request, 404, {"error": f"unknown path {path}; try /livez or /readyz"})
            return
        health = self._health()
        ok = health.live if path == "/livez" else health.ready
        self._send(request, 200 if ok else 503, health.as_json())

    @staticmethod
    def _send(request: BaseHTTPRequestHandler, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)
