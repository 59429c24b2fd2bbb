"""A stateful counting member the state chaos test starts, kills and stops.

Run as ``python tests/support/state_child.py '<json settings>'``: it reads ``topic`` on
Kafka in ``group`` with ``Consumer(..., state=StateStore(state_dir, changelog=changelog))``
and the counting handler (each key's state: how many of its messages were applied), on the
thread engine with ``concurrency`` 64 and ``exactly_once`` as given. SIGTERM stops it
gracefully (exit 0); a run ending with :class:`laneway.TransactionError` exits with
:data:`TRANSACTION_FAILED` and the harness starts it again.
"""

from __future__ import annotations

import faulthandler
import json
import signal
import sys
from typing import Any

import state_handlers
from chaos_harness import CLASSIC_GROUP

import laneway

TRANSACTION_FAILED = 3


def main(settings: dict[str, Any]) -> int:
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    source = laneway.KafkaSource(
        bootstrap_servers=settings["bootstrap"],
        group=settings["group"],
        topics=[settings["topic"]],
        config=CLASSIC_GROUP,
        transactional_id=settings.get("transactional_id"),
    )
    store = laneway.StateStore(
        settings["state_dir"], changelog=settings["changelog"], checkpoint_interval=1.0
    )
    consumer = laneway.Consumer(
        source,
        state_handlers.count,
        state=store,
        engine=settings.get("engine", "thread"),
        concurrency=64,
        commit_interval=2.0,  # more applied but uncommitted work for a kill to leave
        exactly_once=settings["exactly_once"],
    )
    try:
        consumer.run()
    except laneway.TransactionError as error:
        print(f"state_child: {error}", file=sys.stderr)
        return TRANSACTION_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
