"""A reservation spike through `laneway run` topologies, on the real broker and PostgreSQL.

    python examples/ticketing/spike.py --bootstrap-servers HOST:PORT --postgres-dsn DSN
    python examples/ticketing/spike.py ... --topologies "1x sync,async c256" --requests 1000

Seed 004 (``../shared/seeds``) cut an 11 s producer -> consumer latency by running 50 light
consumers instead of 10 heavy ones. This runs each topology in turn on the same data: a
fresh database (``--seats`` seats), a fresh 8-partition topic, the consumers started and
warmed up (a few requests for another event, so partitions are assigned), then
``--requests`` requests produced at once, and for each request the time from its produce
timestamp to its outcome's commit in the database. Sell-out is first produce -> last
outcome. CPU seconds are those the consumer processes (members included) spent from the
produce to the last outcome; peak RSS is their summed high-water mark. Every run is
checked: one outcome per request, no seat with two owners.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg
from confluent_kafka.admin import AdminClient, NewTopic
from hdrh.histogram import HdrHistogram
from ticket_checks import problems
from ticket_requests import Request, prepare, produce, requests

HERE = Path(__file__).resolve().parent
TOPOLOGIES = {
    "1x sync": ("sync", 1, 1),
    "4x sync": ("sync", 1, 4),
    "8x sync": ("sync", 1, 8),
    "async c8": ("async", 8, 1),
    "async c64": ("async", 64, 1),
    "async c256": ("async", 256, 1),
    "thread c64": ("thread", 64, 1),
    "2x async c64": ("async", 64, 2),
}
"""name: (engine, concurrency, member processes)."""
HANDLERS = {"async": "ticket_handlers:reserve_async", "thread": "ticket_handlers:reserve_blocking"}
WARM_UP = 64


@dataclass(frozen=True)
class Result:
    name: str
    sell_out_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    throughput: float
    cpu_s: float
    peak_rss_mb: float


def run(name: str, args: argparse.Namespace) -> Result:
    engine, concurrency, members = TOPOLOGIES[name]
    prepare(args.postgres_dsn, seats=args.seats, events=(1, 2))
    topic = f"tickets-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 8, 1)])[topic].result(30)
    config = Path(f"/tmp/{topic}.toml")
    config.write_text("[kafka]\nsession.timeout.ms = 6000\nheartbeat.interval.ms = 300\n")
    pool = min(concurrency, args.pool)
    env = {**os.environ, "PYTHONPATH": str(HERE), "TICKETING_DSN": args.postgres_dsn}
    env["TICKETING_POOL_SIZE"] = str(pool)
    command = [
        sys.executable, "-m", "laneway", "run", HANDLERS.get(engine, HANDLERS["thread"]),
        "--bootstrap-servers", args.bootstrap_servers, "--topic", topic, "--group", topic,
        "--engine", engine, "--concurrency", str(concurrency), "--members", str(members),
        "--config", str(config), "--log-level", "warning",
    ]  # fmt: skip
    consumer = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        warm = [Request(f"w{i}", f"warm{i}", 2, None) for i in range(WARM_UP)]
        produce(args.bootstrap_servers, topic, warm)
        wait_for(args.postgres_dsn, WARM_UP, 120)
        time.sleep(2.0 if members > 1 else 0.0)  # let late members' rebalances settle
        load = requests(args.requests, users=args.users, seats=args.seats)
        tree = [psutil.Process(consumer.pid), *psutil.Process(consumer.pid).children(True)]
        cpu_before = cpu_seconds(tree)
        produce(args.bootstrap_servers, topic, load)
        wait_for(args.postgres_dsn, WARM_UP + len(load), 300)
        cpu = cpu_seconds(tree) - cpu_before
        rss_mb = sum(peak_rss_kb(process.pid) for process in tree) / 1024
    finally:
        consumer.send_signal(signal.SIGTERM)
        consumer.wait(60)
    config.unlink()
    found = problems(args.postgres_dsn, [r.request_id for r in [*warm, *load]])
    if found:
        raise SystemExit(f"{name}: {found}")
    return measure(name, args.postgres_dsn, cpu, rss_mb)


def cpu_seconds(processes: list[psutil.Process]) -> float:
    return sum(sum(process.cpu_times()[:2]) for process in processes)


def peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def wait_for(dsn: str, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as connection:
        while time.monotonic() < deadline:
            row = connection.execute("SELECT count(*) FROM outcomes").fetchone()
            if row and row[0] >= count:
                return
            time.sleep(0.05)
    raise SystemExit(f"timed out after {timeout} s waiting for {count} outcomes")


def measure(name: str, dsn: str, cpu: float, rss_mb: float) -> Result:
    """Latency percentiles and sell-out of the spike's requests (event 1)."""
    with psycopg.connect(dsn) as connection:
        rows = connection.execute(
            "SELECT extract(epoch FROM produced_at), extract(epoch FROM done_at)"
            " FROM outcomes WHERE event_id = 1"
        ).fetchall()
    histogram = HdrHistogram(1, 600_000_000, 3)
    for produced, done in rows:
        histogram.record_value(max(1, int((float(done) - float(produced)) * 1e6)))
    first = min(float(p) for p, _ in rows)
    last = max(float(d) for _, d in rows)
    at = histogram.get_value_at_percentile
    return Result(
        name, last - first, at(50) / 1e3, at(95) / 1e3, at(99) / 1e3, at(99.9) / 1e3,
        histogram.get_max_value() / 1e3, len(rows) / (last - first), cpu, rss_mb,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--postgres-dsn", required=True)
    parser.add_argument("--topologies", default=",".join(TOPOLOGIES))
    parser.add_argument("--requests", type=int, default=1_000)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--seats", type=int, default=800)
    parser.add_argument("--pool", type=int, default=16, help="database connections per member")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.topologies.split(",")]
    unknown = [name for name in names if name not in TOPOLOGIES]
    if unknown:
        parser.error(f"--topologies: unknown {unknown}; choose from {list(TOPOLOGIES)}")
    print(
        f"{'topology':<14} {'sell-out s':>10} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
        f"{'p99.9 ms':>8} {'max ms':>8} {'req/s':>7} {'CPU s':>6} {'req/CPU s':>9} {'RSS MB':>7}"
    )
    for name in names:
        r = run(name, args)
        print(
            f"{r.name:<14} {r.sell_out_s:>10.2f} {r.p50_ms:>8.1f} {r.p95_ms:>8.1f} "
            f"{r.p99_ms:>8.1f} {r.p999_ms:>8.1f} {r.max_ms:>8.1f} {r.throughput:>7.0f} "
            f"{r.cpu_s:>6.2f} {args.requests / r.cpu_s:>9.0f} {r.peak_rss_mb:>7.0f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
