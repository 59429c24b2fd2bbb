"""A consume -> transform -> produce member the exactly-once chaos test starts and kills.

Run as ``python tests/support/results_child.py '<json settings>'``. It reads ``topic`` on
Kafka as a member of ``group`` and writes one result per input into ``out`` (same key, the
input's value), with ``exactly_once`` as given and ``transactional_id`` naming its
transactional producer (the slot it fills, so a restarted member fences its killed
predecessor; left out or ``None``: laneway's default, one per process). ``kafka_config``
holds the librdkafka settings (default :data:`chaos_harness.CLASSIC_GROUP`'s short
session). SIGTERM stops it gracefully (exit 0); a run that ends with
:class:`laneway.TransactionError` exits with :data:`TRANSACTION_FAILED`, and the harness
starts it again, as a supervisor would.
"""

from __future__ import annotations

import signal
import sys

# A SIGTERM during the imports below (a second or more on a loaded machine) must stop the
# member gracefully too, not kill it: remembered from here on, and the harness sends none
# before the line below says the handler is in place.
_stop_requested: list[bool] = []
signal.signal(signal.SIGTERM, lambda *_: _stop_requested.append(True))
print("started", flush=True)

import faulthandler  # noqa: E402
import json  # noqa: E402
from typing import Any  # noqa: E402

from chaos_child import EarlyStop  # noqa: E402
from chaos_harness import CLASSIC_GROUP  # noqa: E402

import laneway  # noqa: E402

TRANSACTION_FAILED = 3


def main(settings: dict[str, Any]) -> int:
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    early = EarlyStop()
    early.requested = bool(_stop_requested)
    out = settings["out"]

    def transform(message: laneway.Message) -> laneway.Produce:
        return laneway.Produce(out, message.value, message.key)

    source = laneway.KafkaSource(
        bootstrap_servers=settings["bootstrap"],
        group=settings["group"],
        topics=[settings["topic"]],
        config=settings.get("kafka_config", CLASSIC_GROUP),
        transactional_id=settings.get("transactional_id"),
    )
    consumer = laneway.Consumer(
        source,
        transform,
        engine="thread",
        concurrency=8,
        max_buffered=settings["max_buffered"],
        commit_interval=settings["commit_interval"],
        exactly_once=settings["exactly_once"],
    )
    early.attach(consumer)
    try:
        consumer.run()
    except laneway.TransactionError as error:
        print(f"results_child: {error}", file=sys.stderr)
        return TRANSACTION_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
