"""`laneway bench` end to end on the embedded log: every scenario and engine, small.

One module-scoped run covers all six scenarios with all five engines (raw and process
included) on 300 messages; the other tests reuse its JSON file or run something smaller.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from laneway.bench.command import bench
from laneway.bench.engines.analysis import check
from laneway.bench.reporting.table import recommendations
from laneway.cli import main

SCENARIOS = ("trivial", "sleep", "io", "cpu", "scaling", "keys")
ENGINES = ("ceiling", "raw", "baseline", "thread", "async", "process")
LANEWAY = ENGINES[2:]
ROW_KEYS = {
    "scenario", "variant", "engine", "tps", "tps_runs", "runtime_s", "ratio_to_raw",
    "ratio_to_baseline", "messages", "handled", "distinct", "lost", "duplicates",
    "ordering_check", "latency_ms", "latency_cdf", "handler_ms_avg", "startup_s", "wall_s",
    "status", "partitions", "keys", "ordering", "concurrency", "other_cpu", "ceiling_tps",
    "ceiling_how", "ratio_to_ceiling",
}  # fmt: skip
# Engines timed as bare work next to laneway, per scenario (see laneway.bench.engines.ceilings).
CEILINGS = {
    "sleep": {"thread": "10 threads", "async": "10 coroutines"},
    "cpu": {"baseline": "1 process", "thread": "1 process", "async": "1 process"},
}
MACHINE_KEYS = {"cores", "python", "platform", "laneway", "confluent_kafka", "librdkafka"}
SMALL = ["--messages", "300", "--keys", "10", "--partitions", "2", "--work-ms", "1"]
# keys scenario: one variant per ordering mode (3); every other scenario: one variant.
VARIANTS = {"trivial": 1, "sleep": 1, "io": 1, "cpu": 1, "scaling": 1, "keys": 3}


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, ["bench", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Result, dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("bench")
    json_path, plot_dir = out / "run.json", out / "plots"
    started = time.monotonic()
    result = invoke([*SMALL, "--json", str(json_path), "--plot", str(plot_dir)])
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 90
    return result, json.loads(json_path.read_text()), plot_dir


def test_json_has_one_valid_row_per_scenario_variant_and_engine(
    full_run: tuple[Result, dict[str, Any], Path],
) -> None:
    _, doc, _ = full_run
    assert {"schema", "machine", "settings", "rows", "recommendations"} <= doc.keys()
    assert doc["machine"].keys() >= MACHINE_KEYS
    assert doc["machine"]["cores"] >= 1
    assert doc["settings"]["target"] == {"kind": "embedded"}
    assert doc["settings"]["overrides"]["messages"] == 300
    assert doc["settings"]["event_loop"] == "uvloop"  # auto, with laneway[bench] installed
    assert doc["machine"]["uvloop"] is not None
    rows = doc["rows"]
    assert len(rows) == sum(VARIANTS.values()) * len(ENGINES)
    assert {(r["scenario"], r["engine"]) for r in rows} == {
        (s, e) for s in SCENARIOS for e in ENGINES
    }
    for row in rows:
        where = f"{row['scenario']} {row['variant']} {row['engine']}"
        assert row.keys() >= ROW_KEYS, where
        assert row["status"] == "OK", where
        assert row["tps"] > 0, where
        assert row["messages"] == 300, where
        assert row["lost"] == 0 and row["duplicates"] == 0, where
        if row["engine"] == "ceiling":  # counts only: no records, no order or latency
            assert (row["ordering_check"], row["latency_ms"]) == ("n/a", None), where
            assert row["handled"] == row["distinct"] == 300, where
        else:
            expected = "n/a" if row["ordering"] == "unordered" else "PASS"
            assert row["ordering_check"] == expected, where
            assert row["latency_ms"]["p50"] <= row["latency_ms"]["p99"], where
        assert row["startup_s"] is not None and row["startup_s"] >= 0, where
        if row["engine"] == "raw":
            assert row["ratio_to_raw"] == pytest.approx(1.0)
        else:
            assert row["ratio_to_raw"] > 0, where
    keys_orderings = {r["ordering"] for r in rows if r["scenario"] == "keys"}
    assert keys_orderings == {"key", "partition", "unordered"}


def test_parallel_engines_beat_baseline_on_waits(
    full_run: tuple[Result, dict[str, Any], Path],
) -> None:
    """With 10 keys waiting 1 ms each, thread and async must overlap the waits."""
    _, doc, _ = full_run
    sleep = {r["engine"]: r for r in doc["rows"] if r["scenario"] == "sleep"}
    assert sleep["baseline"]["handler_ms_avg"] >= 1.0
    for engine in ("thread", "async"):
        assert sleep[engine]["ratio_to_baseline"] > 2.0, sleep[engine]


def test_table_and_recommendations_are_printed(
    full_run: tuple[Result, dict[str, Any], Path],
) -> None:
    result, doc, _ = full_run
    out = result.stdout
    for heading in ("scenario", "engine", "msg/s", "vs raw", "lost", "dup", "startup s"):
        assert heading in out
    assert "NOT included in runtime" in " ".join(out.split())
    assert "Recommendation" in out
    # 300-message runs last well under a second: every recommendation is withheld, and
    # the report says why.
    assert "runs lasted under 1 s" in " ".join(out.split())
    for advice in doc["recommendations"]:
        assert advice["engine"] is None and "withheld" in advice["text"], advice
        assert f"{advice['scenario']}: {advice['text']}" in out
    io = next(a for a in doc["recommendations"] if a["scenario"] == "io")
    assert io["text"].startswith("~1 ms network round trip per message")


def test_long_enough_runs_get_the_best_engine_recommended(
    full_run: tuple[Result, dict[str, Any], Path],
) -> None:
    _, doc, _ = full_run
    rows = [{**row, "runtime_s": max(1.0, row["runtime_s"])} for row in doc["rows"]]
    advice = {a["scenario"]: a for a in recommendations(rows)}
    assert set(advice) == set(SCENARIOS)
    for scenario, entry in advice.items():
        mine = [r for r in rows if r["scenario"] == scenario and r["engine"] in LANEWAY]
        best = max(mine, key=lambda r: r["ratio_to_baseline"] or 0.0)
        if scenario != "keys":  # keys: the geometric mean over its three variants decides
            assert entry["engine"] == best["engine"], entry
        assert entry["engine"] in LANEWAY and "withheld" not in entry["text"]


def test_the_bare_work_is_timed_next_to_the_engines(
    full_run: tuple[Result, dict[str, Any], Path],
) -> None:
    result, doc, _ = full_run
    cores = os.cpu_count() or 1
    for row in doc["rows"]:
        where = f"{row['scenario']} {row['engine']}"
        expected = dict(CEILINGS.get(row["scenario"], {}))
        if row["scenario"] == "cpu":
            expected["process"] = f"{cores} processes"
        if row["engine"] in expected:
            assert row["ceiling_how"] == expected[row["engine"]], where
            assert row["ceiling_tps"] > 0, where
            assert row["ratio_to_ceiling"] == pytest.approx(row["tps"] / row["ceiling_tps"])
        else:
            assert row["ceiling_tps"] is None and row["ratio_to_ceiling"] is None, where
    out = " ".join(result.stdout.split())
    assert "Work alone (no laneway, same run" in out
    assert "10 coroutines on uvloop" in out
    assert f"{cores} processes = x" in out


def test_no_ceilings_skips_the_bare_work(tmp_path: Path) -> None:
    json_path = tmp_path / "run.json"
    result = invoke(
        [*SMALL, "--scenarios", "cpu", "--engines", "baseline", "--no-ceilings",
         "--json", str(json_path)]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (row,) = json.loads(json_path.read_text())["rows"]
    assert row["ceiling_tps"] is None
    assert "Work alone" not in result.stdout


@pytest.mark.parametrize(
    ("flags", "twins"),
    [
        (["--metrics"], ["metrics"]),
        (["--metrics", "otel", "--tracing"], ["otel-metrics", "tracing"]),
    ],
)
def test_instrumented_twins_run_next_to_each_engine_and_their_cost_is_printed(
    tmp_path: Path, flags: list[str], twins: list[str]
) -> None:
    json_path = tmp_path / "run.json"
    result = invoke(
        [*SMALL, "--scenarios", "trivial", "--engines", "baseline,thread", "--no-ceilings",
         *flags, "--json", str(json_path)]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = json.loads(json_path.read_text())["rows"]
    expected = [f"{e}+{t}" if t else e for e in ("baseline", "thread") for t in ("", *twins)]
    assert [row["engine"] for row in rows] == expected
    assert all(row["lost"] == 0 and row["duplicates"] == 0 for row in rows)
    for twin in twins:
        assert f"trivial p2 k10 key thread: {twin} on " in result.stdout


def test_members_on_the_embedded_log_reports_process_engine_workers(
    full_run: tuple[Result, dict[str, Any], Path],
) -> None:
    result, doc, plot_dir = full_run
    section = doc["members"]
    assert section["members"] == []  # processes share a group only through a broker
    assert "--bootstrap-servers" in section["note"]
    workers = section["workers"]
    assert [row["count"] for row in workers] == [1, 2, 4, 8]
    for row in workers:
        assert row["error"] is None
        assert row["distinct"] == row["handled"] == 300
        assert len(row["loads"]) == row["count"] and sum(row["loads"]) == 300
    assert workers[0]["scaling"] == 1.0
    assert section["bare_1"] > 0 and section["bare_gain"] > 0
    assert "process-engine workers" in result.output
    assert (plot_dir / "members.png").stat().st_size > 1000


def test_plot_writes_png_charts(full_run: tuple[Result, dict[str, Any], Path]) -> None:
    _, _, plot_dir = full_run
    names = {p.name for p in plot_dir.glob("*.png")}
    assert {f"tps-{s}.png" for s in SCENARIOS} <= names
    assert {f"latency-{s}.png" for s in SCENARIOS} <= names
    for path in plot_dir.glob("*.png"):
        data = path.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000, path


def test_compare_prints_b_over_a(
    full_run: tuple[Result, dict[str, Any], Path], tmp_path: Path
) -> None:
    _, doc, _ = full_run
    faster = json.loads(json.dumps(doc))
    for row in faster["rows"]:
        row["tps"] *= 2 if row["engine"] == "async" else 0.5
    a_path, b_path = tmp_path / "a.json", tmp_path / "b.json"
    a_path.write_text(json.dumps(doc))
    b_path.write_text(json.dumps(faster))
    result = invoke(["compare", str(a_path), str(b_path)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if "trivial" in line]
    assert any("async" in line and "2.00x" in line for line in lines), lines
    assert any("baseline" in line and "0.50x" in line for line in lines), lines
    assert "different setups" not in result.stdout


def test_compare_reports_a_busier_machine_apart_from_the_setup(
    full_run: tuple[Result, dict[str, Any], Path], tmp_path: Path
) -> None:
    _, doc, _ = full_run
    busy = json.loads(json.dumps(doc))
    busy["machine"]["load_1m"] = doc["machine"]["load_1m"] + 2.0
    a_path, b_path = tmp_path / "a.json", tmp_path / "b.json"
    a_path.write_text(json.dumps(doc))
    b_path.write_text(json.dumps(busy))
    result = invoke(["compare", str(a_path), str(b_path)])
    out = " ".join(result.stdout.split())
    assert "different setups" not in out
    assert "the machine was busier during B" in out
    busy["machine"]["python"] = "2.7.18"
    b_path.write_text(json.dumps(busy))
    out = " ".join(invoke(["compare", str(a_path), str(b_path)]).stdout.split())
    assert "measured on different setups (differ in: python)" in out


def test_topic_prefix_must_be_a_valid_topic_name_start() -> None:
    result = CliRunner().invoke(main, ["bench", "--topic-prefix", "bad prefix!"])
    assert result.exit_code == 2
    assert "--topic-prefix" in result.output and "'bad prefix!' is not valid" in result.output


def test_compare_rejects_a_file_that_is_not_a_bench_result(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"rows": [{"engine": "raw"}]}')
    result = invoke(["compare", str(bad), str(bad)])
    assert result.exit_code == 1
    assert "lacks 'scenario', 'engine' or 'tps'" in result.output


def test_profile_writes_one_html_and_text_file_per_run(tmp_path: Path) -> None:
    profile_dir = tmp_path / "profiles"
    args = ["--scenarios", "trivial", "--engines", "raw,baseline", "--messages", "2000"]
    result = invoke([*args, "--profile", str(profile_dir)])
    assert result.exit_code == 0, result.output
    files = sorted(p.name for p in profile_dir.iterdir())
    assert files == [
        "trivial-p8-k100-key-baseline-1.html",
        "trivial-p8-k100-key-baseline-1.txt",
        "trivial-p8-k100-key-raw-1.html",
        "trivial-p8-k100-key-raw-1.txt",
    ]
    assert "ControlPlane" in (profile_dir / files[1]).read_text()
    assert "trivial-p8-k100-key-baseline-1.html" in result.stdout


def test_timeout_stops_a_run_and_marks_it(tmp_path: Path) -> None:
    json_path = tmp_path / "t.json"
    args = ["--scenarios", "sleep", "--engines", "baseline", "--messages", "5000", "--keys", "5"]
    started = time.monotonic()
    result = invoke([*args, "--timeout", "1", "--json", str(json_path)])
    assert time.monotonic() - started < 20
    assert result.exit_code == 1
    (row,) = json.loads(json_path.read_text())["rows"]
    assert row["status"] == "TIMEOUT"
    assert 0 < row["handled"] < 5000 and row["lost"] == 5000 - row["distinct"]
    assert "TIMEOUT" in result.stdout


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--engines", "raw,turbo"], "--engines"),
        (["--scenarios", "nope"], "--scenarios"),
        (["--keys", "0"], "--keys"),
        (["--partitions", "two"], "--partitions"),
        (["--ordering", "sideways"], "--ordering"),
        (["--messages", "0"], "--messages"),
        (["--work-ms", "-1"], "--work-ms"),
        (["--cpu-iterations", "0"], "--cpu-iterations"),
        (["--concurrency", "0"], "--concurrency"),
        (["--repeat", "0"], "--repeat"),
        (["--timeout", "0"], "--timeout"),
        (["--event-loop", "trio"], "--event-loop"),
    ],
)
def test_bad_values_name_the_option(args: list[str], option: str) -> None:
    result = invoke(args)
    assert result.exit_code == 2
    assert f"Invalid value for '{option}'" in result.output


def test_missing_extra_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "rich" or m.startswith("rich.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "rich", None)
    monkeypatch.delitem(sys.modules, "laneway.bench.runner", raising=False)
    result = CliRunner().invoke(bench, ["--scenarios", "trivial"])
    assert result.exit_code == 1
    assert "pip install 'laneway[bench]'" in result.output


def record(partition: int, key: bytes, offset: int, start: int, end: int) -> tuple[Any, ...]:
    return (partition, key, offset, offset, 0, start, end)


def test_ordering_check_catches_reordering_overlap_loss_and_duplicates() -> None:
    in_order = [record(0, b"a", 0, 0, 10), record(0, b"a", 1, 10, 20), record(0, b"b", 2, 5, 8)]
    good = check(in_order, 3, "key")
    assert (good.ordering, good.lost, good.duplicates) == ("PASS", 0, 0)
    swapped = [record(0, b"a", 1, 0, 10), record(0, b"a", 0, 10, 20)]
    assert check(swapped, 2, "key").ordering == "FAIL"
    overlap = [record(0, b"a", 0, 0, 10), record(0, b"a", 1, 5, 20)]
    assert check(overlap, 2, "key").ordering == "FAIL"
    # different keys may overlap under "key" but not under "partition"
    across = [record(0, b"a", 0, 0, 10), record(0, b"b", 1, 5, 20)]
    assert check(across, 2, "key").ordering == "PASS"
    assert check(across, 2, "partition").ordering == "FAIL"
    assert check(across, 2, "unordered").ordering == "n/a"
    twice = [*in_order, record(0, b"a", 1, 30, 40)]
    result = check(twice, 4, "unordered")
    assert (result.lost, result.duplicates) == (1, 1)


def test_bus_reports_latency_and_producer_blocking(tmp_path: Path) -> None:
    json_path = tmp_path / "bus.json"
    result = invoke(
        ["bus", "--rate", "500", "--seconds", "0.2", "--capacity", "4", "--json", str(json_path)]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(json_path.read_text())
    assert [row["label"] for row in doc["latency_us"]] == ["sync @ 500/s", "async @ 500/s"]
    for row in doc["latency_us"]:
        assert row["count"] == 100
        assert 0 < row["p50"] <= row["p99"] <= row["p999"] <= row["max"]
    blocks = doc["blocking_us"]
    assert len(blocks) == 2 and all(row["count"] == 100 for row in blocks)
    # 4 records per partition and a consumer at ~1 ms a message: some produce calls wait.
    assert all("calls waited" in row["extra"] for row in blocks)
    assert max(row["max"] for row in blocks) > 1_000
    assert "produce -> handler start" in result.output


def test_batch_and_results_twins_run_next_to_each_engine(tmp_path: Path) -> None:
    json_path = tmp_path / "run.json"
    result = invoke(
        [*SMALL, "--scenarios", "trivial", "--engines", "raw,baseline,async", "--no-ceilings",
         "--batch-size", "16", "--results", "--json", str(json_path)]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = json.loads(json_path.read_text())["rows"]
    twins = ("", "batch", "results", "exactly-once")
    expected = ["raw", "raw+results"]  # the bare loop writing too: the client's own cost
    expected += [f"{e}+{t}" if t else e for e in ("baseline", "async") for t in twins]
    assert [row["engine"] for row in rows] == expected
    assert all(row["status"] == "OK" for row in rows)
    assert all(row["lost"] == 0 and row["duplicates"] == 0 for row in rows)
    for twin in twins[1:]:
        assert f"trivial p2 k10 key async+{twin}: " in result.stdout
    assert "trivial p2 k10 key raw+results: " in result.stdout
