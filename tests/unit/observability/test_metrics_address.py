"""``/metrics`` listens on loopback unless an address is given, and its server is bounded
like the health probes' (a client that connects and says nothing does not hold a thread)."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from laneway.observability import bounded_http
from laneway.observability.prometheus import PrometheusMetrics, serve_metrics


def listening_on(port: int) -> set[str]:
    """The local addresses of the sockets listening on TCP ``port`` (``/proc/net/tcp``)."""
    found: set[str] = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        address, hex_port = fields[1].split(":")
        if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
            found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_metrics_listens_on_loopback_by_default() -> None:
    port = free_port()
    serve_metrics(port)
    assert listening_on(port) == {"127.0.0.1"}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        assert b"laneway_messages_processed_total" in reply.read()
    assert listening_on(PrometheusMetrics().serve(0)) == {"127.0.0.1"}


def test_an_address_opens_it_to_every_interface() -> None:
    assert listening_on(PrometheusMetrics().serve(0, "0.0.0.0")) == {"0.0.0.0"}


def test_idle_connections_are_refused_past_the_limit_and_closed_after_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: prometheus-client's server kept a thread per connection for as long as it
    # stayed open (300 idle connections, 302 threads, still there 12 s later).
    monkeypatch.setattr(bounded_http, "REQUEST_TIMEOUT", 0.5)
    threads = threading.active_count()
    port = PrometheusMetrics().serve(0)
    server_threads = 1 + bounded_http.WORKERS  # its event loop and its workers
    idle = [
        socket.create_connection(("127.0.0.1", port))
        for _ in range(bounded_http.MAX_PER_ADDRESS + 4)
    ]
    try:
        last = idle[-1]
        last.settimeout(5)
        assert b"too many connections" in last.recv(4096)
        assert threading.active_count() <= threads + server_threads, "no thread per connection"
        for connection in idle[: bounded_http.MAX_PER_ADDRESS]:
            connection.settimeout(5)
            assert connection.recv(4096) == b"", "an idle connection is closed"
    finally:
        for connection in idle:
            connection.close()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        assert reply.status == 200


def test_openmetrics_when_asked_and_only_get_on_metrics() -> None:
    port = PrometheusMetrics().serve(0)
    ask = urllib.request.Request(
        f"http://127.0.0.1:{port}/metrics",
        headers={"Accept": "application/openmetrics-text; version=1.0.0"},
    )
    with urllib.request.urlopen(ask, timeout=5) as reply:
        assert reply.headers["Content-Type"].startswith("application/openmetrics-text")
        assert reply.read().endswith(b"# EOF\n")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        assert reply.headers["Content-Type"].startswith("text/plain")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=5)
    assert missing.value.code == 404
    post = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(post, timeout=5)
    assert refused.value.code == 405
