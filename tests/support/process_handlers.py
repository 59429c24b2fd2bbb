"""Handlers for the process engine tests, importable by name from worker processes.

Handlers that record what they did append ``key offset pid start end`` lines to a
per-process file in the directory named by the ``LANEWAY_TEST_RECORD_DIR`` environment
variable (workers inherit the parent's environment when they are spawned).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TextIO

import laneway
from laneway.types import Message

RECORD_DIR = "LANEWAY_TEST_RECORD_DIR"

if os.environ.get("LANEWAY_TEST_TRACE_FILE"):  # spans of workers, for the tracing tests
    import tracing_support

    tracing_support.configure_from_environment()

_record_file: list[TextIO] = []


def noop(message: Message) -> None:
    """Does nothing: measures the engine's own cost."""


def sha256_500(message: Message) -> None:
    """500 rounds of sha256 over the value: the CPU benchmark's unit of work."""
    digest = message.value or b""
    for _ in range(500):
        digest = hashlib.sha256(digest).digest()


def record(message: Message) -> None:
    """Record key, offset, pid and start/end times; sleep ``float(value)`` s if given."""
    start = time.monotonic()
    if message.value:
        time.sleep(float(message.value))
    end = time.monotonic()
    if not _record_file:
        path = os.path.join(os.environ[RECORD_DIR], f"worker-{os.getpid()}.txt")
        _record_file.append(open(path, "a", buffering=1))  # noqa: SIM115 - kept for the process
    key = message.key.decode() if message.key is not None else "-"
    _record_file[0].write(
        f"{message.topic} {message.partition} {key} {message.offset} {os.getpid()} {start} {end}\n"
    )


def fail_on_multiples_of_seven(message: Message) -> None:
    """Raises ValueError for offsets divisible by 7, returns for the others."""
    if message.offset % 7 == 0:
        raise ValueError(f"offset {message.offset} is divisible by 7")


def raise_base_exceptions(message: Message) -> None:
    """Raises SystemExit for value b"exit", KeyboardInterrupt for b"interrupt"."""
    if message.value == b"exit":
        raise SystemExit(3)
    if message.value == b"interrupt":
        raise KeyboardInterrupt("stop it")


def exit_on_poison(message: Message) -> None:
    """Kills its own process (no cleanup) for value b"poison"; sleeps 1 ms otherwise."""
    if message.value == b"poison":
        os._exit(7)
    time.sleep(0.001)


def sleep_value(message: Message) -> None:
    """Sleeps ``float(value)`` seconds."""
    time.sleep(float(message.value or b"0"))


not_importable_lambda = lambda message: None  # noqa: E731 - the point of the test


class ExitWhenUnpickled:
    """A handler whose unpickling (in a worker, at start-up) kills the worker process."""

    def __reduce__(self) -> tuple[object, tuple[int]]:
        return (os._exit, (5,))

    def __call__(self, message: Message) -> None:
        return None


class RefuseWhileFileExists:
    """A handler that cannot be loaded in a worker while the file at ``path`` exists."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (load_unless_file_exists, (self.path,))

    def __call__(self, message: Message) -> None:
        time.sleep(0.001)


def load_unless_file_exists(path: str) -> RefuseWhileFileExists:
    if os.path.exists(path):
        raise ImportError(f"{path} exists")
    return RefuseWhileFileExists(path)


_attempts: dict[tuple[str, int, int], int] = {}


def fail_first_two_attempts(message: Message) -> None:
    """Raises RuntimeError on the first two attempts at each message (counted per process)."""
    where = (message.topic, message.partition, message.offset)
    _attempts[where] = _attempts.get(where, 0) + 1
    if _attempts[where] <= 2:
        raise RuntimeError(f"attempt {_attempts[where]} failed")


class CountAttempts:
    """An attempt hook that appends ``offset outcome`` per attempt to ``path`` (one file per
    process: the pid is appended), from any engine, process workers included."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _note(self, message: Message, outcome: str) -> None:
        with open(f"{self.path}.{os.getpid()}", "a") as out:
            out.write(f"{message.offset} {outcome}\n")

    def wrap(self, handler: Callable[[Message], object]) -> Callable[[Message], object]:
        def counted(message: Message) -> object:
            try:
                result = handler(message)
            except BaseException:
                self._note(message, "raised")
                raise
            self._note(message, "returned")
            return result

        return counted

    def wrap_async(
        self, handler: Callable[[Message], Awaitable[object]]
    ) -> Callable[[Message], Awaitable[object]]:
        async def counted(message: Message) -> object:
            try:
                result = await handler(message)
            except BaseException:
                self._note(message, "raised")
                raise
            self._note(message, "returned")
            return result

        return counted


