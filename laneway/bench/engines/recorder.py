"""The recorder: what every benchmark handler writes down about each message it ran.

The handler wrapper (:class:`RecordedHandler` / :class:`AsyncRecordedHandler`) times the
work with ``time.monotonic_ns`` (``CLOCK_MONOTONIC``: one clock for every process of the
machine) and appends one entry per message to a sink:

* :class:`MemorySink` for engines that run handlers in this process (baseline, thread,
  async): one flat list of plain values, extended under the GIL. It keeps no message
  and creates no object the garbage collector tracks: keeping 100,000 ``Message``
  tuples alive made the collector walk them again and again during the run, which
  cost the measured engines ~0.3 us a message (a third of a trivial async message).
* :class:`FileSink` for the process engine. It is pickled with the handler as just a
  directory path; inside each worker it appends text lines to ``<dir>/<pid>.rec``, written
  every :data:`FLUSH_EVERY` records or :data:`FLUSH_AFTER_S` seconds and, for the tail, by
  an ``atexit`` hook: a worker leaves through ``sys.exit`` when the engine closes it, and the
  consumer's ``run()`` joins the workers before it returns. A worker killed instead loses
  its unwritten tail, which then shows up as lost messages, never silently.

:func:`load_records` merges the files. Every entry becomes a :data:`Record`.
"""

from __future__ import annotations

import atexit
import os
import time
from pathlib import Path
from typing import Any

from laneway.bench.engines.workloads import AsyncWork, Inline, SyncWork, sequence_of
from laneway.types import Message

Record = tuple[int, bytes | None, int, int, int, int, int]
"""``(partition, key, offset, sequence, produce timestamp ms, start ns, end ns)``."""

FLUSH_EVERY = 512
FLUSH_AFTER_S = 0.5
RECORD_SUFFIX = ".rec"


class MemorySink:
    """Entries of handlers running in this process; cheap enough for a million a second."""

    FIELDS = 7
    """Values per entry: partition, key, offset, value, timestamp, start, end."""

    def __init__(self) -> None:
        self._values: list[Any] = []  # FIELDS values per entry, ints and bytes

    def add(self, message: Message, start: int, end: int) -> None:
        self._values.extend(
            (
                message.partition,
                message.key,
                message.offset,
                message.value,
                message.timestamp,
                start,
                end,
            )
        )

    def records(self) -> list[Record]:
        v, n = self._values, self.FIELDS
        sequences = map(sequence_of, v[3::n])
        columns = (v[0::n], v[1::n], v[2::n], sequences, v[4::n], v[5::n], v[6::n])
        return list(zip(*columns, strict=True))

    def __len__(self) -> int:
        return len(self._values) // self.FIELDS


class FileSink:
    """Entries of process-engine workers: one append-only file per worker process."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._reset()

    def _reset(self) -> None:
        self._lines: list[bytes] = []
        self._path: str | None = None
        self._flushed_at = time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": self.directory}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.directory = state["directory"]
        self._reset()

    def add(self, m: Message, start: int, end: int) -> None:
        if self._path is None:  # first record in this process: name its file, hook its exit
            self._path = os.path.join(self.directory, f"{os.getpid()}{RECORD_SUFFIX}")
            atexit.register(self.flush)
        self._lines.append(
            b"%d %d %s %d %d %d %d\n"
            % (m.partition, m.offset, m.key or b"-", sequence_of(m.value), m.timestamp, start, end)
        )
        if len(self._lines) >= FLUSH_EVERY or time.monotonic() - self._flushed_at > FLUSH_AFTER_S:
            self.flush()

    def flush(self) -> None:
        """Write buffered lines to this process's file."""
        if self._lines and self._path is not None:
            with open(self._path, "ab") as out:
                out.write(b"".join(self._lines))
            self._lines.clear()
        self._flushed_at = time.monotonic()


Sink = MemorySink | FileSink


class RecordedHandler:
    """A sync handler: run the work, then record the message with its start and end."""

    def __init__(self, work: SyncWork, sink: Sink) -> None:
        self.work = work
        self.sink = sink

    def __call__(self, message: Message) -> None:
        start = time.monotonic_ns()
        self.work(message)
        self.sink.add(message, start, time.monotonic_ns())


class AsyncRecordedHandler:
    """The ``async def`` twin of :class:`RecordedHandler`, for the async engine.

    Sync work (:class:`~laneway.bench.engines.workloads.Inline`: none, cpu) is called directly
    rather than through a coroutine of its own, so the recorder adds one coroutine per
    message, as the user's own ``async def`` handler would, not two.
    """

    def __init__(self, work: AsyncWork, sink: Sink) -> None:
        self.work = work
        self.sink = sink
        self._inline: SyncWork | None = work.work if isinstance(work, Inline) else None

    async def __call__(self, message: Message) -> None:
        start = time.monotonic_ns()
        if self._inline is None:
            await self.work(message)
        else:
            self._inline(message)
        self.sink.add(message, start, time.monotonic_ns())


def load_records(directory: Path) -> list[Record]:
    """Every line the workers wrote under ``directory``, as records."""
    records: list[Record] = []
    for path in sorted(directory.glob(f"*{RECORD_SUFFIX}")):
        for line in path.read_bytes().splitlines():
            p, o, k, seq, ts, start, end = line.split(b" ")
            key = None if k == b"-" else k
            records.append((int(p), key, int(o), int(seq), int(ts), int(start), int(end)))
    return records
