"""`laneway bench --keys ...,zipf` and `--work-ms` grids: skewed keys, one run per work value,
and the hardware line every report starts with."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import laneway
from laneway import compiled
from laneway.bench.engines.key_spread import UNIFORM, ZIPF, key_indexes, lane_sizes
from laneway.bench.engines.scenarios import SCENARIOS, Overrides, plan, variants
from laneway.cli import main


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, ["bench", *args], catch_exceptions=False)


def test_uniform_keys_take_turns() -> None:
    assert list(key_indexes(7, 3)) == [0, 1, 2, 0, 1, 2, 0]
    assert lane_sizes(10, 4) == [3, 3, 2, 2]
    assert lane_sizes(3, 10) == [1, 1, 1]


def test_zipf_keys_put_most_messages_on_a_few_hot_keys() -> None:
    drawn = key_indexes(100_000, 100, ZIPF)
    assert list(drawn) == list(key_indexes(100_000, 100, ZIPF)), "the same backlog every run"
    counts = Counter(drawn)
    assert set(counts) <= set(range(100))
    # Zipf's law over 100 ranks: rank 0 carries 1/H(100) = 19.3%, the ten hottest 56.5%.
    assert counts[0] / 100_000 == pytest.approx(0.193, abs=0.01)
    top_ten = sum(count for _, count in counts.most_common(10))
    assert top_ten / 100_000 == pytest.approx(0.565, abs=0.015)
    assert counts[0] > 5 * counts[9] > 5 * counts[99]  # about 10x per tenfold rank
    sizes = lane_sizes(100_000, 100, ZIPF)
    assert sum(sizes) == 100_000 and sizes == sorted(sizes, reverse=True)


def test_an_unknown_spread_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'pareto'"):
        key_indexes(10, 2, "pareto")


def test_a_work_grid_and_two_spreads_make_one_variant_each() -> None:
    overrides = Overrides(keys=(10,), spreads=(UNIFORM, ZIPF), work_ms=(0.0, 10.0))
    grid = overrides.apply(SCENARIOS["sleep"])
    assert [v.label for v in variants(grid)] == [
        "p8 k10 key 0ms",
        "p8 k10 zipf key 0ms",
        "p8 k10 key 10ms",
        "p8 k10 zipf key 10ms",
    ]
    runs = plan(["sleep"], ["thread"], overrides, repeat=1)
    assert [(r.scenario.work_ms, r.variant.spread) for r in runs] == [
        (0.0, UNIFORM),
        (0.0, ZIPF),
        (10.0, UNIFORM),
        (10.0, ZIPF),
    ]
    assert grid.headline() == "~0/10 ms blocking wait per message"
    single = Overrides(work_ms=(2.0,)).apply(SCENARIOS["sleep"])
    assert [v.label for v in variants(single)] == ["p8 k100 key"]
    assert single.work_ms == 2.0 and single.headline() == "~2 ms blocking wait per message"


def test_a_zipf_run_reports_per_variant_rows_and_the_hot_lane_bounds_its_ceiling(
    tmp_path: Path,
) -> None:
    json_path = tmp_path / "run.json"
    result = invoke(
        [
            "--scenarios", "sleep", "--engines", "raw,baseline,thread",
            "--keys", "20,uniform,zipf", "--work-ms", "0,2", "--messages", "400",
            "--partitions", "2", "--json", str(json_path),
        ]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("machine: ")
    first_line = result.stdout.splitlines()[0]
    assert "cores" in first_line and "confluent-kafka 2." in first_line, first_line
    code = "compiled" if compiled.active() else "Python source"
    assert f"laneway {laneway.__version__} ({code})," in first_line, first_line
    doc = json.loads(json_path.read_text())
    assert doc["machine"]["laneway_compiled"] is compiled.active()
    rows = {(r["variant"], r["engine"]): r for r in doc["rows"]}
    labels = ["p2 k20 key 0ms", "p2 k20 zipf key 0ms", "p2 k20 key 2ms", "p2 k20 zipf key 2ms"]
    assert set(rows) == {(label, e) for label in labels for e in ("raw", "baseline", "thread")}
    for (label, engine), row in rows.items():
        assert row["status"] == "OK" and row["ordering_check"] == "PASS", (label, engine)
        assert (row["lost"], row["duplicates"]) == (0, 0), (label, engine)
        assert row["key_spread"] == (ZIPF if "zipf" in label else UNIFORM)
        assert row["work_ms"] == (2.0 if label.endswith("2ms") else 0.0)
    hot_lanes = lane_sizes(400, 20, ZIPF)
    uniform = rows[("p2 k20 key 2ms", "thread")]
    skewed = rows[("p2 k20 zipf key 2ms", "thread")]
    assert uniform["ceiling_how"] == "20 threads"
    assert skewed["ceiling_how"] == f"{len(hot_lanes)} threads"
    # 20 lanes of 20 waits against a hot lane of ~110: the bare work itself is ~5x slower.
    assert hot_lanes[0] > 100
    assert skewed["ceiling_tps"] < uniform["ceiling_tps"] / 2
    assert "~0/2 ms blocking wait per message" in " ".join(result.stdout.split())


@pytest.mark.parametrize(
    "args",
    [
        ["--keys", "100,skewed"],
        ["--keys", "0,zipf"],
        ["--work-ms", "1,x"],
        ["--work-ms", "0,20000"],
    ],
)
def test_bad_keys_and_work_values_name_the_option(args: list[str]) -> None:
    result = invoke(args)
    assert result.exit_code == 2
    assert f"Invalid value for '{args[0]}'" in result.output


def test_a_work_grid_is_refused_for_scenarios_that_take_one_value() -> None:
    result = invoke(["--scenarios", "members", "--work-ms", "1,2"])
    assert result.exit_code == 2
    assert "--work-ms" in result.output and "members scenario takes one value" in result.output
