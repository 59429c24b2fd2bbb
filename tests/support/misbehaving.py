"""Handlers that misbehave on purpose, for the adversarial contract suite.

A message's value says what its call does: ``b"hang"`` blocks until the test releases
every hung call (a file appears) — to the consumer it is a call that never returns; a
number is milliseconds of blocking work (``time.sleep`` / ``asyncio.sleep``). Every call
that returns is recorded with :mod:`recording` (so process-engine workers are observed
like threads), under the consumer's own subfolder when the test runs two (``handle_a`` /
``handle_b``). A call keeps the record folder it started in: a hung call of an earlier test
still running in the same process waits for, and records into, its own test's folder, never
the current one's. ``handle_stateful`` also counts each key's messages in its
``laneway.State``. The hung calls are recorded as they start, in ``hung.<pid>.txt``, so a test
can wait until they are under way.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import recording

from laneway import State
from laneway.types import Message

HANG = b"hang"
RELEASE = "release"
"""The file in the record folder whose existence releases every hung call."""
POLL_S = 0.02


def _folder() -> Path:
    return Path(os.environ[recording.RECORD_DIR])


def _released(folder: Path) -> bool:
    return (folder / RELEASE).exists()


def _note_hung(message: Message, folder: Path) -> None:
    with open(folder / f"hung.{os.getpid()}.txt", "a") as out:
        out.write(f"{message.partition} {message.offset}\n")


SECOND = "b"
"""The subfolder the second consumer of a test records into (``handle_b``)."""


def _run(message: Message, under: str = "") -> None:
    start, folder = time.monotonic(), _folder()
    if message.value == HANG:
        _note_hung(message, folder)
        while not _released(folder):
            time.sleep(POLL_S)
    elif message.value:
        time.sleep(float(message.value) / 1000.0)
    recording._write(message, start, under, folder)


async def _run_async(message: Message, under: str = "") -> None:
    start, folder = time.monotonic(), _folder()
    if message.value == HANG:
        _note_hung(message, folder)
        while not _released(folder):
            await asyncio.sleep(POLL_S)
    elif message.value:
        await asyncio.sleep(float(message.value) / 1000.0)
    recording._write(message, start, under, folder)


def handle(message: Message) -> None:
    _run(message)


def handle_b(message: Message) -> None:
    _run(message, SECOND)


async def handle_async(message: Message) -> None:
    await _run_async(message)


async def handle_b_async(message: Message) -> None:
    await _run_async(message, SECOND)


def handle_stateful(message: Message, state: State[int]) -> None:
    """:func:`handle`, then one more in the key's count (after the call returns)."""
    _run(message)
    state.value = (state.value or 0) + 1


async def handle_stateful_async(message: Message, state: State[int]) -> None:
    await _run_async(message)
    state.value = (state.value or 0) + 1


def handle_batch(messages: list[Message]) -> None:
    for message in messages:
        _run(message)


async def handle_batch_async(messages: list[Message]) -> None:
    for message in messages:
        await _run_async(message)


def release(folder: Path) -> None:
    """Let every hung call return."""
    (folder / RELEASE).touch()


def hung(folder: Path) -> set[tuple[int, int]]:
    """The ``(partition, offset)`` of every call that started hanging."""
    seen: set[tuple[int, int]] = set()
    for path in folder.glob("hung.*.txt"):
        for line in path.read_text().splitlines():
            partition, offset = line.split()
            seen.add((int(partition), int(offset)))
    return seen
