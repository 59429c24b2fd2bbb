"""``/livez`` and ``/readyz`` over HTTP, from a consumer's :class:`~laneway.health.Health`,
``/backlog``, its :class:`~laneway.control.backlog.Backlog` (an autoscaling signal), and
its status page, ``/status`` and ``/status.json`` (see :mod:`laneway.status`)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from laneway.control.backlog import Backlog
from laneway.errors import ConfigError
from laneway.health import Health
from laneway.logs import get_logger
from laneway.observability.bounded_http import MAX_CONNECTIONS, REQUEST_TIMEOUT, BoundedServer
from laneway.observability.http_request import Request
from laneway.status.page import PATHS, send_document, send_page

if TYPE_CHECKING:
    from laneway.status.member import MemberStatus

log = get_logger(__name__)

PROBES = ("/livez", "/readyz")
"""The probes' paths, answered before any other."""


class HealthServer:
    """Serves ``GET /livez`` (200 while the consumer's run is in progress),
    ``GET /readyz`` (200 when it is connected and nothing is stalled, else 503 with a JSON
    body naming the reason and the stalled messages' positions) and, given ``backlog``,
    ``GET /backlog`` (always 200: the JSON of :meth:`Backlog.as_json
    <laneway.control.backlog.Backlog.as_json>`, for KEDA's metrics-api scaler) and, given
    ``status``, the status page ``GET /status`` and its JSON ``GET /status.json`` (see
    :class:`~laneway.status.member.MemberStatus`) on ``host:port``, from a thread of its
    own. Port 0 picks a free port (see :attr:`port`).

    Secure by default: it listens on 127.0.0.1 (``host="0.0.0.0"`` or ``"::"`` for every
    interface, e.g. in a container probed from outside) and shows message keys only with
    ``show_keys=True``. Connections cost no thread (see
    :mod:`~laneway.observability.bounded_http`): it holds up to ``max_connections``
    (:data:`MAX_CONNECTIONS`), each for at most ``timeout`` seconds from accept
    (:data:`REQUEST_TIMEOUT`), reads at most 8 KiB of a request, answers ``/livez`` and
    ``/readyz`` before any other path, and any method but GET with 405: slow clients
    cannot keep the probes from their answers.
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
        status: MemberStatus | None = None,
    ) -> None:
        self._health = health
        self._backlog = backlog
        self._status = status
        self._paths = PROBES + (() if backlog is None else ("/backlog",))
        if status is not None:
            self._paths += PATHS
        self._show_keys = show_keys
        try:
            self._server = BoundedServer(
                (host, port),
                self._answer,
                max_connections,
                timeout=timeout,
                urgent=PROBES,
                name="laneway-health",
            )
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
        return self._server.port

    @property
    def connections(self) -> int:
        """Connections held now (none holds a thread)."""
        return self._server.active

    def start(self) -> None:
        if self._status is not None:
            self._status.start()
        self._thread.start()
        host = self._server.server_address[0]
        log.info("health probes on %s port %d: %s", host, self.port, " ".join(self._paths))

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._status is not None:
            self._status.stop()

    def _answer(self, request: Request) -> None:
        path = request.path.split("?", 1)[0]
        if path not in self._paths:
            known = ", ".join(self._paths)
            self._send(request, 404, {"error": f"unknown path {path}; try {known}"})
            return
        if path == "/backlog" and self._backlog is not None:
            self._send(request, 200, self._backlog().as_json(keys=self._show_keys))
            return
        if path == "/status" and self._status is not None:
            send_page(request)
            return
        if path == "/status.json" and self._status is not None:
            send_document(request, self._status.document())
            return
        health = self._health()
        ok = health.live if path == "/livez" else health.ready
        self._send(request, 200 if ok else 503, health.as_json(keys=self._show_keys))

    @staticmethod
    def _send(request: Request, status: int, body: dict[str, object]) -> None:
        request.reply(status, "application/json", json.dumps(body).encode())
