"""close_within: a share consumer's close that cannot keep a stopping member alive.

librdkafka's share consumer (KIP-932, a preview in confluent-kafka 2.x) sends the last
acknowledgements and leaves the group in ``close()``, which blocks until the broker has
answered. Seen here (librdkafka 2.16.0, Kafka 4.2.0, a member told to stop while it was
still joining): ``close()`` waiting in ``rd_kafka_consumer_close0`` for over a minute
with the broker up, so the member never exited and its supervisor never stopped. A
stopping process must stop, so the close runs on a thread of its own, and the member
goes on without it after ``CLOSE_TIMEOUT_S``.

Going on is safe: a member that leaves without closing is, for the broker, a member that
died. Every record it still holds is released when its connection drops (or its session
times out) and delivered again, to a member, with its delivery count raised; records
this member finished but whose acknowledgement was not yet sent are among them, so they
run twice (at-least-once). The abandoned thread stays blocked in librdkafka until the
process exits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

CLOSE_TIMEOUT_S = 10.0
"""Seconds a share consumer's close may take before the member goes on without it. A
close on a reachable broker takes milliseconds (one acknowledgement request, one leave
heartbeat); raise it only for a broker that is slow to answer."""


def close_within(close: Callable[[], None], seconds: float, name: str) -> bool:
    """Run ``close`` on a daemon thread named ``name``; True when it returned within
    ``seconds`` (its exception, if it raised one, is raised here), False when it is still
    running (it is left to finish or to die with the process)."""
    done = threading.Event()
    raised: list[BaseException] = []

    def run() -> None:
        try:
            close()
        except BaseException as error:  # handed to the waiting thread
            raised.append(error)
        finally:
            done.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    if not done.wait(seconds):
        return False
    if raised:
        raise raised[0]
    return True
