"""Checks a KafkaSource makes when it opens: the cluster answers, the topics exist.

Without them a consumer of an unreachable broker, or of a topic nobody created, waits
forever and looks like one with nothing to read.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException

from laneway.errors import SourceError, UnknownTopicError
from laneway.sources.kafka.client_logs import ErrorReporter, describe


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
    ``serve_errors`` lets the client deliver its pending errors to ``errors``."""
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
    try:
        client.list_topics(timeout=timeout)
    except KafkaException as exc:
        serve_errors()  # error_cb knows why (refused, TLS, ...)
        cause = errors.last or describe(exc)
        raise SourceError(
            f"cannot reach the Kafka cluster at {bootstrap_servers}: no broker answered "
            f"within connect_timeout={timeout:g} s ({cause}); check bootstrap_servers and "
            "that the broker runs and listens there"
        ) from exc


def check_topics(client: MetadataClient, topics: Sequence[str], timeout: float) -> None:
    """Raise :class:`UnknownTopicError` naming the subscribed topics the cluster does not
    have (regular-expression subscriptions, ``^...``, are not checked)."""
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
        if found is None or (
            error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        ):
            missing.append(topic)
    if missing:
        raise UnknownTopicError(
            f"unknown topic {', '.join(repr(t) for t in missing)}: the cluster does not have "
            "it; create it first, or wait until it appears with wait_for_topics=True "
            "(laneway run --wait-for-topics)"
        )
