"""One member of a share group for tests: ``python share_member.py '<json settings>'``.

Runs a :class:`laneway.Consumer` on a :class:`laneway.KafkaShareSource` with the
``share_handlers`` handler until ``idle_timeout`` seconds pass without a new record, then
prints its final stats as one JSON line. Prints ``starting`` as the consumer starts.
Settings: ``bootstrap``, ``group``, ``topic``, ``engine``, ``idle_timeout``, and optional
``config`` (librdkafka), ``group_config``, ``crash_journal``, ``max_retries``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

import share_handlers

import laneway


def main(raw: str) -> None:
    settings = json.loads(raw)
    source = laneway.KafkaShareSource(
        settings["bootstrap"],
        settings["group"],
        [settings["topic"]],
        settings.get("config"),
        group_config=settings.get("group_config"),
        crash_journal=settings.get("crash_journal", False),
    )
    engine = settings.get("engine", "thread")
    handler = share_handlers.handle_async if engine == "async" else share_handlers.handle
    consumer = laneway.Consumer(
        source,
        handler,
        engine=engine,
        ordering="unordered",
        max_retries=settings.get("max_retries", 3),
        retry_backoff=0.01,
    )
    print("starting", flush=True)
    stats = consumer.run(idle_timeout=settings["idle_timeout"])
    shown = {key: value for key, value in asdict(stats).items() if key in ("processed", "failed")}
    print(json.dumps(shown), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
