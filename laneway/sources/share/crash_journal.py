"""CrashJournal: which share-group records were in flight when a member process died.

Kafka counts a delivery each time it hands a record out, but a record that makes the
process die (a segfault in a C extension, the OOM killer, ``os._exit``) is simply handed
out again: to this member once it restarts, or to another. Nothing ever fails, so
laneway's retries and dead letters never see it, and the record kills member after member
until the broker's delivery limit archives it, silently. The journal turns those deaths
into evidence:

* every member writes the records it dispatches (``+``), those it runs alone (``!``) and
  those it settles (``-``) to a file of its own in the journal directory, holding an
  exclusive ``flock`` on it while it lives; the file is truncated at each fetch, when
  nothing is in flight (a share group's explicit acknowledgement requires a poll's records
  to be settled before the next poll), so it stays one fetch long;
* a file whose lock is free belongs to a dead process: any member that looks (at start,
  each second, and whenever a fetch brings redelivered records) *adopts* it under the
  directory's lock, counts a death against every record that was still in flight, and
  records them in the shared ``suspects.json``; a fetch that brings back a record still
  in flight in a journal whose lock is held waits up to ``DYING_GRACE_S`` for that lock
  (the broker releases a dying member's records a moment before its lock is freed);
* :class:`~laneway.sources.share.progress.ShareProgress` runs a suspect alone, with
  nothing else of its member in flight, and a suspect that was running alone when its
  process died is dead-lettered on its next delivery without running.

Limits: only members that share the directory see each other's deaths (one machine, or a
volume they all mount); a record redelivered elsewhere starts afresh there, so each
directory costs it at most two deaths, and the broker's delivery limit (5 by default)
remains the last resort. Writes are not ``fsync``ed: they survive the death of the
process, not of the machine. Suspects are forgotten once settled, or after
``SUSPECT_TTL_S``. POSIX only (``fcntl.flock``).

Writing costs one ``write`` per fetch and per settled batch: each record's
``(topic, partition, offset)`` marshalled, about 0.1 us per record here.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import marshal
import os
import struct
import time
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

from laneway.logs import get_logger
from laneway.types import Message

log = get_logger(__name__)

RecordId = tuple[str, int, int]
"""A record of a share group: ``(topic, partition, offset)``."""

SUSPECT_TTL_S = 24 * 3600.0
"""Seconds a suspect is remembered without being seen again."""
MAX_SUSPECTS = 100_000
"""Suspects kept at most (the oldest are forgotten first)."""
DYING_GRACE_S = 1.0
"""Seconds a member waits, at most, for the journal lock of a member that may be dying
(see :meth:`CrashJournal.refresh`); only a fetch with redelivered records waits."""
DYING_POLL_S = 0.02
SUSPECTS_FILE = "suspects.json"
LOCK_FILE = ".lock"
MEMBER_PREFIX = "member-"
MEMBER_SUFFIX = ".journal"

DISPATCHED = b"+"
ALONE = b"!"
SETTLED = b"-"
_HEADER = struct.Struct(">cI")
_record_id = attrgetter("topic", "partition", "offset")


@dataclass
class Suspect:
    """A record that was in flight when a member process died: how many ``deaths`` it
    was in flight for, how many of those it was running ``alone``, and ``since`` when
    (Unix time) it is suspected."""

    deaths: int
    alone: int
    since: float


class CrashJournal:
    """One member's journal in ``directory`` and the suspects all members share there.

    Used from the consumer's control thread only. :meth:`open` before use, :meth:`close`
    after (a journal left behind by a clean stop would count as a death).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.suspects: dict[RecordId, Suspect] = {}
        self._fd = -1
        self._path = directory / f"{MEMBER_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._path = self._path.with_name(self._path.name + MEMBER_SUFFIX)
        self._seen: tuple[int, int] | None = None  # (mtime_ns, size) of the suspects file

    def open(self) -> None:
        """Start this member's journal and adopt the journals of dead members."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        self.refresh()

    def close(self) -> None:
        """Remove this member's journal (nothing it dispatched is in flight any more)."""
        if self._fd < 0:
            return
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()
        os.close(self._fd)
        self._fd = -1

    def dispatched(self, messages: list[Message], fresh: bool) -> None:
        """``messages`` are in flight now; ``fresh``: nothing else is (start anew)."""
        if fresh:
            os.ftruncate(self._fd, 0)
        self._write(DISPATCHED, messages)

    def alone(self, message: Message) -> None:
        """``message`` runs now with nothing else of this member in flight."""
        self._write(ALONE, [message])

    def settled(self, messages: list[Message]) -> None:
        """``messages`` are no longer in flight."""
        self._write(SETTLED, messages)

    def refresh(self, delivered_again: Collection[RecordId] = ()) -> bool:
        """Adopt dead members' journals and reload the suspects if they changed; True
        when there are suspects.

        ``delivered_again``: records a fetch just brought back. While one of them is still
        in flight in the journal of a member that holds its lock, that member may be
        dying: the broker releases a member's records as soon as its connections drop,
        and the kernel closes the journal (freeing the lock) a moment later, in the same
        exit. So look again, every ``DYING_POLL_S``, for up to ``DYING_GRACE_S``; a member
        that still holds its lock then is alive (its record lock expired while it ran).
        """
        deadline = time.monotonic() + DYING_GRACE_S
        while True:
            with self._directory_locked():
                adopted, held = self._adopt_orphans(delivered_again)
                if adopted:
                    self._store(self._merge(self._load(), adopted))
            if not held or time.monotonic() >= deadline:
                break
            time.sleep(DYING_POLL_S)
        self._reload()
        return bool(self.suspects)

    def forget(self, records: Iterable[RecordId]) -> None:
        """Suspects that were settled (finished or dead-lettered): no longer suspects."""
        gone = [record for record in records if record in self.suspects]
        if not gone:
            return
        with self._directory_locked():
            stored = self._load()
            for record in gone:
                stored.pop(record, None)
            self._store(stored)
        self._reload()

    # -- internals ------------------------------------------------------------------

    def _write(self, kind: bytes, messages: list[Message]) -> None:
        if self._fd < 0:  # never opened (the source failed to open) or closed: none in flight
            return
        body = marshal.dumps(list(map(_record_id, messages)))
        os.write(self._fd, _HEADER.pack(kind, len(body)) + body)

    @contextlib.contextmanager
    def _directory_locked(self) -> Iterator[None]:
        fd = os.open(self.directory / LOCK_FILE, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _adopt_orphans(
        self, delivered_again: Collection[RecordId]
    ) -> tuple[dict[RecordId, bool], bool]:
        """Journals of dead members (their lock is free): the records each left in
        flight, ``True`` for one that was running alone; the journals are removed. And
        whether a live member's journal has one of ``delivered_again`` in flight."""
        in_flight: dict[RecordId, bool] = {}
        held = False
        for path in self.directory.glob(f"{MEMBER_PREFIX}*{MEMBER_SUFFIX}"):
            if path == self._path:
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # its member is alive, or not quite dead yet
                    if delivered_again and not held:
                        held = not _in_flight(path.read_bytes()).keys().isdisjoint(delivered_again)
                    continue
                left = _in_flight(path.read_bytes())
                if left:
                    log.warning(
                        "a member of this share group died with %d record(s) in flight "
                        "(journal %s): they run alone when delivered again",
                        len(left),
                        path.name,
                    )
                in_flight.update(left)
                path.unlink()
            finally:
                os.close(fd)
        return in_flight, held

    def _merge(
        self, stored: dict[RecordId, Suspect], adopted: Mapping[RecordId, bool]
    ) -> dict[RecordId, Suspect]:
        now = time.time()
        for record, alone in adopted.items():
            suspect = stored.get(record)
            if suspect is None:
                suspect = stored[record] = Suspect(0, 0, now)
            suspect.deaths += 1
            suspect.alone += int(alone)
        return stored

    def _load(self) -> dict[RecordId, Suspect]:
        try:
            document = json.loads((self.directory / SUSPECTS_FILE).read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            log.warning(
                "the crash journal's %s is unreadable (%s); starting anew", SUSPECTS_FILE, error
            )
            return {}
        horizon = time.time() - SUSPECT_TTL_S
        return {
            (topic, partition, offset): Suspect(deaths, alone, since)
            for topic, partition, offset, deaths, alone, since in document.get("records", [])
            if since >= horizon
        }

    def _store(self, suspects: dict[RecordId, Suspect]) -> None:
        kept = sorted(suspects.items(), key=lambda item: item[1].since)[-MAX_SUSPECTS:]
        records = [[*record, s.deaths, s.alone, s.since] for record, s in kept]
        target = self.directory / SUSPECTS_FILE
        temporary = target.with_name(f".{SUSPECTS_FILE}.{os.getpid()}")
        temporary.write_text(json.dumps({"version": 1, "records": records}))
        os.replace(temporary, target)

    def _reload(self) -> None:
        try:
            stat = (self.directory / SUSPECTS_FILE).stat()
        except FileNotFoundError:
            self.suspects, self._seen = {}, None
            return
        seen = (stat.st_mtime_ns, stat.st_size)
        if seen != self._seen:
            self.suspects, self._seen = self._load(), seen


def _in_flight(data: bytes) -> dict[RecordId, bool]:
    """Replay a journal: the records dispatched and not settled, ``True`` if run alone. A
    torn last entry (the process died while writing it) is ignored."""
    left: dict[RecordId, bool] = {}
    at = 0
    while at + _HEADER.size <= len(data):
        kind, size = _HEADER.unpack_from(data, at)
        body = data[at + _HEADER.size : at + _HEADER.size + size]
        if len(body) < size:
            break
        at += _HEADER.size + size
        try:
            records = [tuple(record) for record in marshal.loads(body)]
        except (EOFError, ValueError, TypeError):
            break
        for record in records:
            if kind == SETTLED:
                left.pop(record, None)
            else:
                left[record] = kind == ALONE
    return left
