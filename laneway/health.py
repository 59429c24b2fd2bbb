"""Health: whether a consumer is alive and ready, for probes and orchestrators."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from laneway.printable import key_text
from laneway.types import Restore, Stall


@dataclass(frozen=True)
class Health:
    """A consumer's health at one moment (``Consumer.health()``).

    ``live``: its ``run()`` is in progress (starting, running or draining): a probe that
    sees False should restart the process. ``ready``: live, connected to its source
    (``open()`` succeeded), waiting for nothing (a Kafka source: every subscribed topic
    exists) and no message in its handler longer than ``stall_timeout``.
    ``state`` is ``new``, ``starting``, ``running``, ``stopping`` or ``stopped``;
    ``reason`` says in words why it is not ready (empty when it is); ``stalled`` lists the
    stalled messages; ``restoring`` the partitions whose state (``state=``) is being
    restored now, with their progress: a restore does not make a consumer unready, since
    its other partitions keep running (the restoring ones' messages wait).
    """

    live: bool
    ready: bool
    state: str
    reason: str = ""
    stalled: tuple[Stall, ...] = field(default_factory=tuple)
    restoring: tuple[Restore, ...] = field(default_factory=tuple)

    def as_json(self, keys: bool = False) -> dict[str, Any]:
        """A JSON-serialisable form: each stalled message's position and age, what waits
        for it (messages, keys and partitions counted; ``waiting.keys_named`` lists up to
        10 keys) and the finished messages it holds uncommitted (``held_back``); keys (as
        text, undecodable bytes escaped, each cut to 256 characters: see
        :func:`~laneway.printable.key_text`) only with ``keys=True``, since a key is
        message data (an e-mail address, an account). ``restoring``: per partition being
        restored, its changelog ``records`` read of ``total``, whether ``full`` and for how
        many ``seconds``."""
        stalled = [stall_as_json(s, keys) for s in self.stalled]
        return {
            "live": self.live,
            "ready": self.ready,
            "state": self.state,
            "reason": self.reason,
            "stalled": stalled,
            "restoring": [restore_as_json(r) for r in self.restoring],
        }


def restore_as_json(restore: Restore) -> dict[str, Any]:
    """One partition's state restore as ``/readyz`` shows it."""
    return {
        "topic": restore.topic,
        "partition": restore.partition,
        "records": restore.records,
        "total": restore.total,
        "full": restore.full,
        "seconds": round(restore.seconds, 3),
    }


def _text(key: bytes | None) -> str | None:
    return None if key is None else key_text(key)


def stall_as_json(stall: Stall, keys: bool = False) -> dict[str, Any]:
    """One stalled message as ``/readyz`` and ``/backlog`` show it: its position and age,
    what waits for it (messages, keys and partitions counted; ``waiting.keys_named`` lists
    up to 10 keys) and the finished messages it holds uncommitted (``held_back``); its key
    and the waiting keys' names only with ``keys=True``."""
    entry: dict[str, Any] = {
        "topic": stall.topic,
        "partition": stall.partition,
        "offset": stall.offset,
    }
    if keys:
        entry["key"] = _text(stall.key)
    entry["seconds"] = round(stall.seconds, 3)
    waiting = stall.waiting
    entry["waiting"] = {
        "messages": waiting.messages,
        "keys": waiting.keys,
        "partitions": [{"topic": t, "partition": p} for t, p in waiting.partitions],
    }
    if keys:
        entry["waiting"]["keys_named"] = [_text(key) for key in waiting.names]
    entry["held_back"] = stall.held_back
    return entry
