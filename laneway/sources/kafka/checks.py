"""Checks a KafkaSource makes when it opens: the cluster answers, the topics exist.

Without them a consumer of an unreachable broker, or of a topic nobody created, waits
forever and looks like one with nothing to read. A cluster that refuses the client (a
wrong password, an untrusted certificate, no ACL for a topic) fails the check at once
with :class:`~laneway.errors.AccessDeniedError`, the cause first.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException

from laneway.errors import AccessDeniedError, SourceError, UnknownTopicError
from laneway.sources.kafka.client_logs import ErrorReporter, describe
from laneway.sources.kafka.denials import Access
from laneway.sources.topic_names import unknown_topics

FIRST_WAIT = 0.05
"""Seconds of the first metadata request of :func:`check_reachable`; each next one waits
twice as long, so a refusal reported meanwhile is seen within about as long again as it
took to arrive, and a slow but healthy cluster still gets longer and longer to answer."""


class MetadataClient(Protocol):
    """A Kafka client that answers metadata requests (a consumer or an admin client)."""

    def list_topics(self, topic: str | None = ..., timeout: float = ...) -> Any: ...


def addresses(bootstrap_servers: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` pairs of a ``bootstrap.servers`` list (``PROTOCOL://`` prefixes
    and bracketed IPv6 hosts allowed; a missing port is Kafka's 9092)."""
    pairs: list[tuple[str, int]] = []
    for entry in bootstrap_servers.split(","):
        entry = entry.strip().rpartition("://")[2]
        if not entry:
            continue
        host, _, port = entry.rpartition(":") if not entry.endswith("]") else (entry, "", "")
        if not host or not port.isdigit():
            host, port = entry, "9092"
        pairs.append((host.strip("[]"), int(port)))
    return pairs


def check_reachable(
    client: MetadataClient,
    bootstrap_servers: str,
    timeout: float,
    errors: ErrorReporter,
    serve_errors: Callable[[], object],
) -> None:
    """Raise :class:`SourceError` naming the address unless a broker answers a metadata
    request within ``timeout`` seconds (a name that does not resolve fails at once).
    ``serve_errors`` lets the client deliver its pending errors to ``errors``: a refusal
    among them (authentication, TLS) raises :class:`AccessDeniedError` right away."""
    unresolved: list[str] = []
    for host, port in addresses(bootstrap_servers):
        try:
            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as error:
            unresolved.append(f"{host} ({error.strerror or error})")
    if unresolved and len(unresolved) == len(addresses(bootstrap_servers)):
        raise SourceError(
            f"cannot reach the Kafka cluster at {bootstrap_servers}: the broker name does not "
            f"resolve: {', '.join(unresolved)}"
        )
    deadline = time.monotonic() + timeout
    wait = FIRST_WAIT
    while True:
        try:
            client.list_topics(timeout=max(0.001, min(wait, deadline - time.monotonic())))
            return
        except KafkaException as exc:
            failure = exc
        serve_errors()  # error_cb knows why (refused, TLS, ...)
        if errors.denied is not None:
            raise AccessDeniedError(str(errors.denied)) from None
        if time.monotonic() >= deadline:
            break
        wait *= 2
    cause = errors.last or describe(failure)
    raise SourceError(
        f"cannot reach the Kafka cluster at {bootstrap_servers}: no broker answered "
        f"within connect_timeout={timeout:g} s ({cause}); check bootstrap_servers and "
        "that the broker runs and listens there"
    ) from failure


def check_topics(
    client: MetadataClient,
    topics: Sequence[str],
    timeout: float,
    access: Access | None = None,
    operation: str = "READ",
) -> None:
    """Raise :class:`UnknownTopicError` naming the subscribed topics the cluster does not
    have (regular-expression subscriptions, ``^...``, are not checked), and
    :class:`AccessDeniedError` for one the client may not see: it needs ``operation`` on
    it (``access`` names the client)."""
    missing: list[str] = []
    for topic in topics:
        if topic.startswith("^"):
            continue
        try:
            found = client.list_topics(topic=topic, timeout=timeout).topics.get(topic)
        except KafkaException as exc:
            raise SourceError(
                f"reading the metadata of topic {topic!r} failed: {describe(exc)}"
            ) from exc
        error = None if found is None else found.error
        if error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            denial = (access or Access.unknown()).refusal(error, {"topic": (operation, topic)})
            raise AccessDeniedError(str(denial))
        if found is None or (
            error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        ):
            missing.append(topic)
    if missing:
        raise UnknownTopicError(
            f"{unknown_topics(missing, _cluster_topics(client, timeout))}: the cluster does "
            "not have it; create it first, or wait until it appears with wait_for_topics=True "
            "(laneway run --wait-for-topics)"
        )


def _cluster_topics(client: Any, timeout: float) -> list[str]:
    """The topics the client may see, for a "did you mean" (none if the request fails)."""
    try:
        return list(client.list_topics(timeout=timeout).topics)
    except KafkaException:
        return []