async def fail_first_two_attempts_async(message: Message) -> None:
    """The coroutine twin of :func:`fail_first_two_attempts`."""
    fail_first_two_attempts(message)


def parse_amount(message: Message) -> None:
    raise ValueError(f"bad amount in offset {message.offset}")


def fail_bad_amounts(message: Message) -> None:
    """Raises ValueError (from parse_amount, so tracebacks have two frames) for b"bad"."""
    if message.value == b"bad":
        parse_amount(message)


class SqliteWriter:
    """A handler with resources: ``open()`` connects to a SQLite database (a real one, a
    file ``<path>.<pid>`` per worker process: one writer's open transaction would lock
    out the others) and notes the pid, each message is inserted, ``close()`` commits and
    disconnects. Rows become visible only once ``close()`` ran, so a test sees both. The
    thread engine's threads share the connection, so inserts take a lock (a sqlite3
    connection used from two threads at once can lose a row)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.connection: sqlite3.Connection | None = None
        self.lock = threading.Lock()

    def open(self) -> None:
        database = f"{self.path}.{os.getpid()}"
        self.connection = sqlite3.connect(database, timeout=30, check_same_thread=False)
        with self.connection:  # the open itself is committed at once
            self.connection.execute("CREATE TABLE IF NOT EXISTS opens (pid INTEGER)")
            self.connection.execute("INSERT INTO opens VALUES (?)", (os.getpid(),))
        self.connection.execute("CREATE TABLE IF NOT EXISTS seen (pid INTEGER, offset INTEGER)")

    def close(self) -> None:
        assert self.connection is not None
        self.connection.commit()
        self.connection.close()
        self.connection = None

    def __call__(self, message: Message) -> None:
        assert self.connection is not None, "open() runs before the first message"
        with self.lock:
            self.connection.execute("INSERT INTO seen VALUES (?, ?)", (os.getpid(), message.offset))

    def __getstate__(self) -> dict[str, object]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.path = str(state["path"])
        self.connection = None
        self.lock = threading.Lock()


class AsyncSqliteWriter(SqliteWriter):
    """:class:`SqliteWriter` with ``async def`` methods, for the async engine."""

    async def open(self) -> None:  # type: ignore[override]
        SqliteWriter.open(self)

    async def close(self) -> None:  # type: ignore[override]
        SqliteWriter.close(self)

    async def __call__(self, message: Message) -> None:  # type: ignore[override]
        SqliteWriter.__call__(self, message)


def echo_result(message: Message) -> laneway.Produce:
    """One result into ``<topic>.out``: the input's value under the input's key."""
    return laneway.Produce(f"{message.topic}.out", message.value, message.key)


def slow_echo_result(message: Message) -> laneway.Produce:
    """:func:`echo_result` after 2 ms: a run that lasts long enough to be interrupted."""
    time.sleep(0.002)
    return echo_result(message)


def result_in_partition_by_value(message: Message) -> laneway.Produce:
    """One result into ``<topic>.out``, in partition ``value % 3`` (the key is ignored)."""
    partition = int(message.value or b"") % 3
    return laneway.Produce(f"{message.topic}.out", message.value, message.key, partition=partition)


async def echo_result_async(message: Message) -> laneway.Produce:
    return echo_result(message)


def mixed_result(message: Message) -> list[object]:
    return [echo_result(message), 1]
