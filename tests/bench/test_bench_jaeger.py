"""``laneway bench --scenarios spike --otlp-endpoint URL --jaeger URL``: the spike's traces
exported to a real Jaeger, read back from its query API, and their figures beside the
bench's own; the options' checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.util._once import Once

from laneway.bench.load import services
from laneway.bench.load.services import Services
from laneway.cli import main

FAKE_JAEGER = """import json, pathlib, sys
here = pathlib.Path(__file__).parent
command = sys.argv[1]
(here / "calls").open("a").write(command + "\\n")
endpoints = {"otlp_http": "http://127.0.0.1:4318", "query": "http://127.0.0.1:16686"}
if command == "status" and not (here / "running").exists():
    sys.exit(1)
if command == "start":
    (here / "running").touch()
    print("building... done")
if command in ("status", "start"):
    print(json.dumps(endpoints))
"""


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, ["bench", *args], catch_exceptions=False)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--scenarios", "spike", "--jaeger", "http://127.0.0.1:1"], "give both"),
        (["--scenarios", "spike", "--otlp-endpoint", "127.0.0.1:4318"], "http:// or https://"),
        (["--scenarios", "trivial", "--otlp-endpoint", "http://x:1"], "spike and paced"),
        (
            ["--scenarios", "spike", "--jaeger", "auto", "--otlp-endpoint", "http://x:1"],
            "leave out --otlp-endpoint",
        ),
    ],
)
def test_the_tracing_backend_options_are_checked(args: list[str], says: str) -> None:
    result = CliRunner().invoke(main, ["bench", *args])
    assert result.exit_code == 2, result.output
    assert says in result.output


def test_jaeger_auto_uses_the_checkouts_jaeger_and_stops_one_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "jaeger").write_text(FAKE_JAEGER)
    monkeypatch.setattr(services, "CHECKOUT", tmp_path)
    with Services(say=lambda text: None) as checkout:
        assert checkout.jaeger()["query"] == "http://127.0.0.1:16686"
    assert (scripts / "calls").read_text().split() == ["status", "start", "stop"]
    with Services(say=lambda text: None) as checkout:  # running now: used, left running
        assert checkout.jaeger()["otlp_http"] == "http://127.0.0.1:4318"
    assert (scripts / "calls").read_text().split()[3:] == ["status"]


@pytest.mark.kafka
@pytest.mark.postgres
@pytest.mark.jaeger
@pytest.mark.timeout(300)
def test_the_spike_s_traces_come_back_from_jaeger_and_agree_with_the_bench(
    kafka_bootstrap: str,
    postgres_dsn: str,
    jaeger_endpoints: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # --otlp-endpoint makes the bench's process an SDK one for good (a CLI process then
    # exits); here that process is pytest's, so the global provider is put back afterwards.
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    json_path, plots = tmp_path / "spike.json", tmp_path / "plots"
    result = invoke(
        [
            "--scenarios", "spike", "--messages", "200", "--topologies", "async c8",
            "--bootstrap-servers", kafka_bootstrap, "--postgres-dsn", postgres_dsn,
            "--topic-prefix", "jaeger-bench",
            "--otlp-endpoint", jaeger_endpoints["otlp_http"], "--jaeger", jaeger_endpoints["query"],
            "--json", str(json_path), "--plot", str(plots),
        ]
    )  # fmt: skip
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        provider.shutdown()
    assert result.exit_code == 0, result.output
    (row,) = json.loads(json_path.read_text())["rows"]
    assert (row["status"], row["done"]) == ("OK", 200)
    traced: dict[str, Any] = row["jaeger"]
    assert (traced["traces"], traced["incomplete"]) == (200, 0)
    # The same requests, measured two ways: a trace starts at the producer's span, at most
    # the record timestamp's millisecond before the bench's start, and ends after the
    # outcome's database timestamp (the commit, the reply and the handler's return).
    assert traced["start_gap_ms"]["max"] < 1.0 + 1e-3
    assert traced["end_gap_ms"]["min"] > 0
    bench, traces = row["latency_ms"], traced["latency_ms"]
    for key in ("p50", "p95", "p99", "max"):
        assert traces[key] >= bench[key] - 1.0, (key, traces, bench)
    assert traced["sell_out_s"] >= row["runtime_s"] - 1e-3
    longest = traced["longest"]
    assert longest["ms"] == pytest.approx(traces["max"], rel=1e-3)
    assert row["runs"][0]["longest_trace_ms"] == longest["ms"]
    names = [span["name"] for span in longest["spans"]]
    assert names[0].startswith("send ") and names[1].startswith("process ")
    assert {"acquire connection", "SELECT reserve"} <= set(names)
    assert {span["service"] for span in longest["spans"]} == {
        "ticketing-producer",
        "ticketing-consumer",
    }
    drawn = plots / "trace-spike-async-c8.png"
    assert drawn.stat().st_size > 10_000
    document = json.loads((plots / "trace-spike-async-c8.json").read_text())
    assert document["result"]["resourceSpans"], "the query API's own document"
    assert "Read back from Jaeger" in result.output and "Longest trace" in result.output
