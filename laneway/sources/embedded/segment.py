"""The durable file format of :class:`laneway.EmbeddedLog` (``EmbeddedLog(path=...)``).

Layout of the log directory::

    <path>/@meta/lock                held (flock) while an EmbeddedLog has the directory open
    <path>/@meta/topics.json         {"format": 1, "topics": {"orders": 8, ...}}
    <path>/@meta/groups/<name>.json  committed offsets + metadata of one consumer group
    <path>/<topic>/<partition>.log   the records of one partition, append-only
    <path>/<topic>/<partition>.generations.json
                                     its generations, once its tail was ever cut

(``@`` cannot occur in a topic name, so metadata never collides with a topic directory.)

A partition file starts with an 8-byte header (``b"LANEWAY"`` + a format version byte)
followed by frames: ``<u32 body length><u32 CRC32 of body><body>``. A body is either a
record (kind 0: offset, timestamp, key, value, headers) or a log-start marker (kind 1:
records below this offset were dropped by ``when_full="drop_oldest"``). Frames are written
with buffered appends and flushed to the OS after every produce call (a process crash loses
nothing that was acknowledged; a power loss may lose the unsynced tail). A torn tail — a
truncated frame or a CRC mismatch — is cut off on open with a warning. JSON files are
replaced atomically (write a temporary file, fsync, rename, fsync the directory).

Generations. Records appended after a cut take the offsets of records that were lost, so an
offset alone no longer names one record. Each cut therefore starts a new *generation* of
the partition at the offset it was cut at (``{"format": 1, "generations": [[offset,
generation], ...]}``, generation 0 from offset 0 when the file is absent), written before
the file is cut; a tail lost at a frame boundary (no torn frame to see) starts one too,
once a group's commit shows records beyond the end (see
:class:`~laneway.sources.embedded.coordinator.GroupCoordinator`). These are the epochs a
consumer checks commit metadata against (see :mod:`laneway.offsets.tracker`). Older
releases ignore the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from laneway.errors import SourceError
from laneway.logs import get_logger
from laneway.types import CommitPosition, Header, Message, PartitionId

logger = get_logger(__name__)

FORMAT_VERSION = 1
FILE_HEADER = b"LANEWAY" + bytes([FORMAT_VERSION])
KIND_RECORD = 0
KIND_LOG_START = 1

_FRAME = struct.Struct("<II")
_RECORD = struct.Struct("<BqqiiH")
_HEADER = struct.Struct("<Hi")
_LOG_START = struct.Struct("<Bq")


class CorruptLogError(SourceError):
    """A log file is not in laneway's format, or intact frames contradict each other."""


def _frame(body: bytes) -> bytes:
    return _FRAME.pack(len(body), zlib.crc32(body)) + body


def encode_record(message: Message) -> bytes:
    """One framed record (offset, timestamp, key, value, headers) of ``message``."""
    key, value, headers = message.key, message.value, message.headers
    parts = [
        _RECORD.pack(
            KIND_RECORD,
            message.offset,
            message.timestamp,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
            len(headers),
        )
    ]
    if key:
        parts.append(key)
    if value:
        parts.append(value)
    for name, data in headers:
        encoded = name.encode()
        parts.append(_HEADER.pack(len(encoded), -1 if data is None else len(data)))
        parts.append(encoded)
        if data:
            parts.append(data)
    return _frame(b"".join(parts))


def encode_log_start(offset: int) -> bytes:
    """A framed marker: records below ``offset`` are gone (dropped when the log was full)."""
    return _frame(_LOG_START.pack(KIND_LOG_START, offset))


def _take(body: bytes, pos: int, size: int) -> tuple[bytes | None, int]:
    if size < 0:
        return None, pos
    end = pos + size
    if end > len(body):
        raise ValueError("field runs past the end of the frame")
    return body[pos:end], end


def _decode_record(body: bytes, topic: str, partition: int) -> Message:
    _, offset, timestamp, key_len, value_len, count = _RECORD.unpack_from(body)
    key, pos = _take(body, _RECORD.size, key_len)
    value, pos = _take(body, pos, value_len)
    headers: list[Header] = []
    for _ in range(count):
        name_len, data_len = _HEADER.unpack_from(body, pos)
        name, pos = _take(body, pos + _HEADER.size, name_len)
        data, pos = _take(body, pos, data_len)
        headers.append(((name or b"").decode(), data))
    if pos != len(body):
        raise ValueError("trailing bytes after the record")
    return Message(topic, partition, offset, key, value, tuple(headers), timestamp)


def _recover(data: bytes, path: Path, topic: str, partition: int) -> tuple[list[Message], int, int]:
    """Decode frames; return (records, log start, length of the intact prefix)."""
    records: list[Message] = []
    start = 0
    pos = len(FILE_HEADER)
    while pos < len(data):
        if pos + _FRAME.size > len(data):
            break
        length, crc = _FRAME.unpack_from(data, pos)
        body = data[pos + _FRAME.size : pos + _FRAME.size + length]
        if len(body) != length or zlib.crc32(body) != crc:
            break
        try:
            kind = body[0] if body else -1
            if kind == KIND_LOG_START:
                start = max(start, _LOG_START.unpack(body)[1])
            elif kind != KIND_RECORD:
                break
            else:
                message = _decode_record(body, topic, partition)
                expected = records[-1].offset + 1 if records else 0
                if message.offset != expected:
                    raise CorruptLogError(
                        f"{path}: record at byte {pos} has offset {message.offset}, "
                        f"expected {expected}"
                    )
                records.append(message)
        except (ValueError, struct.error):
            break
        pos += _FRAME.size + length
    return records, start, pos


