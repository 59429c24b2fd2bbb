"""What decoding a record costs a consumer, as CPU time: the table of the typed-messages guide.

    python -m laneway.bench.engines.decode_cost [--messages 300000] [--rounds 5]

A sync-engine consumer on the embedded log runs over ~200-byte order records (those of
``laneway bench --value-format``) handed over as bytes, then decoded by each codec; each
row is the CPU seconds of the process per record (``time.process_time``, so other
processes on a shared machine do not count), min and median over the rounds, and the
difference to the same records as bytes. ``laneway bench --value-format json|avro`` shows
the same as throughput, which a busy machine blurs.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from typing import Any

import laneway
from laneway import serde
from laneway.bench.engines.orders import BenchOrder
from laneway.bench.engines.value_formats import ORDER_SCHEMA, value_encoder


@dataclasses.dataclass
class OrderRecord:
    """The order record as a dataclass (BenchOrder is the msgspec.Struct)."""

    sequence: int
    account: str
    amount: float
    currency: str
    status: str
    note: str


def handle(message: object) -> None:
    return None


def cpu_per_record(codec: Any, payload: str, messages: int) -> float:
    log = laneway.EmbeddedLog()
    log.create_topic("orders", partitions=8)
    encode = value_encoder(payload)
    log.produce_many("orders", ((b"k%d" % (i % 100), encode(i)) for i in range(messages)))
    consumer = laneway.Consumer(
        log.subscribe(["orders"], group="cost"),
        handle,
        engine="sync",
        value_deserializer=codec,
        handle_signals=False,
    )
    started = time.process_time()
    stats = consumer.run(max_messages=messages)
    seconds = time.process_time() - started
    log.close()
    assert stats.processed == messages, stats
    return seconds / messages * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows = {
        "JSON, as bytes": (None, "json"),
        "JSON -> msgspec.Struct": (serde.json(BenchOrder), "json"),
        "JSON -> dataclass": (serde.json(OrderRecord), "json"),
        "JSON -> dict (serde.json())": (serde.json(), "json"),
        "Avro, as bytes": (None, "avro"),
        "Avro -> dict": (serde.avro(ORDER_SCHEMA), "avro"),
    }
    found: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.rounds):  # interleaved, so drift hits every row alike
        for name, (codec, payload) in rows.items():
            found[name].append(cpu_per_record(codec, payload, args.messages))
    head = f"{'records':30} {'us/record: min':>15} {'median':>7}"
    print(f"{head} {'decoding: min':>14} {'median':>7}")
    for name, values in found.items():
        plain = found["Avro, as bytes" if name.startswith("Avro") else "JSON, as bytes"]
        low, middle = min(values), statistics.median(values)
        row = f"{name:30} {low:15.2f} {middle:7.2f}"
        if values is not plain:
            row += f" {low - min(plain):+14.2f} {middle - statistics.median(plain):+7.2f}"
        print(row)


if __name__ == "__main__":
    main()
