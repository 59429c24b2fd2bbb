"""close_within: a librdkafka consumer's close that cannot keep a stopping member alive.

librdkafka's ``close()`` leaves the group (a share consumer also sends its last
acknowledgements) and destroys the client, blocking until the broker has answered and
its threads have ended. Seen here: a share consumer (librdkafka 2.16.0, Kafka 4.2.0, a
member told to stop while it was still joining) waiting in ``rd_kafka_consumer_close0``
for over a minute with the broker up; a group consumer whose rebalance callback had
raised waiting in destroy for good (issue 48), its main thread inside the call deaf to
SIGTERM. A stopping process must stop, so the close runs on a thread of its own, and the
member goes on without it after ``CLOSE_TIMEOUT_S`` (signals are served meanwhile).

Going on is safe: a member that leaves without closing is, for the broker, a member that
died: its partitions go to others when its session times out, and a share group's
records it still holds are released and delivered again (at-least-once). Nothing else
uses the client by then (its source is closed; a group source revoked its partitions
through its listener first, so the callbacks librdkafka may still run on that thread
reach no listener). The abandoned thread stays blocked in librdkafka until the process
exits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

CLOSE_TIMEOUT_S = 10.0
"""Seconds a consumer's close may take before the member goes on without it. A close on a
reachable broker takes milliseconds (a leave heartbeat, a share group's acknowledgements);
raise it only for a broker that is slow to answer."""


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
