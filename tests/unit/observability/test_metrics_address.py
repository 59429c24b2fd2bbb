"""``/metrics`` listens on loopback unless an address is given."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

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
