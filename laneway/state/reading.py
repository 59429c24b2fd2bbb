"""A changelog read from outside a consumer (``laneway state``): each key's latest state.

:func:`open_changelog` opens the changelog log of a :class:`~laneway.sources.targets.Target`
(a Kafka cluster or a durable embedded log, never joining a group), and :func:`latest_states`
reads a changelog topic to its end (on Kafka its last stable offset, committed records only)
into each key's latest state, as a restore would build it: per key the record with the
highest input offset, a tombstone deleting the key.
"""

from __future__ import annotations

from dataclasses import dataclass

from laneway.errors import UnknownTopicError
from laneway.sources.targets import Target
from laneway.state.changelog import ChangelogLog, EmbeddedChangelog
from laneway.state.records import offset_in


@dataclass(frozen=True)
class KeyState:
    """A key's latest state in a changelog: its ``partition``, the input ``offset`` that
    last changed it, the changelog record's own offset (``position``) and its serialized
    ``value`` (``None``: deleted, which :func:`latest_states` leaves out)."""

    partition: int
    key: bytes
    offset: int
    position: int
    value: bytes | None


@dataclass
class ChangelogStates:
    """What :func:`latest_states` read: the live keys' states by ``(partition, key)``, how
    many records it read and how many it skipped as not laneway's (no offset header)."""

    states: dict[tuple[int, bytes], KeyState]
    records: int = 0
    skipped: int = 0


def open_changelog(target: Target) -> ChangelogLog:
    """The changelog log of ``target`` for one command run (close it when done)."""
    if target.log_dir is not None:
        from laneway.sources.embedded.group_positions import open_log

        return _OwnedEmbeddedChangelog(open_log(target.log_dir))
    from laneway.sources.kafka.client_config import connection_subset
    from laneway.state.kafka_changelog import KafkaChangelog

    connection = {
        **connection_subset(target.kafka),
        "bootstrap.servers": target.bootstrap_servers,
        "socket.connection.setup.timeout.ms": int(target.connect_timeout * 1000),
    }
    return KafkaChangelog(connection, committed_only=True)


def latest_states(log: ChangelogLog, topic: str, key: bytes | None = None) -> ChangelogStates:
    """Each key's latest state in changelog ``topic`` (only ``key``'s, when given); an
    :class:`~laneway.errors.UnknownTopicError` when there is no such topic."""
    partitions = log.partitions(topic)
    if partitions is None:
        raise UnknownTopicError(f"changelog topic {topic!r} does not exist in {log.where}")
    found = ChangelogStates({})
    states = found.states
    for partition in range(partitions):
        start, end = log.bounds(topic, partition)
        for batch in log.read(topic, partition, start, end):
            found.records += len(batch)
            for record in batch:
                offset = offset_in(record.headers)
                if offset is None or record.key is None:
                    found.skipped += 1
                    continue
                if key is not None and record.key != key:
                    continue
                place = (partition, record.key)
                known = states.get(place)
                if known is not None and known.offset > offset:
                    continue
                states[place] = KeyState(partition, record.key, offset, record.offset, record.value)
    found.states = {place: state for place, state in states.items() if state.value is not None}
    return found


class _OwnedEmbeddedChangelog(EmbeddedChangelog):
    """An embedded log's changelog that closes the log it opened."""

    def close(self) -> None:
        self._log.close()
