"""The probes' HTTP server on real sockets: loopback by default, no keys unless asked, and
bounded: a silent client is dropped, connections beyond the limit get a 503 at once."""

from __future__ import annotations

import json
import logging
import socket
import struct
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from laneway.health import Health
from laneway.observability.bounded_http import MAX_REQUEST_BYTES
from laneway.service.health_server import HealthServer
from laneway.types import Stall, Waiting

BEHIND = Waiting(messages=4, keys=1, names=(b"alice@example.com",), partitions=(("orders", 3),))
STALLED = Health(
    live=True,
    ready=False,
    state="running",
    reason="1 message(s) in their handler longer than stall_timeout=1 s",
    stalled=(Stall("orders", 3, 17, b"alice@example.com", 2.5, BEHIND, 12),),
)


def serve(**options: object) -> HealthServer:
    server = HealthServer(lambda: STALLED, 0, **options)  # type: ignore[arg-type]
    server.start()
    return server


@pytest.fixture
def server() -> Iterator[HealthServer]:
    running = serve(timeout=0.5, max_connections=4)
    yield running
    running.stop()


def get(server: HealthServer, path: str = "/readyz") -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def raw(server: HealthServer, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(request)
        return sock.recv(4096)


def wait_for(condition: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def test_it_listens_on_loopback_unless_told() -> None:
    default = serve()
    everywhere = serve(host="0.0.0.0")
    try:
        assert default._server.server_address[0] == "127.0.0.1"
        assert everywhere._server.server_address[0] == "0.0.0.0"
    finally:
        default.stop()
        everywhere.stop()


def test_readyz_shows_positions_ages_what_waits_and_keys_only_when_asked(
    server: HealthServer,
) -> None:
    status, body = get(server)
    assert status == 503
    waiting = {"messages": 4, "keys": 1, "partitions": [{"topic": "orders", "partition": 3}]}
    assert body["stalled"] == [
        {
            "topic": "orders",
            "partition": 3,
            "offset": 17,
            "seconds": 2.5,
            "waiting": waiting,
            "held_back": 12,
        }
    ]
    assert "alice" not in json.dumps(body)
    showing = serve(show_keys=True)
    try:
        [stalled] = get(showing)[1]["stalled"]  # type: ignore[misc]
        assert stalled["key"] == "alice@example.com"
        assert stalled["waiting"]["keys_named"] == ["alice@example.com"]
    finally:
        showing.stop()


@pytest.mark.parametrize("method", [b"POST", b"PUT", b"DELETE", b"HEAD", b"BREW"])
def test_methods_other_than_get_are_405(server: HealthServer, method: bytes) -> None:
    answer = raw(server, method + b" /readyz HTTP/1.0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.0 405 "), answer
    assert b"Allow: GET" in answer


def test_an_oversized_request_line_or_header_block_is_refused(server: HealthServer) -> None:
    long_path = b"/" + b"a" * MAX_REQUEST_BYTES
    assert raw(server, b"GET " + long_path + b" HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.0 414 ")
    headers = b"".join(b"X-%d: %s\r\n" % (i, b"v" * 100) for i in range(100))
    answer = raw(server, b"GET /readyz HTTP/1.0\r\n" + headers + b"\r\n")
    assert answer.startswith(b"HTTP/1.0 431 "), answer[:80]


def test_a_client_that_never_sends_is_dropped_after_the_timeout(server: HealthServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as silent:
        assert wait_for(lambda: server.connections == 1, 2)
        began = time.monotonic()
        assert silent.recv(1) == b"", "the server closed the connection"
        assert time.monotonic() - began < 2
    assert wait_for(lambda: server.connections == 0, 2)
    assert get(server)[0] == 503, "still serving"


def test_many_connections_do_not_make_many_threads() -> None:
    server = serve(timeout=5.0, max_connections=4)
    threads_before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(40)]
    try:
        assert wait_for(lambda: server.connections == 4, 2)
        time.sleep(0.1)
        assert server.connections == 4
        assert threading.active_count() - threads_before <= 4
        refused = idle[-1].recv(4096)
        assert refused.startswith(b"HTTP/1.0 503 ") and b"too many connections" in refused
    finally:
        for sock in idle:
            sock.close()
    try:
        assert wait_for(lambda: server.connections == 0, 3)
        assert get(server)[0] == 503 and get(server, "/livez")[0] == 200
    finally:
        server.stop()


def drip(port: int, stop: threading.Event, closed_after: list[float]) -> None:
    """A client that sends its request a byte every 0.1 s, never finishing; records how
    long after connecting the server closed the connection."""
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for byte in b"GET /livez HTTP/1.0\r\nX-Slow: " + b"x" * 1000:
            if stop.is_set():
                return
            try:
                sock.sendall(bytes([byte]))
                time.sleep(0.1)
            except OSError:
                break
            sock.setblocking(False)
            try:
                if sock.recv(1) == b"":
                    break
            except BlockingIOError:
                pass
            except OSError:
                break
            finally:
                sock.setblocking(True)
    closed_after.append(time.monotonic() - began)


def test_a_client_sending_a_byte_at_a_time_is_closed_at_its_deadline() -> None:
    # Before: the timeout restarted with every byte, so as many drip-feeding clients as
    # there are connection slots held them all for as long as they liked, and /livez
    # answered 503 ("too many connections"): an orchestrator would restart a healthy pod.
    server = serve(timeout=0.6, max_connections=4)
    stop = threading.Event()
    closed_after: list[float] = []
    clients = [
        threading.Thread(target=drip, args=(server.port, stop, closed_after)) for _ in range(4)
    ]
    try:
        for client in clients:
            client.start()
        assert wait_for(lambda: len(closed_after) == 4, 5.0), (
            "the dripping clients kept their slots"
        )
        assert max(closed_after) < 1.5
        assert get(server, "/livez")[0] == 200
    finally:
        stop.set()
        for client in clients:
            client.join(10)
        server.stop()


def test_clients_that_leave_before_the_answer_print_nothing(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # Before: each one printed socketserver's ~31-line traceback to stderr, whatever the
    # log format and level (20 connections: 620 lines of text in a JSON log).
    server = serve(timeout=2.0, max_connections=4)
    try:
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.sendall(b"GET /readyz HTTP/1.0\r\n\r\n")
            sock.close()  # a reset: the answer finds nobody
        # the resets free their slots (4 of them): the server answers again, and holds
        # nothing once it has (a burst past the limit may be refused while it lasts)
        assert wait_for(lambda: get(server, "/livez")[0] == 200, 5.0)
        assert wait_for(lambda: server.connections == 0, 5.0)
    finally:
        server.stop()
    assert "Traceback" not in capfd.readouterr().err
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
