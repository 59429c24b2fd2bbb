"""The bench's Twins lines: a twin against its plain row, repetition by repetition."""

from __future__ import annotations

from typing import Any

from laneway.bench.engines.instrumentation import cost_lines, paired_ratios


def row(engine: str, runs: list[float], tps: float | None = None) -> dict[str, Any]:
    """A merged bench row as far as the Twins lines read it (``tps``: the reported
    repetition, the lower middle one as merge_rows picks it)."""
    reported = tps if tps is not None else sorted(runs)[(len(runs) - 1) // 2]
    return {"scenario": "trivial", "variant": "p8", "engine": engine, "tps": reported,
            "tps_runs": runs}  # fmt: skip


def test_each_repetition_is_paired_with_its_own_plain_run() -> None:
    """A slow machine in the second repetition slows both rows of it: per repetition the
    twin is at 0.60x and 0.40x (median 0.50x), while the two reported rows, taken from
    different repetitions, would say 60,000 / 100,000 = 0.60x."""
    plain, twin = row("thread", [100_000, 200_000]), row("thread+results", [60_000, 80_000])
    assert paired_ratios(twin, plain) == [0.6, 0.4]
    [line] = cost_lines([plain, twin])
    assert "thread+results: 0.50x of thread" in line
    assert "per repetition 0.60, 0.40" in line


def test_one_repetition_says_one_ratio() -> None:
    [line] = cost_lines([row("sync", [400_000]), row("sync+exactly-once", [200_000])])
    assert "sync+exactly-once: 0.50x of sync (200,000 vs 400,000 msg/s)" in line
    assert "per repetition" not in line


def test_rows_that_ran_unequally_often_fall_back_to_the_reported_rows() -> None:
    plain, twin = row("async", [100_000, 120_000, 110_000]), row("async+tracing", [55_000, 66_000])
    assert paired_ratios(twin, plain) == [55_000 / 110_000]
    [line] = cost_lines([plain, twin])
    assert "async: tracing on 0.50x of off" in line


def test_the_state_twin_says_its_cost_per_message() -> None:
    """100,000 msg/s is 10 us per message, 50,000 is 20 us, 25,000 is 40 us: the state
    adds 10 and 20 us in the two repetitions, 15 us the median."""
    plain, twin = row("baseline", [100_000, 50_000]), row("baseline+state", [50_000, 25_000])
    [line] = cost_lines([plain, twin])
    assert "baseline+state: 0.50x of baseline, +15.0 us per message" in line


def test_the_state_twin_runs_on_the_embedded_log() -> None:
    from click.testing import CliRunner

    from laneway.bench.command import bench

    args = ["--scenarios", "trivial", "--engines", "baseline", "--messages", "2000", "--state"]
    done = CliRunner().invoke(bench, args)
    assert done.exit_code == 0, done.output
    assert "baseline+state" in done.output and "us per message" in done.output
    assert "lost 0, dup 0" in done.output


def test_the_batch_state_twin_is_measured_against_the_batch_twin() -> None:
    """What state adds to a batch handler: 200,000 msg/s (5 us) as a batch, 100,000 (10 us)
    as a stateful batch, so +5 us per message against the batch row, not the plain one."""
    plain = row("baseline", [400_000])
    batch, state = row("baseline+batch", [200_000]), row("baseline+batch+state", [100_000])
    lines = cost_lines([plain, batch, state])
    assert any("baseline+batch: 0.50x of baseline" in line for line in lines)
    [line] = [line for line in lines if "batch+state" in line]
    assert "baseline+batch+state: 0.50x of baseline+batch, +5.0 us per message" in line


def test_the_batch_state_twin_runs_with_batch_size_and_state() -> None:
    from click.testing import CliRunner

    from laneway.bench.command import bench

    args = ["--scenarios", "trivial", "--engines", "baseline,process", "--messages", "2000"]
    done = CliRunner().invoke(bench, [*args, "--state", "--batch-size", "50"])
    assert done.exit_code == 0, done.output
    for engine in ("baseline", "process"):
        assert f"{engine}+batch+state: " in done.output
        assert f"of {engine}+batch, " in done.output
    # plain, batch, state and batch+state rows of both engines, nothing lost or repeated
    assert done.output.count("lost 0, dup 0") == 8, done.output
