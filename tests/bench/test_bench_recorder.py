"""The bench recorder: what it writes down per message, and what it keeps alive."""

from __future__ import annotations

import asyncio
import sys

from laneway.bench.engines.recorder import AsyncRecordedHandler, MemorySink, RecordedHandler
from laneway.bench.engines.workloads import AsyncSleep, Inline, NoWork, encode_value
from laneway.types import Message


def message(partition: int, offset: int, key: bytes | None, sequence: int) -> Message:
    return Message("t", partition, offset, key, encode_value(sequence), (), 1_000 + offset)


def test_memory_sink_records_every_field_in_order() -> None:
    sink = MemorySink()
    sink.add(message(3, 7, b"k1", 42), 10, 20)
    sink.add(message(0, 8, None, 43), 30, 45)
    assert len(sink) == 2
    assert sink.records() == [(3, b"k1", 7, 42, 1_007, 10, 20), (0, None, 8, 43, 1_008, 30, 45)]


def test_memory_sink_keeps_no_message_alive() -> None:
    sink = MemorySink()
    handled = message(1, 2, b"k", 5)
    before = sys.getrefcount(handled)
    RecordedHandler(NoWork(), sink)(handled)
    assert sys.getrefcount(handled) == before
    assert sink.records()[0][:4] == (1, b"k", 2, 5)


def test_async_recorder_runs_inline_and_awaited_work_alike() -> None:
    sink = MemorySink()
    inline = AsyncRecordedHandler(Inline(NoWork()), sink)
    awaited = AsyncRecordedHandler(AsyncSleep(0.001), sink)

    async def run() -> None:
        await inline(message(0, 0, b"a", 0))
        await awaited(message(0, 1, b"a", 1))

    asyncio.run(run())
    (first, second) = sink.records()
    assert first[2] == 0 and second[2] == 1
    assert first[5] <= first[6]
    assert second[6] - second[5] >= 1_000_000  # the awaited sleep is inside the timing
