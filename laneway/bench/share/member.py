"""One member process of the ``share`` bench scenario.

``python -m laneway.bench.share.member '<json>'`` runs a sync-engine :class:`Consumer` on a
share group (:class:`~laneway.sources.share.source.KafkaShareSource`) or a classic consumer
group (:class:`~laneway.sources.kafka.source.KafkaSource`) whose handler sleeps ``work_ms`` per
record. It prints ``ready`` once built, adds one to its slot of the shared ``counter`` file
(8 bytes per member) after each record, so the parent sees progress without a pipe, and on
SIGTERM drains and prints one JSON line: the ``(partition, offset)`` of every record it
handled and the wall-clock time (``time.time()``) its last one finished.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time

from laneway.consumer import Consumer
from laneway.sources.base import Source
from laneway.sources.kafka.source import KafkaSource
from laneway.sources.share.source import KafkaShareSource
from laneway.types import Message

_SLOT = struct.Struct("<q")


def main(raw: str) -> None:
    settings = json.loads(raw)
    source: Source
    if settings["kind"] == "share":
        source = KafkaShareSource(
            settings["bootstrap"],
            settings["group"],
            [settings["topic"]],
            {"max.poll.records": settings["fetch"]},
            crash_journal=False,
        )
    else:
        source = KafkaSource(settings["bootstrap"], settings["group"], [settings["topic"]])
    seconds = settings["work_ms"] / 1000.0
    counter = os.open(settings["counter"], os.O_WRONLY)
    at = _SLOT.size * settings["index"]
    handled: list[tuple[int, int]] = []
    last = [0.0]

    def handle(message: Message) -> None:
        time.sleep(seconds)
        handled.append((message.partition, message.offset))
        last[0] = time.time()
        os.pwrite(counter, _SLOT.pack(len(handled)), at)

    consumer = Consumer(source, handle, engine="sync", ordering="unordered")
    print("ready", flush=True)
    consumer.run()
    print(json.dumps({"handled": handled, "last": last[0]}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
