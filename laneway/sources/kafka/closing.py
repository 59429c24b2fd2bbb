"""Closing a librdkafka consumer within a deadline.

``Consumer.close()`` leaves the group and destroys the client, and librdkafka's destroy
waits for its threads: a broker that does not answer, or a client left in a bad state, can
keep it waiting for good, and a main thread blocked inside it runs no Python signal
handler, so SIGTERM would go unanswered. :func:`close_within` runs the close on a helper
thread and waits at most :data:`CLOSE_TIMEOUT` seconds (signals are served meanwhile).

Safe because nothing else uses the client by then: the source is marked closed (any later
call raises), and the rebalance callbacks librdkafka may still run on the helper thread
find no owned partition (the source revoked them through its listener first), so they
never reach the consumer's control plane from that thread.
"""

from __future__ import annotations

import threading

from confluent_kafka import Consumer

from laneway.logs import get_logger

logger = get_logger("laneway.sources.kafka.source")

CLOSE_TIMEOUT = 10.0
"""Seconds a KafkaSource waits for its client to close (leaving the group takes a round
trip; a close that takes longer is left to end with the process)."""


def close_within(consumer: Consumer, name: str, timeout: float = CLOSE_TIMEOUT) -> None:
    """Close ``consumer`` on a helper thread, waiting at most ``timeout`` seconds; what the
    close raised is raised here. A close that did not end is logged as an ERROR and left
    behind (a daemon thread: it does not hold the process up), and the group hands the
    member's partitions to others once its session times out."""
    raised: list[BaseException] = []

    def close() -> None:
        try:
            consumer.close()
        except BaseException as error:  # handed to the waiting thread
            raised.append(error)

    thread = threading.Thread(target=close, name="laneway-kafka-close", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        logger.error(
            "%s: closing the Kafka client did not end in %g s (librdkafka waits for a broker "
            "or one of its threads); it is left to end with the process, and the group "
            "gives this member's partitions to others when its session times out",
            name,
            timeout,
        )
        return
    if raised:
        raise raised[0]
