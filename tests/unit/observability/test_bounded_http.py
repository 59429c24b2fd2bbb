"""BoundedServer on real sockets: connections hold no worker, so slow clients cannot keep
a probe from its answer; probes go first; bad requests and failing handlers get an answer
that says so."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator

import pytest
from slow_clients import probe, probes, slow_clients

from laneway.health import Health
from laneway.observability.bounded_http import WORKERS, BoundedServer
from laneway.observability.http_request import Request
from laneway.observability.prometheus import PrometheusMetrics
from laneway.service.health_server import HealthServer

LIVE = Health(live=True, ready=True, state="running")


@pytest.mark.parametrize("clients", [16, 40])
def test_reconnecting_slow_clients_do_not_take_the_probes_or_the_metrics(clients: int) -> None:
    # Before: 16 connections for everybody, a thread each; such clients held them all and
    # every probe was answered 503 "too many connections".
    health = HealthServer(lambda: LIVE, 0)
    health.start()
    metrics = PrometheusMetrics().serve(0)
    try:
        for port, path in ((health.port, "/livez"), (metrics, "/metrics")):
            with slow_clients(port, path, clients):
                answers = probes(port, (path,), 10, timeout=5.0)
            assert [a.status for a in answers] == [200] * 10, path
    finally:
        health.stop()


def raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        return sock.recv(4096)


@pytest.fixture
def gated() -> Iterator[tuple[BoundedServer, threading.Event, list[str]]]:
    """A server whose ``/slow`` waits for the event; ``answered`` lists the paths in the
    order their answers were computed."""
    gate = threading.Event()
    answered: list[str] = []

    def handle(request: Request) -> None:
        if request.path == "/slow":
            gate.wait(10)
        if request.path == "/fail":
            raise RuntimeError("a handler's bug")
        answered.append(request.path)
        request.reply(200, "text/plain", request.path.encode())

    server = BoundedServer(("127.0.0.1", 0), handle, urgent=("/livez",))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, gate, answered
    gate.set()
    server.shutdown()
    server.server_close()


def test_probes_are_answered_before_requests_that_queued_first(
    gated: tuple[BoundedServer, threading.Event, list[str]],
) -> None:
    server, gate, answered = gated
    waiting = [
        threading.Thread(target=probe, args=(server.port, "/slow", 10.0))
        for _ in range(WORKERS + 3)
    ]
    for thread in waiting:
        thread.start()
    threading.Event().wait(0.3)  # every worker busy with /slow, three more queued
    livez = threading.Thread(target=probe, args=(server.port, "/livez", 10.0))
    livez.start()
    threading.Event().wait(0.3)
    gate.set()
    for thread in [*waiting, livez]:
        thread.join(10)
    # only the calls already running when it came were answered before it
    assert answered.index("/livez") <= WORKERS, answered


def test_bad_requests_are_answered_with_what_is_wrong(
    gated: tuple[BoundedServer, threading.Event, list[str]],
) -> None:
    server, _, answered = gated
    assert raw(server.port, b"GET /livez\r\n\r\n").startswith(b"HTTP/1.0 400 ")
    assert raw(server.port, b"GET /livez HTTP/2.0\r\n\r\n").startswith(b"HTTP/1.0 505 ")
    assert raw(server.port, b"GET /livez FTP/1.0\r\n\r\n").startswith(b"HTTP/1.0 400 ")
    many = b"".join(b"X-%d: v\r\n" % i for i in range(120))
    assert raw(server.port, b"GET /livez HTTP/1.1\r\n" + many + b"\r\n").startswith(
        b"HTTP/1.0 431 "
    )
    assert answered == []
    answer = raw(server.port, b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.0 200 ") and answer.endswith(b"\r\n\r\n/livez")
    assert b"Connection: close" in answer and b"Content-Length: 6" in answer


def test_a_failing_handler_is_a_500_and_a_warning(
    gated: tuple[BoundedServer, threading.Event, list[str]], caplog: pytest.LogCaptureFixture
) -> None:
    server, _, _ = gated
    with caplog.at_level(logging.WARNING):
        assert raw(server.port, b"GET /fail HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.0 500 ")
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "a request failed" in record.getMessage() and record.exc_info is not None
    assert probe(server.port, "/livez", 5).status == 200
