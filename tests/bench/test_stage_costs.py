"""``python -m laneway.bench.engines.stage_costs``: how samples map to stages, and the table
of a real run on the embedded log (its structure only: no timing is asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from laneway.bench.engines.stack_samples import (
    CONSUME_LINE,
    PACKAGE,
    STAGES,
    counts_of,
    parse_stack,
    stage_of,
)

PARENT = 'process 100:"python -m laneway.bench.engines.stage_costs";'
MAIN = PARENT + "thread (100): MainThread;"
WORKER = PARENT + 'process 200:"python -c from multiprocessing.spawn import spawn_main; x";'
RUN = f"<module> (tool.py:1);Consumer.run ({PACKAGE}/consumer.py:113);"


def frame(function: str, module: str, line: int = 1) -> str:
    return f"{function} ({PACKAGE / module}:{line})"


def stack(*frames: str, prefix: str = MAIN + RUN) -> str:
    return prefix + ";".join(frames)


COMMIT = stack(
    frame("ControlPlane.run", "control/plane.py"),
    frame("ControlPlane._commit_or_warn", "control/plane.py"),
    frame("OffsetProgress.commit", "offsets/offset_progress.py"),
    frame("GroupCoordinator.commit", "sources/embedded/coordinator.py"),
)
FETCH = stack(
    frame("ControlPlane._poll", "control/plane.py"),
    frame("messages_of", "sources/kafka/messages.py"),
)
OFFSETS = stack(
    frame("ControlPlane._accept", "control/plane.py"),
    frame("footprint", "offsets/footprint.py"),
)
SETUP = (
    MAIN + "<module> (tool.py:1);" + frame("EmbeddedLog.produce_many", "sources/embedded/log.py")
)
WORKER_START = WORKER + "thread (200): MainThread;<module> (<string>:1);_find_and_load (x.py:1)"
WORKER_SERVING = stack(
    frame("worker_main", "engines/process/worker.py"),
    frame("_serve", "engines/process/worker.py"),
    frame("run_rows", "engines/process/rows.py"),
    prefix=WORKER + "thread (200): MainThread;",
)
ENGINE_THREAD = stack(
    "Thread._bootstrap (threading.py:1002);Thread.run (threading.py:982)",
    frame("ThreadEngine._work", "engines/thread.py"),
    frame("LaneScheduler.claim", "engines/lanes.py"),
    prefix=MAIN.replace("thread (100): MainThread;", "thread (101): laneway-thread-0;"),
)
METER_THREAD = stack(
    "Thread._bootstrap (threading.py:1002);Thread.run (threading.py:982)",
    frame("CpuMeter._watch", "bench/engines/stage_costs.py"),
    prefix=MAIN.replace("thread (100): MainThread;", "thread (102): stage-costs-meter;"),
)

# Python 3.10 as py-spy reports it: no class in a function's name, a pthread address.
COMMIT_ON_310 = (
    PARENT
    + "thread (0x7F466D6AEB80);<module> (tool.py:1);"
    + ";".join(
        [
            frame("run", "consumer.py"),
            frame("_commit_or_warn", "control/plane.py"),
            frame("commit", "sources/embedded/coordinator.py"),
        ]
    )
)
SETUP_ON_310 = (
    PARENT
    + "thread (0x7F466D6AEB80);<module> (tool.py:1);"
    + frame("produce_many", "sources/embedded/log.py")
)


def test_a_stack_goes_to_the_stage_of_its_innermost_laneway_frame_unless_an_anchor_says() -> None:
    assert stage_of(parse_stack(FETCH)[2]) == ("fetch", "sources/kafka/messages.py:messages_of")
    assert stage_of(parse_stack(OFFSETS)[2]) == (
        "offset tracking",
        "offsets/footprint.py:footprint",
    )
    # Under the commit, the embedded log's own code is the commit, not a fetch.
    assert stage_of(parse_stack(COMMIT)[2]) == (
        "commit",
        "sources/embedded/coordinator.py:GroupCoordinator.commit",
    )
    assert stage_of(parse_stack(ENGINE_THREAD)[2]) == (
        "lane assignment",
        "engines/lanes.py:LaneScheduler.claim",
    )
    consume = stack(frame("KafkaRawLoop._fetch", "bench/engines/raw.py", CONSUME_LINE or 0))
    record = stack(frame("KafkaRawLoop._fetch", "bench/engines/raw.py", (CONSUME_LINE or 0) + 3))
    assert CONSUME_LINE is not None
    assert stage_of(parse_stack(consume)[2]) == (
        "fetch",
        "bench/engines/raw.py:KafkaRawLoop._fetch",
    )
    assert stage_of(parse_stack(record)[2]) == (
        "loop bookkeeping",
        "bench/engines/raw.py:KafkaRawLoop._fetch",
    )
    assert stage_of(parse_stack(MAIN + "<module> (tool.py:1)")[2]) is None


def test_only_the_measured_window_is_counted() -> None:
    raw = [
        f"{COMMIT} 3\n",
        f"{FETCH} 5\n",
        f"{SETUP} 40\n",  # producing the backlog, before Consumer.run
        f"{WORKER_START} 30\n",  # a process worker importing, before it serves
        f"{WORKER_SERVING} 7\n",
        f"{ENGINE_THREAD} 2\n",
        f"{METER_THREAD} 9\n",  # the tool's own thread
        f"{COMMIT_ON_310} 4\n",
        f"{SETUP_ON_310} 6\n",
    ]
    counts = counts_of(iter(raw))
    assert dict(counts.stages) == {
        "commit": 3 + 4,
        "fetch": 5,
        "handler call/completion": 7,
        "lane assignment": 2,
    }
    assert counts.counted == 21
    assert counts.in_workers == 7
    assert counts.skipped == 85
    assert parse_stack(WORKER_SERVING)[:2] == (2, True)
    assert parse_stack(ENGINE_THREAD)[:2] == (1, False)


def stage_costs(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The tool run on the installed laneway's Python source (its compiled core, if any,
    would hide the offset tracking stage from the sampler)."""
    command = [sys.executable, "-m", "laneway.bench.engines.stage_costs", *args]
    environment = {**os.environ, "LANEWAY_PURE_PYTHON": "1"}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=240, check=False, env=environment, cwd=cwd
    )


