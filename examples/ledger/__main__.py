"""The ledger as a command-line tool (``python examples/ledger ...``).

    python examples/ledger transactions.csv > accounts.csv
    python examples/ledger transactions.csv --engine process --partitions 8 > accounts.csv
    python examples/ledger --generate 100000 --seed 7 > transactions.csv
    python examples/ledger stress --json stress.json --plot stress.png

The first form streams the file through an embedded log and laneway (see :mod:`tool`) and
writes ``client,available,held,total,locked`` with four decimal places. A malformed row is
reported on stderr with its line number and skipped. ``stress`` runs the seed's table
(see :mod:`stress`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path

# `python examples/ledger` puts this directory first on sys.path: the modules below are
# top-level, and the process engine's workers find them the same way.
from generator import stream
from lanes import peak_rss, traced_peak
from tool import ENGINES, ToolRun, run_csv, write_accounts
from transactions import encode

HEADER = "type,client,tx,amount\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["stress"]:
        from stress import main as stress_main

        return stress_main(args[1:])
    parser = argparse.ArgumentParser(
        prog="python examples/ledger",
        description="Apply transactions.csv through laneway; print accounts.csv to stdout.",
        epilog="python examples/ledger stress --help: the stress table.",
    )
    parser.add_argument("input", nargs="?", type=Path, help="the transactions CSV file")
    parser.add_argument("--engine", choices=ENGINES, default="sync", help="default: sync")
    parser.add_argument("--partitions", type=_positive, default=8, help="default: 8")
    parser.add_argument(
        "--lanes", type=_positive, default=64, help="client lanes (client %% lanes); default 64"
    )
    parser.add_argument(
        "--batch",
        type=_positive,
        default=1_000,
        help="rows per lane record; 1 = one record per transaction (default: 1000)",
    )
    parser.add_argument("--concurrency", type=_positive, help="engine default if unset")
    parser.add_argument(
        "--stats",
        type=Path,
        metavar="FILE",
        help="write the run's time, records and peak memory to FILE as JSON",
    )
    parser.add_argument(
        "--trace-memory",
        action="store_true",
        help="trace Python allocations (tracemalloc, also in process-engine workers) for the "
        "engine-memory figure in --stats; makes the run several times slower",
    )
    parser.add_argument(
        "--generate",
        type=_positive,
        metavar="N",
        help="instead: write a seeded CSV of N transactions to stdout",
    )
    parser.add_argument("--clients", type=_positive, default=1_000, help="for --generate")
    parser.add_argument("--seed", type=int, default=0, help="for --generate")
    options = parser.parse_args(args)
    if options.generate is not None:
        if options.input is not None:
            parser.error("give either an input file or --generate N, not both")
        try:
            generate(options.generate, options.clients, options.seed)
        except ValueError as error:
            parser.error(str(error))
        return 0
    if options.input is None:
        parser.error("the transactions CSV file is missing (or use --generate N)")
    malformed = 0

    def report(number: int, line: str, reason: str) -> None:
        nonlocal malformed
        malformed += 1
        print(f"{options.input}:{number}: skipped: {reason}: {line.strip()!r}", file=sys.stderr)

    if options.trace_memory:
        os.environ["PYTHONTRACEMALLOC"] = "1"  # spawned workers inherit it
        tracemalloc.start()
    started = time.perf_counter()
    try:
        with options.input.open(encoding="utf-8", errors="replace") as lines:
            run = run_csv(
                lines,
                report,
                engine=options.engine,
                partitions=options.partitions,
                lanes=options.lanes,
                batch=options.batch,
                concurrency=options.concurrency,
            )
    except OSError as error:
        print(f"cannot read {options.input}: {error.strerror}", file=sys.stderr)
        return 2
    for number, line, reason in run.malformed:
        report(number, line, reason)
    write_accounts(run.balances, sys.stdout)
    sys.stdout.flush()
    seconds = time.perf_counter() - started
    if malformed:
        print(f"{malformed:,} malformed row(s) skipped", file=sys.stderr)
    if options.stats is not None:
        write_stats(options.stats, options.engine, seconds, run, malformed)
    return 0


def write_stats(path: Path, engine: str, seconds: float, run: ToolRun, malformed: int) -> None:
    """The run's figures as JSON: ``seconds`` from opening the input to the last account
    written; peak RSS of this process and of each worker; ``traced_peak_bytes``: the peak
    of Python allocations (laneway's buffers, the log's records, the ledger), summed over
    this process and the workers, ``null`` without ``--trace-memory``; ``state_bytes``: the
    ledger's own footprint (:meth:`ledger.Ledger.footprint`), measured after the run."""
    traced = [traced_peak(), *(worker.traced for worker in run.workers)]
    figures = {
        "engine": engine,
        "seconds": seconds,
        "records": run.records,
        "malformed": malformed,
        "accounts": len(run.balances),
        "rss_bytes": peak_rss(),
        "worker_rss_bytes": [worker.rss for worker in run.workers],
        "state_bytes": run.state_bytes,
        "traced_peak_bytes": sum(traced) if min(traced) >= 0 else None,
    }
    path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


def generate(count: int, clients: int, seed: int) -> None:
    """A seeded CSV of ``count`` transactions on stdout (see :mod:`generator`)."""
    out = sys.stdout
    out.write(HEADER)
    batch: list[str] = []
    for tx in stream(count, clients, seed):
        batch.append(encode(tx).decode())
        if len(batch) == 10_000:
            out.write("\n".join(batch) + "\n")
            batch.clear()
    if batch:
        out.write("\n".join(batch) + "\n")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value


if __name__ == "__main__":
    sys.exit(main())
