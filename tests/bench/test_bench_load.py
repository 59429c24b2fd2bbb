"""``laneway bench --scenarios spike,paced``: open-loop reservations on the real broker and
PostgreSQL, topologies, rows, the verdict and the slowest request's trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from opentelemetry import trace
from opentelemetry.util._once import Once

from laneway.bench.load.report import load_row, merge_load_rows, verdict
from laneway.bench.load.run import Load, LoadOutcome
from laneway.bench.load.topologies import DEFAULT_TOPOLOGIES, parse_topology
from laneway.cli import main
from laneway.options import EngineKind

LOAD_KEYS = {
    "scenario", "variant", "engine", "topology", "status", "messages", "done",
    "dead_lettered", "lost", "duplicates", "ordering_check", "database_check", "runtime_s",
    "tps", "latency_ms", "latency_cdf", "cpu_s", "per_cpu_s", "peak_rss_mb", "runs", "trace",
}  # fmt: skip


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, ["bench", *args], catch_exceptions=False)


def test_topologies_read_the_way_they_are_written() -> None:
    four = parse_topology("4x  sync")
    assert (four.name, four.engine, four.members) == ("4x sync", EngineKind.SYNC, 4)
    assert four.concurrency == 1
    assert "--concurrency" not in four.run_flags()
    limited = parse_topology("2x async c64 adaptive max250")
    assert (limited.members, limited.concurrency) == (2, 64)
    assert limited.adaptive and limited.max_rate == 250.0
    flags = limited.run_flags()
    assert flags[flags.index("--concurrency-limit") + 1] == "adaptive"
    assert flags[flags.index("--max-rate") + 1] == "250"
    assert limited.pool_size(16) == 16 and parse_topology("async c8").pool_size(16) == 8
    assert parse_topology("thread").concurrency == 64  # the engine's default
    assert [parse_topology(t).name for t in DEFAULT_TOPOLOGIES] == list(DEFAULT_TOPOLOGIES)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("4x process", "not a topology"),
        ("sync c8", "one message at a time"),
        ("sync adaptive", "thread or async"),
        ("0x async", "members must be 1-64"),
        ("async c64 max0", "above 0"),
    ],
)
def test_a_bad_topology_is_refused_with_the_syntax(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_topology(text)
    result = invoke(["--scenarios", "spike", "--topologies", text])
    assert result.exit_code == 2 and says in result.output


def test_spike_and_paced_take_one_partition_count() -> None:
    result = invoke(["--scenarios", "spike", "--partitions", "4,8"])
    assert result.exit_code == 2 and "one partition count" in result.output


def outcome(
    name: str, seconds: float, cpu: float, dead: int = 0, scenario: str = "spike"
) -> LoadOutcome:
    """A finished run whose 100 requests took 10 ms .. ``seconds`` each."""
    result = LoadOutcome(parse_topology(name), Load(scenario, 100))
    result.timings = [
        (f"r{i}", 1000.0, 1000.0 + 0.01 + (seconds - 0.01) * i / 99) for i in range(100 - dead)
    ]
    result.dead_letters, result.cpu_s = dead, cpu
    result.peak_rss_mb = 50.0 * result.topology.members
    return result


def test_rows_merge_repetitions_and_the_verdict_names_the_winners() -> None:
    rows = merge_load_rows(
        [
            load_row(outcome("async c64", 0.5, 0.2), "v"),
            load_row(outcome("async c64", 0.7, 0.2), "v"),
            load_row(outcome("async c64", 0.6, 0.2), "v"),
            load_row(outcome("4x sync", 0.8, 0.4), "v"),
            load_row(outcome("1x sync", 0.4, 0.9, dead=3), "v"),
        ]
    )
    best = next(r for r in rows if r["engine"] == "async c64")
    assert best.keys() >= LOAD_KEYS
    assert best["repeats"] == 3 and best["runtime_s"] == pytest.approx(0.6)
    assert [run["sell_out_s"] for run in best["runs"]] == pytest.approx([0.5, 0.7, 0.6])
    assert best["latency_ms"]["max"] == pytest.approx(600, rel=0.01)
    dead = next(r for r in rows if r["engine"] == "1x sync")
    assert (dead["done"], dead["dead_lettered"], dead["lost"]) == (97, 3, 0)
    lines = verdict(rows)
    assert lines[0] == "spike v:"
    assert lines[1].startswith("  sell-out: async c64 0.60 s (next: 4x sync 0.80 s")
    assert "1x sync" not in "".join(lines)  # it dead-lettered requests: no contest
    paced = [load_row(outcome(t, 0.5, 0.2, scenario="paced"), "v") for t in ("1x sync", "4x sync")]
    assert [line.split(":")[0] for line in verdict(paced)] == [
        "paced v", "  p99", "  requests per CPU second", "  peak RSS"
    ]  # fmt: skip


@pytest.mark.kafka
@pytest.mark.postgres
def test_spike_and_paced_through_two_topologies_with_traces(
    kafka_bootstrap: str, postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --traces makes the bench's process an SDK one for good (a CLI process then exits);
    # here that process is pytest's, so the global provider is put back afterwards.
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", trace._TRACER_PROVIDER)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    json_path, plots, traces = tmp_path / "load.json", tmp_path / "plots", tmp_path / "spans"
    result = invoke(
        [
            "--scenarios", "spike,paced", "--messages", "200", "--rate", "100",
            "--duration", "1", "--topologies", "async c8,2x sync",
            "--bootstrap-servers", kafka_bootstrap, "--postgres-dsn", postgres_dsn,
            "--topic-prefix", "load-test", "--traces", str(traces),
            "--json", str(json_path), "--plot", str(plots),
        ]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(json_path.read_text())
    rows = document["rows"]
    assert {(r["scenario"], r["engine"]) for r in rows} == {
        (scenario, topology)
        for scenario in ("spike", "paced")
        for topology in ("async c8", "2x sync")
    }
    for row in rows:
        assert row.keys() >= LOAD_KEYS
        expected = 200 if row["scenario"] == "spike" else 100
        assert (row["status"], row["messages"], row["done"]) == ("OK", expected, expected)
        assert (row["lost"], row["dead_lettered"], row["database_check"]) == (0, 0, "PASS")
        assert 0 < row["latency_ms"]["p50"] <= row["latency_ms"]["p99"] <= row["runtime_s"] * 1e3
        assert row["cpu_s"] > 0 and row["peak_rss_mb"] > 20
        names = [line.split()[0] for line in row["trace"]]
        assert names[:2] == ["send", "process"], row["trace"]  # producer -> laneway
        assert {"acquire", "SELECT"} <= set(names), row["trace"]  # -> the database
    two = next(r for r in rows if r["engine"] == "2x sync")
    assert two["topology"]["members"] == 2
    assert document["settings"]["load"]["topologies"] == ["async c8", "2x sync"]
    assert (plots / "latency-spike.png").is_file() and (plots / "latency-paced.png").is_file()
    assert "Which topology wins" in result.output and "Slowest request" in result.output
    assert "[ticketing-producer]" in result.output and "[ticketing-consumer]" in result.output


@pytest.mark.kafka
@pytest.mark.postgres
def test_requests_that_fail_for_good_are_counted_as_dead_letters_not_lost(
    kafka_bootstrap: str, postgres_dsn: str, tmp_path: Path
) -> None:
    """From 1 s to 2 s of a 3 s paced run every reservation holds a lock for 1 s and the
    0.05 s statement timeout cancels it: requests of the window's first 0.3 s fail all four
    attempts (retries within 0.7 s) and are dead-lettered; every request is accounted for."""
    json_path = tmp_path / "slowed.json"
    result = invoke(
        [
            "--scenarios", "paced", "--rate", "50", "--duration", "3", "--slow-db", "1000",
            "--statement-timeout", "0.05", "--topologies", "async c8",
            "--bootstrap-servers", kafka_bootstrap, "--postgres-dsn", postgres_dsn,
            "--topic-prefix", "load-test", "--json", str(json_path),
        ]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (row,) = json.loads(json_path.read_text())["rows"]
    assert (row["status"], row["messages"], row["lost"]) == ("OK", 150, 0)
    assert row["dead_lettered"] > 0 and row["done"] + row["dead_lettered"] == 150
    assert row["database_check"] == "PASS"
    assert row["slow_window_s"][0] == pytest.approx(1.0, abs=0.2)