class PartitionFile:
    """The append-only file of one partition: buffered appends, flushed once per produce call."""

    def __init__(self, path: Path, handle: BinaryIO) -> None:
        self.path = path
        self._handle = handle

    @classmethod
    def open(
        cls, path: Path, topic: str, partition: int
    ) -> tuple[PartitionFile, list[Message], int, list[tuple[int, int]]]:
        """Open (or create) ``path``; return the file, its records, the log start offset and
        the partition's generations (a new one begins where a torn tail is cut)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        data = path.read_bytes() if path.exists() else b""
        records: list[Message] = []
        start = 0
        if len(data) < len(FILE_HEADER):
            if data and not FILE_HEADER.startswith(data):
                raise CorruptLogError(f"{path} is not a laneway log file (bad header)")
            good = 0
        elif not data.startswith(FILE_HEADER):
            raise CorruptLogError(
                f"{path} is not a laneway log file of format {FORMAT_VERSION} (bad header)"
            )
        else:
            records, start, good = _recover(data, path, topic, partition)
        generations = _load_generations(path)
        if good < len(data):
            end = records[-1].offset + 1 if records else 0
            generation = generations[-1][1] + 1
            logger.warning(
                "%s: cut %d bytes of torn or corrupt tail (kept %d records); records from "
                "offset %d on are of generation %d",
                path,
                len(data) - good,
                len(records),
                end,
                generation,
            )
            generations.append((end, generation))
            _write_atomic(_generations_path(path), _generations_document(generations))
            os.truncate(path, good)
        handle = open(path, "ab")  # noqa: SIM115 - owned by the PartitionFile, closed in close()
        if good == 0:
            handle.write(FILE_HEADER)
            handle.flush()
        return cls(path, handle), records, start, generations

    def save_generations(self, generations: list[tuple[int, int]]) -> None:
        """Replace the partition's generations file (atomically)."""
        _write_atomic(_generations_path(self.path), _generations_document(generations))

    def write(self, frame: bytes) -> None:
        self._handle.write(frame)

    def flush(self) -> None:
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()


def _generations_path(log_path: Path) -> Path:
    return log_path.with_name(log_path.stem + ".generations.json")


def _generations_document(generations: list[tuple[int, int]]) -> bytes:
    return json.dumps({"format": 1, "generations": [list(g) for g in generations]}).encode()


def _load_generations(log_path: Path) -> list[tuple[int, int]]:
    """The generations recorded beside a partition file (``[(0, 0)]`` when none)."""
    try:
        document = json.loads(_generations_path(log_path).read_text())
        found = [(int(offset), int(generation)) for offset, generation in document["generations"]]
    except FileNotFoundError:
        return [(0, 0)]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorruptLogError(f"{_generations_path(log_path)} cannot be read: {exc}") from exc
    return found or [(0, 0)]


def _write_atomic(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _group_file_name(group: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in group)
    digest = hashlib.sha256(group.encode()).hexdigest()[:16]
    return f"{safe[:80]}-{digest}.json"


class LogDirectory:
    """The directory of a durable embedded log: topic metadata, group commits, partition files.

    Holds an exclusive ``flock`` on ``<path>/@meta/lock`` so two logs never write the same files.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._meta = root / "@meta"
        (self._meta / "groups").mkdir(parents=True, exist_ok=True)
        self._lock_handle = open(self._meta / "lock", "a+b")  # noqa: SIM115 - held until close()
        try:
            import fcntl

            fcntl.flock(self._lock_handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - platforms without flock: no cross-process lock
            pass
        except OSError as exc:
            self._lock_handle.close()
            raise SourceError(f"{root} is already open in another EmbeddedLog") from exc
        self._write_lock = threading.Lock()
        self._written: dict[str, int] = {}

    def load_topics(self) -> dict[str, int]:
        path = self._meta / "topics.json"
        if not path.exists():
            return {}
        document = json.loads(path.read_text())
        return {str(name): int(count) for name, count in document["topics"].items()}

    def save_topics(self, topics: Mapping[str, int]) -> None:
        document = {"format": FORMAT_VERSION, "topics": dict(topics)}
        with self._write_lock:
            _write_atomic(self._meta / "topics.json", json.dumps(document, indent=1).encode())

    def load_commits(self) -> dict[str, dict[PartitionId, CommitPosition]]:
        groups: dict[str, dict[PartitionId, CommitPosition]] = {}
        for path in sorted((self._meta / "groups").glob("*.json")):
            document = json.loads(path.read_text())
            groups[str(document["group"])] = {
                (str(entry[0]), int(entry[1])): CommitPosition(
                    int(entry[2]), str(entry[3]), None if len(entry) < 5 else int(entry[4])
                )
                for entry in document["offsets"]
            }
        return groups

    def save_commits(
        self, group: str, commits: Mapping[PartitionId, CommitPosition], version: int
    ) -> None:
        """Replace the group's commit file, unless a newer ``version`` was written already."""
        offsets = [
            [t, p, c.offset, c.metadata, *([] if c.leader_epoch is None else [c.leader_epoch])]
            for (t, p), c in sorted(commits.items())
        ]
        document = {"format": FORMAT_VERSION, "group": group, "offsets": offsets}
        with self._write_lock:
            if self._written.get(group, -1) >= version:
                return
            _write_atomic(
                self._meta / "groups" / _group_file_name(group), json.dumps(document).encode()
            )
            self._written[group] = version

    def open_partition(
        self, topic: str, partition: int
    ) -> tuple[PartitionFile, list[Message], int, list[tuple[int, int]]]:
        return PartitionFile.open(self.root / topic / f"{partition}.log", topic, partition)

    def close(self) -> None:
        self._lock_handle.close()
