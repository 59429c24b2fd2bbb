"""A stateful counting consumer the state-file fault tests run, damaging its own files on cue.

Run as ``python tests/support/state_fault_child.py '<json settings>'``: it opens the log
(``log_dir``: a durable embedded log; ``bootstrap``: Kafka), produces ``first`` messages
(keys ``k<i % keys>`` for ``i`` from ``start``), then counts each key's messages with
``Consumer(..., state=StateStore(state_dir, changelog, backend))`` until nothing new came
for ``idle`` seconds, and exits 0. With ``damage`` (``{"phase", "kinds": {partition:
kind}}``) it does that damage (see :mod:`file_damage`) to partition files of its own store
while it runs: ``checkpoint``, right before the first checkpoint each file takes while
handlers use it; ``restore``, right before the restore of a file from its checkpoint
reads it whole; then it produces ``then`` more messages, which run on what the damage
left. The damage is real (done to the file on disk, under the running SQLite or LMDB); the
hook only chooses the moment.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from pathlib import Path
from typing import Any

import file_damage
import state_handlers

import laneway
from laneway.state.table import PartitionTable

FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}


class Damage:
    """Does each partition's damage once, at the moment its phase names."""

    def __init__(self, phase: str, kinds: dict[str, str], done: threading.Event) -> None:
        self.phase = phase
        self.kinds = {int(p): kind for p, kind in kinds.items()}
        self.done = done

    def install(self) -> None:
        if self.phase == "checkpoint":
            flush = PartitionTable.flush

            def flushing(table: PartitionTable, entries: Any, checkpoint: int | None) -> None:
                if checkpoint is not None:
                    self.maybe(table)
                flush(table, entries, checkpoint)

            PartitionTable.flush = flushing  # type: ignore[method-assign]
        else:
            verify = PartitionTable.verify

            def verifying(table: PartitionTable) -> None:
                self.maybe(table)
                verify(table)

            PartitionTable.verify = verifying  # type: ignore[method-assign]

    def maybe(self, table: PartitionTable) -> None:
        path = table.path
        if path is None or not path.name.split(".")[0].isdigit():
            return
        kind = self.kinds.pop(int(path.name.split(".")[0]), None)
        if kind is not None:
            print(f"state_fault_child: {kind} damage to {path} ({self.phase})", flush=True)
            file_damage.damage(path, kind)
            if not self.kinds:
                self.done.set()


def records(settings: dict[str, Any], start: int, count: int) -> list[tuple[bytes, bytes]]:
    keys = settings["keys"]
    return [(f"k{i % keys}".encode(), b"1") for i in range(start, start + count)]


def main(settings: dict[str, Any]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    topic = settings["topic"]
    if "log_dir" in settings:
        log = laneway.EmbeddedLog(settings["log_dir"])
        source: Any = log.subscribe([topic], group=settings["group"])

        def produce(batch: list[tuple[bytes, bytes]]) -> None:
            for key, value in batch:
                log.produce(topic, value, key=key)

    else:
        import kafka_helpers

        source = laneway.KafkaSource(
            settings["bootstrap"], settings["group"], [topic], config=FAST_GROUP
        )

        def produce(batch: list[tuple[bytes, bytes]]) -> None:
            kafka_helpers.produce(settings["bootstrap"], topic, batch)

    start, first, then = settings["start"], settings["first"], settings.get("then", 0)
    produce(records(settings, start, first))
    done = threading.Event()
    damage = settings.get("damage")
    if damage:
        Damage(damage["phase"], damage["kinds"], done).install()
    else:
        done.set()

    def produce_the_rest() -> None:
        done.wait(60.0)
        produce(records(settings, start + first, then))

    store = laneway.StateStore(
        Path(settings["state_dir"]),
        changelog=settings["changelog"],
        backend=settings["backend"],
        checkpoint_interval=0.3,
    )
    consumer = laneway.Consumer(
        source,
        state_handlers.count,
        state=store,
        engine="thread",
        concurrency=8,
        commit_interval=0.2,
    )
    threading.Thread(target=produce_the_rest, daemon=True).start()
    stats = consumer.run(idle_timeout=settings["idle"])
    print(f"state_fault_child: processed {stats.processed}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
