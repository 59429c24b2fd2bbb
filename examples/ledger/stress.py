"""The seed's stress table: the CSV tool at 100 .. 2,000,100 transactions, every engine.

    python examples/ledger stress                       # the whole table (a few minutes)
    python examples/ledger stress --counts 100,100100 --engines sync,process \\
        --json stress.json --plot stress.png

For each count a seeded CSV is generated (``--clients``, ``--seed``) and applied once in a
plain sequential loop in this process (the reference, and the ``sequential`` time). Then
for each engine the tool runs as its own process, ``python examples/ledger FILE --engine E
--stats S``, so that each row's memory is its own:

* ``time``: the tool's own figure, from opening the CSV to the last account written
  (``process`` adds the interpreter's start-up and imports: the whole command);
* ``process MB``: peak RSS of the tool's process, plus each worker's for the process engine;
* ``engine MB``: the ledger's own footprint (:meth:`ledger.Ledger.footprint`: accounts, tx
  maps and their ints) plus the most laneway may hold: the embedded log's capacity in rows
  (:data:`tool.ROWS_IN_LOG`) times the bytes per row of that file;
* ``check``: ``PASS`` when the accounts the tool wrote are byte for byte those of the
  sequential reference.

Exits 1 when any row fails its check.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from generator import stream
from tool import ENGINES, ROWS_IN_LOG, sequential, write_accounts
from transactions import encode

HERE = Path(__file__).resolve().parent
COUNTS = tuple(100 + 100_000 * step for step in range(21))
"""The seed's counts: 100, 100,100, 200,100, ..., 2,000,100."""
MB = 1_000_000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python examples/ledger stress", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--counts", type=_counts, default=COUNTS, help="default: the seed's 21")
    parser.add_argument("--engines", type=_engines, default=ENGINES, help="default: all four")
    parser.add_argument("--clients", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every row as JSON")
    parser.add_argument("--plot", type=Path, metavar="PNG", help="time and memory vs count")
    options = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ledger-stress-") as work:
        for count in options.counts:
            rows.extend(_one_count(Path(work), count, options))
    print_tables(rows)
    if options.json is not None:
        document = {"machine": _machine(), "argv": sys.argv, "rows": rows}
        options.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {options.json}")
    if options.plot is not None:
        plot(rows, options.plot)
        print(f"wrote {options.plot}")
    return 0 if all(row["check"] == "PASS" for row in rows) else 1


def _one_count(work: Path, count: int, options: argparse.Namespace) -> list[dict[str, Any]]:
    csv = work / f"transactions-{count}.csv"
    with csv.open("w", encoding="ascii") as out:
        out.write("type,client,tx,amount\n")
        for tx in stream(count, options.clients, options.seed):
            out.write(encode(tx).decode() + "\n")
    row_bytes = csv.stat().st_size / max(1, count)
    expected = work / "expected.csv"
    started = time.perf_counter()
    with csv.open(encoding="utf-8") as lines:
        balances = sequential(lines, _no_report)
    reference_s = time.perf_counter() - started
    with expected.open("w", encoding="ascii") as out:
        write_accounts(balances, out)
    rows = [
        {
            "count": count,
            "engine": "sequential",
            "time_s": reference_s,
            "process_s": None,
            "process_mb": None,
            "engine_mb": None,
            "check": "PASS",
        }
    ]
    for engine in options.engines:
        rows.append(_run_tool(work, csv, expected, count, engine, row_bytes, options))
        row = rows[-1]
        print(
            f"{count:>9,} {engine:>8}: {row['time_s']:7.3f} s  {row['process_mb']:7.1f} MB  "
            f"{row['check']}",
            file=sys.stderr,
            flush=True,
        )
    csv.unlink()
    return rows


def _run_tool(
    work: Path,
    csv: Path,
    expected: Path,
    count: int,
    engine: str,
    row_bytes: float,
    options: argparse.Namespace,
) -> dict[str, Any]:
    stats_path, accounts = work / "stats.json", work / "accounts.csv"
    command = [
        sys.executable, str(HERE), str(csv), "--engine", engine,
        "--partitions", str(options.partitions), "--batch", str(options.batch),
        "--stats", str(stats_path),
    ]  # fmt: skip
    started = time.perf_counter()
    with accounts.open("wb") as out:
        child = subprocess.Popen(command, stdout=out)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    process_s = time.perf_counter() - started
    if child.returncode != 0:
        return {"count": count, "engine": engine, "time_s": process_s, "process_s": process_s,
                "process_mb": usage.ru_maxrss * 1024 / MB, "engine_mb": None,
                "check": f"FAIL (exit {child.returncode})"}  # fmt: skip
    stats = json.loads(stats_path.read_text(encoding="utf-8"))
    rss = stats["rss_bytes"] + sum(stats["worker_rss_bytes"])
    buffers = min(count, ROWS_IN_LOG) * row_bytes
    same = accounts.read_bytes() == expected.read_bytes()
    return {
        "count": count,
        "engine": engine,
        "time_s": stats["seconds"],
        "process_s": process_s,
        "process_mb": rss / MB,
        "engine_mb": (stats["state_bytes"] + buffers) / MB,
        "state_mb": stats["state_bytes"] / MB,
        "buffer_bound_mb": buffers / MB,
        "records": stats["records"],
        "accounts": stats["accounts"],
        "check": "PASS" if same else "FAIL (accounts differ from the sequential run)",
    }


def print_tables(rows: list[dict[str, Any]]) -> None:
    """One table per engine, in the seed's layout, plus the check column."""
    for engine in dict.fromkeys(row["engine"] for row in rows):
        print(f"\nengine: {engine}")
        print(
            f"{'Transactions Count':<20} {'Time':<12} {'Whole command':<14} "
            f"{'Process Memory (MB)':<20} {'Engine Memory (MB)':<19} Check"
        )
        for row in rows:
            if row["engine"] != engine:
                continue
            print(
                f"{row['count']:<20} {_seconds(row['time_s']):<12} "
                f"{_seconds(row['process_s']):<14} {_mb(row['process_mb']):<20} "
                f"{_mb(row['engine_mb']):<19} {row['check']}"
            )


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Time and memory against count, one line per engine (matplotlib, no display)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 4.5), dpi=110, layout="constrained")
    time_ax, memory_ax = figure.subplots(1, 2)
    for engine in dict.fromkeys(row["engine"] for row in rows):
        mine = [row for row in rows if row["engine"] == engine and row["time_s"] is not None]
        counts = [row["count"] for row in mine]
        time_ax.plot(counts, [row["time_s"] for row in mine], marker=".", label=engine)
        if engine != "sequential":
            memory_ax.plot(counts, [row["process_mb"] for row in mine], marker=".", label=engine)
            memory_ax.plot(
                counts, [row["engine_mb"] for row in mine], ls=":", label=f"{engine} engine"
            )
    time_ax.set_title("time (open CSV -> accounts written)")
    time_ax.set_xlabel("transactions")
    time_ax.set_ylabel("seconds")
    memory_ax.set_title("peak RSS (solid) and engine memory (dotted)")
    memory_ax.set_xlabel("transactions")
    memory_ax.set_ylabel("MB")
    for ax in (time_ax, memory_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    figure.savefig(path)


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.3f}ms" if value < 1 else f"{value:.3f}s"


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _no_report(number: int, line: str, reason: str) -> None:
    raise ValueError(f"the generated file has a malformed line {number}: {reason}")


def _counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected counts >= 1, comma-separated")
    return counts


def _engines(text: str) -> tuple[str, ...]:
    engines = tuple(part.strip() for part in text.split(","))
    unknown = [engine for engine in engines if engine not in ENGINES]
    if unknown or not engines:
        raise argparse.ArgumentTypeError(
            f"{','.join(unknown) or text!r} is not an engine; choose from {', '.join(ENGINES)}"
        )
    return engines


def _machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_1m": os.getloadavg()[0],
    }