def test_the_table_of_a_run_on_the_embedded_log(tmp_path: Path) -> None:
    # 500,000 messages (~1,700 samples): the embedded log's fetch is 0.4-1.7% of a sync
    # consumer's samples (measured on 3.13), so 150,000 (~550 samples, a handful of fetch)
    # showed none now and then on a loaded machine.
    figures = tmp_path / "costs.json"
    done = stage_costs(
        "--engines",
        "sync",
        "--messages",
        "500000",
        "--rate",
        "2000",
        "--json",
        str(figures),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split("|")[1].strip() for line in done.stdout.splitlines() if line.startswith("|")]
    assert rows[0] == "stage"
    assert [row for row in rows if row in STAGES] == list(STAGES)
    assert "bare client loop" in done.stdout
    found = json.loads(figures.read_text())
    (sync,) = found["engines"]
    assert sync["engine"] == "sync" and sync["messages"] == 500_000
    assert sync["samples"] > 100
    assert set(sync["stages"]) == set(STAGES)
    shares = [stage["share"] for stage in sync["stages"].values()]
    assert sum(shares) == pytest.approx(1.0, abs=1e-6)
    assert sync["stages"]["fetch"]["share"] > 0
    assert sync["stages"]["offset tracking"]["share"] > 0
    micros = sum(stage["us_per_message"] for stage in sync["stages"].values())
    assert micros == pytest.approx(sync["cpu_us_per_message"], rel=1e-6)
    assert sync["cpu_us_per_message"] > 0 and sync["client_threads_us_per_message"] == 0
    raw = found["raw"]
    assert raw["messages"] == 500_000 and raw["samples"] > 0
    assert set(raw["stages"]) == {"fetch", "loop bookkeeping", "produce"}


def test_a_wrong_engine_or_source_is_named() -> None:
    done = stage_costs("--engines", "sync,fast")
    assert done.returncode == 2
    assert "fast" in done.stderr and "sync,thread,async,process" in done.stderr
    done = stage_costs("--source", "kafka")
    assert done.returncode == 2
    assert "--bootstrap-servers" in done.stderr
