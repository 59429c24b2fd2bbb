"""``laneway run``'s probes and ``/metrics`` answer while slow clients hold connections:
16 or 40 clients, each sending its request a byte every 0.1 s and connecting again the
moment the server closes it, on real sockets against the real service (the embedded log).

Before: the server held 16 connections for everybody, a thread each, so such clients held
every slot and the probes were answered 503 (16 clients: 39 of 48 ``/livez`` probes; 40:
46 of 48): a kubelet would restart a healthy pod."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from service_runs import SUPPORT, Service, free_port, wait_until
from slow_clients import Probe, probe, probes, slow_clients

import laneway as lw

PROBES = 48
PROBE_TIMEOUT = 1.0
"""A kubelet's default ``timeoutSeconds``."""
PATHS = {"health": ("/livez", "/readyz"), "metrics": ("/metrics",)}


@dataclass(frozen=True)
class Ports:
    health: int
    metrics: int


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ports]:
    tmp_path = tmp_path_factory.mktemp("probes")
    log = lw.EmbeddedLog(tmp_path / "log")
    log.create_topic("orders", partitions=2)
    for number in range(20):
        log.produce("orders", b"v", key=b"k%d" % number)
    log.close()
    ports = Ports(free_port(), free_port())
    running = Service(tmp_path, "service_app:handle", [SUPPORT])
    running.start(
        "--log-dir", str(tmp_path / "log"), "--topic", "orders", "--group", "billing",
        "--health-port", str(ports.health), "--metrics-port", str(ports.metrics),
    )  # fmt: skip
    try:
        wait_until(lambda: probe(ports.health, "/readyz", 2).status == 200, 30, "ready")
        wait_until(lambda: probe(ports.metrics, "/metrics", 2).status == 200, 30, "metrics")
        yield ports
    finally:
        running.close()


def under_slow_clients(ports: Ports, server: str, clients: int, timeout: float) -> list[Probe]:
    port = getattr(ports, server)
    paths = PATHS[server]
    with slow_clients(port, paths[0], clients) as slow:
        wait_until(lambda: slow.connections >= clients, 10, "the slow clients to connect")
        answers = probes(port, paths, PROBES, timeout)
    assert slow.connections >= clients
    return answers


@pytest.mark.parametrize("clients", [16, 40])
@pytest.mark.parametrize("server", ["health", "metrics"])
def test_every_probe_is_answered_while_slow_clients_reconnect(
    service: Ports, server: str, clients: int
) -> None:
    answers = under_slow_clients(service, server, clients, timeout=5.0)
    statuses = [answer.status for answer in answers]
    refused = sum(status != 200 for status in statuses)
    assert refused == 0, f"{refused} of {PROBES} probes not answered 200: {statuses}"


@pytest.mark.timing
@pytest.mark.parametrize("clients", [16, 40])
@pytest.mark.parametrize("server", ["health", "metrics"])
def test_every_probe_is_answered_within_its_timeout_while_slow_clients_reconnect(
    service: Ports, server: str, clients: int
) -> None:
    answers = under_slow_clients(service, server, clients, timeout=PROBE_TIMEOUT)
    late = [a for a in answers if a.status != 200 or a.seconds > PROBE_TIMEOUT]
    slowest = max(a.seconds for a in answers)
    assert not late, f"{len(late)} of {PROBES} probes failed or late (slowest {slowest:.3f} s)"
