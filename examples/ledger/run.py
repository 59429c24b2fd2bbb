"""Generate ledger traffic, run it through laneway on the embedded log, verify, time it.

    python examples/ledger/run.py --engine async --transactions 100000
    python examples/ledger/run.py                 # every engine, one after the other
    python examples/ledger/run.py --bootstrap-servers 127.0.0.1:9092   # on Kafka

For each engine: a fresh in-memory EmbeddedLog with ``--partitions`` partitions, the
generated transactions produced into it keyed by client, one consumer with
``ordering="key"``, and the final balances (available, held, total, locked and the count
of rejected transactions per client) compared with a plain sequential loop over the same
list. Exits 1 if any engine disagrees. With ``--bootstrap-servers`` the transactions go
into a new topic on that Kafka cluster instead (created once, read by a new consumer
group per engine).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

from generator import generate, reference
from service import ENGINES, TOPIC, consume, differences, records

import laneway
import laneway.kafka
from laneway.sources.base import Source


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=[*ENGINES, "all"], default="all")
    parser.add_argument("--transactions", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=None, help="engine default if unset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT",
        help="use this Kafka cluster, not the embedded log",
    )
    args = parser.parse_args(argv)

    start = time.perf_counter()
    transactions = generate(args.transactions, args.clients, args.seed)
    expected, outcomes = reference(transactions)
    wanted = expected.balances()
    print(
        f"{len(transactions):,} transactions for {len(wanted):,} clients generated and run "
        f"sequentially in {time.perf_counter() - start:.2f} s; outcomes: "
        + ", ".join(f"{name} {n:,}" for name, n in sorted(outcomes.items()))
    )
    pairs = records(transactions)
    kafka_topic = None
    if args.bootstrap_servers:
        kafka_topic = f"{TOPIC}-{uuid.uuid4().hex[:8]}"
        laneway.kafka.create_topic(args.bootstrap_servers, kafka_topic, args.partitions)
        laneway.kafka.produce(args.bootstrap_servers, kafka_topic, pairs)
        print(f"produced to Kafka topic {kafka_topic} at {args.bootstrap_servers}")
    failed = False
    for engine in ENGINES if args.engine == "all" else (args.engine,):
        group = f"ledger-{engine}-{uuid.uuid4().hex[:8]}"
        log: laneway.EmbeddedLog | None = None
        source: Source
        if kafka_topic is not None:
            source = laneway.KafkaSource(args.bootstrap_servers, group, [kafka_topic])
        else:
            log = laneway.EmbeddedLog()
            log.create_topic(TOPIC, partitions=args.partitions)
            log.produce_many(TOPIC, pairs)
            source = log.subscribe([TOPIC], group=group)
        concurrency = 1 if engine == "sync" else args.concurrency
        with tempfile.TemporaryDirectory(prefix="ledger-changelog-") as changelog_dir:
            run = consume(
                source,
                engine,
                len(pairs),
                changelog_dir=Path(changelog_dir),
                concurrency=concurrency,
            )
        if log is not None:
            log.close()
        wrong = differences(wanted, run.balances)
        verdict = "PASS" if not wrong and run.stats.processed == len(pairs) else "FAIL"
        failed = failed or verdict == "FAIL"
        print(
            f"{engine:>8}: {run.seconds:6.2f} s  {len(pairs) / run.seconds:9,.0f} tx/s  "
            f"processed {run.stats.processed:,} failed {run.stats.failed:,}  {verdict}"
        )
        for line in wrong[:10]:
            print(f"          {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
