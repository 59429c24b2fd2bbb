"""``GET /backlog`` on the probes' server, on real sockets: the JSON KEDA's metrics-api
scaler reads, fresh at every request, GET only, and only where a backlog is given."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from laneway.control.backlog import Backlog
from laneway.health import Health
from laneway.offsets.backlog import PartitionBacklog
from laneway.service.health_server import HealthServer

READY = Health(live=True, ready=True, state="running")
HELD = Backlog(
    backlog=3,
    lag=10,
    rate=2.5,
    drain_seconds=1.2,
    partitions=(PartitionBacklog("orders", 0, 10, 20, 10, 7, 3, 1),),
)


def request(port: int, path: str, method: str = "GET") -> tuple[int, bytes]:
    call = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(call, timeout=5) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.fixture
def figures() -> list[Backlog]:
    return [HELD]


@pytest.fixture
def server(figures: list[Backlog]) -> Iterator[HealthServer]:
    running = HealthServer(lambda: READY, 0, backlog=lambda: figures[-1])
    running.start()
    yield running
    running.stop()


def test_backlog_is_served_as_the_json_keda_reads(server: HealthServer) -> None:
    status, body = request(server.port, "/backlog")
    assert status == 200
    assert json.loads(body) == {
        "backlog": 3,
        "lag": 10,
        "rate": 2.5,
        "drain_seconds": 1.2,
        "partitions": [
            {
                "topic": "orders",
                "partition": 0,
                "committed": 10,
                "end": 20,
                "lag": 10,
                "finished_beyond": 7,
                "backlog": 3,
            }
        ],
        "stalled": [],
    }


def test_each_request_reads_the_latest_sample(server: HealthServer, figures: list[Backlog]) -> None:
    figures.append(Backlog(None, None, 4.0, None))  # a share group: nothing to know
    status, body = request(server.port, "/backlog?format=json")
    assert status == 200
    assert json.loads(body) == {
        "backlog": None,
        "lag": None,
        "rate": 4.0,
        "drain_seconds": None,
        "partitions": [],
        "stalled": [],
    }


def test_backlog_is_get_only_and_unknown_paths_name_it(server: HealthServer) -> None:
    assert request(server.port, "/backlog", "POST")[0] == 405
    status, body = request(server.port, "/metrics")
    assert status == 404
    assert json.loads(body) == {"error": "unknown path /metrics; try /livez, /readyz, /backlog"}


def test_without_a_backlog_there_is_no_backlog_path() -> None:
    probes = HealthServer(lambda: READY, 0)
    probes.start()
    try:
        status, body = request(probes.port, "/backlog")
        assert status == 404
        assert json.loads(body) == {"error": "unknown path /backlog; try /livez, /readyz"}
        assert request(probes.port, "/readyz")[0] == 200
    finally:
        probes.stop()
