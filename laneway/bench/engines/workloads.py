"""The work each benchmark handler does per message (see :mod:`laneway.bench.engines.scenarios`).

Every piece of work is a small picklable object defined at module level, so the process
engine's workers can import it by name. Sync objects are called ``work(message)``; async ones
are awaited (:func:`make_sync_work`, :func:`make_async_work`). This module is imported by
worker processes: it must stay free of the ``bench`` extra's heavy dependencies.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from laneway.types import Message

SyncWork = Callable[[Message], object]
AsyncWork = Callable[[Message], Awaitable[object]]

SEQUENCE_DIGITS = 10
"""Produced values start with the message's sequence number in this many ASCII digits."""
IO_TIMEOUT_S = 30.0
"""Bound on one request to the echo server (it answers after ``work_ms``)."""
_RANDOM_STEPS = 1_000


def encode_value(sequence: int) -> bytes:
    return b"%010d" % sequence


def sequence_of(value: object) -> int:
    """The sequence number a produced value carries (``-1`` for a foreign value); a value
    decoded by ``--value-format json|avro`` carries it as its ``sequence`` field."""
    if not isinstance(value, bytes):
        return _decoded_sequence(value)
    if len(value) < SEQUENCE_DIGITS:
        return -1
    head = value[:SEQUENCE_DIGITS]
    return int(head) if head.isdigit() else -1


def _decoded_sequence(value: object) -> int:
    found = value.get("sequence") if isinstance(value, dict) else getattr(value, "sequence", None)
    return found if isinstance(found, int) else -1


def random_fraction(sequence: int) -> float:
    """A fixed pseudo-random fraction in ``[0, 1]`` per sequence number (Knuth hashing)."""
    return ((sequence * 2654435761) % 4294967296 % (_RANDOM_STEPS + 1)) / _RANDOM_STEPS


@dataclass(frozen=True)
class WorkSpec:
    """What to do per message: ``kind`` (none, sleep, io, cpu, busy, random) and its size."""

    kind: str
    seconds: float = 0.0
    iterations: int = 0
    echo_port: int = 0


class NoWork:
    def __call__(self, message: Message) -> None:
        return None


class Sleep:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, message: Message) -> None:
        time.sleep(self.seconds)


class AsyncSleep:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def __call__(self, message: Message) -> None:
        await asyncio.sleep(self.seconds)


class RandomSleep:
    """Waits a fixed-per-message random share of ``seconds`` (blocking)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, message: Message) -> None:
        time.sleep(self.seconds * random_fraction(sequence_of(message.value)))


class AsyncRandomSleep:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def __call__(self, message: Message) -> None:
        await asyncio.sleep(self.seconds * random_fraction(sequence_of(message.value)))


class Sha256:
    """``iterations`` chained sha256 digests of the value."""

    def __init__(self, iterations: int) -> None:
        self.iterations = iterations

    def __call__(self, message: Message) -> None:
        digest = message.value or b""
        sha256 = hashlib.sha256
        for _ in range(self.iterations):
            digest = sha256(digest).digest()


class BusyCpu:
    """Spins for ``seconds`` of wall time in Python code (holds the GIL)."""

    clock = staticmethod(time.perf_counter)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, message: Message) -> None:
        clock = self.clock
        end = clock() + self.seconds
        while clock() < end:
            pass


class CpuSpin(BusyCpu):
    """Spins until this thread has used ``seconds`` of CPU time (not wall time).

    :class:`BusyCpu` counts wall time, so a spin that the OS deschedules still "finishes"
    on time, and more processes than cores look like more throughput. Counting CPU time
    makes the work the same whatever else the machine runs: what scaling tests need.
    """

    clock = staticmethod(time.thread_time)


class Inline:
    """Runs sync work inside an ``async def`` handler (CPU work blocks the loop, as it would)."""

    def __init__(self, work: SyncWork) -> None:
        self.work = work

    async def __call__(self, message: Message) -> None:
        self.work(message)


def echo_request(message: Message, delay_s: float) -> bytes:
    """One request line for the echo server: ``<sequence> <delay in microseconds>``."""
    return b"%d %d\n" % (sequence_of(message.value), int(delay_s * 1_000_000))


class _Connection(threading.local):
    sock: socket.socket | None = None


class EchoRoundTrip:
    """A blocking TCP round trip to the bench's echo server, one connection per thread."""

    def __init__(self, port: int, seconds: float) -> None:
        self.port = port
        self.seconds = seconds
        self._reset()

    def _reset(self) -> None:
        self._local = _Connection()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []

    def __getstate__(self) -> dict[str, Any]:
        return {"port": self.port, "seconds": self.seconds}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.port = state["port"]
        self.seconds = state["seconds"]
        self._reset()

    def __call__(self, message: Message) -> None:
        sock = self._local.sock
        if sock is None:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=IO_TIMEOUT_S)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._local.sock = sock
            with self._lock:
                self._sockets.append(sock)
        sock.sendall(echo_request(message, self.seconds))
        _read_line(sock.recv)

    def close(self) -> None:
        with self._lock:
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()


class AsyncEchoRoundTrip:
    """The same round trip with non-blocking sockets on the running event loop (a pool)."""

    def __init__(self, port: int, seconds: float) -> None:
        self.port = port
        self.seconds = seconds
        self._free: list[socket.socket] = []
        self._sockets: list[socket.socket] = []

    async def __call__(self, message: Message) -> None:
        loop = asyncio.get_running_loop()
        sock = self._free.pop() if self._free else await self._connect(loop)
        await asyncio.wait_for(self._exchange(loop, sock, message), IO_TIMEOUT_S)
        self._free.append(sock)

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sockets.append(sock)
        await loop.sock_connect(sock, ("127.0.0.1", self.port))
        return sock

    async def _exchange(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, message: Message
    ) -> None:
        await loop.sock_sendall(sock, echo_request(message, self.seconds))
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = await loop.sock_recv(sock, 256)
            if not chunk:
                raise ConnectionError("the echo server closed the connection")
            reply += chunk

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()
        self._free.clear()


def _read_line(recv: Callable[[int], bytes]) -> bytes:
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = recv(256)
        if not chunk:
            raise ConnectionError("the echo server closed the connection")
        reply += chunk
    return reply


def make_sync_work(spec: WorkSpec) -> SyncWork:
    """The blocking work object for ``spec`` (baseline, thread and process engines)."""
    kind = spec.kind
    if kind == "sleep":
        return Sleep(spec.seconds)
    if kind == "random":
        return RandomSleep(spec.seconds)
    if kind == "io":
        return EchoRoundTrip(spec.echo_port, spec.seconds)
    if kind == "cpu":
        return Sha256(spec.iterations)
    if kind == "busy":
        return BusyCpu(spec.seconds)
    if kind == "none":
        return NoWork()
    raise ValueError(f"unknown work kind {kind!r}")


def make_async_work(spec: WorkSpec) -> AsyncWork:
    """The awaitable work object for ``spec`` (the async engine); CPU work runs inline."""
    kind = spec.kind
    if kind == "sleep":
        return AsyncSleep(spec.seconds)
    if kind == "random":
        return AsyncRandomSleep(spec.seconds)
    if kind == "io":
        return AsyncEchoRoundTrip(spec.echo_port, spec.seconds)
    return Inline(make_sync_work(spec))
