"""The loopback echo server behind the ``io`` scenario: a remote service with a set latency.

It runs in its own process (``python -m laneway.bench.engines.echo``), so its work does not share
the GIL with the consumer being measured. It listens on ``127.0.0.1`` on a free port, prints
the port on one line, and answers every request line ``<sequence> <delay µs>`` by echoing it
back after that delay (one timer per request, any number of connections and requests in
flight). It exits when its standard input closes, so it never outlives the bench.
"""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
import sys
from types import TracebackType

START_TIMEOUT_S = 15.0


class _Echo(asyncio.Protocol):
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._buffer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while b"\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition(b"\n")
            fields = line.split()
            delay_us = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
            self._loop.call_later(delay_us / 1e6, self._reply, line + b"\n")

    def _reply(self, line: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(line)


async def serve() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Echo(loop), "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    closed = loop.create_future()
    stdin = sys.stdin.fileno()

    def on_stdin() -> None:
        if not os.read(stdin, 1024) and not closed.done():
            closed.set_result(None)

    loop.add_reader(stdin, on_stdin)
    async with server:
        await closed


class EchoServer:
    """Starts the echo server process on enter (``port`` is then set) and stops it on exit."""

    def __init__(self) -> None:
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> EchoServer:
        process = subprocess.Popen(
            [sys.executable, "-m", "laneway.bench.engines.echo"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._process = process
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_S)
        line = process.stdout.readline() if ready else b""
        if not line.strip().isdigit():
            self._stop()
            raise RuntimeError(f"the echo server did not start within {START_TIMEOUT_S} s")
        self.port = int(line)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        process = self._process
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(5.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5.0)
        if process.stdout is not None:
            process.stdout.close()
        self._process = None


if __name__ == "__main__":
    asyncio.run(serve())
