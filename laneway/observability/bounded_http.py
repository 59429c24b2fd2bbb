"""BoundedServer: the HTTP server behind laneway's probes, ``/metrics`` and status pages,
built so that no client can take it away from the others.

Python's ``ThreadingHTTPServer`` (and prometheus-client's exporter, built on it) gives
every connection a thread for as long as it stays open, and reads as much request as it
is sent: 300 connections that say nothing hold 300 threads, forever. A server with a
fixed number of such threads instead is no better: clients that send their request a
byte at a time, and connect again as soon as they are closed, hold every thread, and a
kubelet's ``/livez`` is refused (measured: 16 such clients, 47 of 48 probes answered
503; see docs/guides/operating.md).

So connections cost no thread here. One thread runs an event loop (``selectors``): it
accepts connections, reads each request's head as it comes, and writes each answer as
the client takes it, all without blocking. Only a complete request goes to a worker (one
of :data:`WORKERS` threads), which computes the answer and hands it back; a worker never
waits for a client. A slow client therefore holds a socket and at most
:data:`MAX_REQUEST_BYTES` of memory, never a worker.

Bounds: at most ``limit`` connections at once (:data:`MAX_CONNECTIONS`), at most
:data:`MAX_PER_ADDRESS` of them from one client address; one more is answered 503 at
once and closed (the server is truly overloaded). Each connection has ``timeout``
seconds *from accept* (:data:`REQUEST_TIMEOUT`, a deadline, not a socket timeout that a
byte a second would restart) to send its request and take its answer, else it is
closed. Requests for ``urgent`` paths (the probes) go to the workers before any other.
Any method but GET is answered 405. A client that goes away before its answer is logged
at DEBUG, a handler that fails as a WARNING with its traceback, through laneway's
logging.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from laneway.logs import get_logger
from laneway.observability.http_request import (
    MAX_REQUEST_BYTES,
    Refused,
    Request,
    error_answer,
    head_of,
    parse,
)

log = get_logger(__name__)

MAX_CONNECTIONS = 256
"""Connections held at once (a socket and at most 8 KiB each, no thread); one more is
answered 503 at once and closed."""
MAX_PER_ADDRESS = 64
"""Connections held at once from one client address (at most ``limit``): a single
client cannot fill the server."""
REQUEST_TIMEOUT = 5.0
"""Seconds from accept within which a connection must send its request and take the
answer, else it is closed."""
WORKERS = 2
"""Threads that compute answers (a probe's takes well under a millisecond)."""
ACCEPT_PAUSE = 0.1
"""Seconds the server stops accepting when the process is out of file descriptors."""
LINGER_BYTES = 65_536
"""What is read and dropped of a client's input after its answer, waiting for it to
close first (so that closing does not reset a connection whose answer is unread)."""

Handler = Callable[[Request], None]
"""Answers a request by calling its :meth:`~laneway.observability.http_request.Request.reply`."""

_BUSY = error_answer(503, "too many connections to this server")
_BUSY_ADDRESS = error_answer(503, "too many connections from this address")
_NO_ANSWER = error_answer(500, "the request could not be answered")


@dataclass(eq=False)
class _Connection:
    """A connection the event loop holds: reading its head, waiting for a worker,
    writing its answer, or lingering until the client closes (``out`` is ``None`` until
    the answer is known)."""

    sock: socket.socket
    address: str
    deadline: float
    received: bytearray = field(default_factory=bytearray)
    out: memoryview | None = None
    working: bool = False
    dropped: int = 0
    closed: bool = False


class BoundedServer:
    """An HTTP server on ``address`` answering GET requests with ``handler`` (on one of
    :data:`WORKERS` threads), bounded as the module says: ``limit`` connections, each for
    ``timeout`` seconds from accept (:data:`REQUEST_TIMEOUT` unless given), requests for
    ``urgent`` paths first. Raises ``OSError`` when ``address`` cannot be bound. Run
    :meth:`serve_forever` in a thread of its own (``name`` names its threads);
    :meth:`shutdown` ends it, :meth:`server_close` releases the port."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: Handler,
        limit: int = MAX_CONNECTIONS,
        *,
        timeout: float | None = None,
        urgent: Collection[str] = (),
        name: str = "laneway-http",
    ) -> None:
        self._handler = handler
        self._limit = limit
        self._per_address = min(limit, MAX_PER_ADDRESS)
        self._timeout = REQUEST_TIMEOUT if timeout is None else timeout
        self._urgent = frozenset(urgent)
        self.name = name
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind(address)
            self._listener.listen(128)
        except OSError:
            self._listener.close()
            raise
        self._listener.setblocking(False)
        self.server_address: tuple[str, int] = self._listener.getsockname()[:2]
        self._waker, self._wakened = socket.socketpair()
        self._waker.setblocking(False)
        self._wakened.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._open: set[_Connection] = set()
        self._by_address: Counter[str] = Counter()
        self._work: queue.PriorityQueue[tuple[int, int, _Connection | None, Request | None]]
        self._work = queue.PriorityQueue()
        self._order = itertools.count()
        self._answers: queue.SimpleQueue[tuple[_Connection, bytes]] = queue.SimpleQueue()
        self._stopping = False
        self._serving = False
        self._stopped = threading.Event()
        self._accepting_from = 0.0

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def active(self) -> int:
        """Connections held now."""
        return len(self._open)

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (or an exception in this thread, such as
        ``KeyboardInterrupt``); then every connection is closed and the workers end."""
        self._serving = True
        workers = [
            threading.Thread(target=self._work_loop, name=f"{self.name}-worker", daemon=True)
            for _ in range(WORKERS)
        ]
        for worker in workers:
            worker.start()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wakened, selectors.EVENT_READ)
        try:
            while not self._stopping:
                self._turn()
        finally:
            for connection in list(self._open):
                self._close(connection)
            for _ in workers:
                self._work.put((-1, next(self._order), None, None))
            self._selector.close()
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` and wait until it has (from another thread)."""
        self._stopping = True
        self._wake()
        if self._serving:
            self._stopped.wait()

    def server_close(self) -> None:
        """Release the port."""
        self._listener.close()
        self._waker.close()
        self._wakened.close()

    def _turn(self) -> None:
        """One turn of the loop: wait for the next event or deadline, handle what came."""
        now = time.monotonic()
        if self._accepting_from and now >= self._accepting_from:
            self._accepting_from = 0.0
            self._selector.register(self._listener, selectors.EVENT_READ)
        waits = [c.deadline for c in self._open]
        if self._accepting_from:
            waits.append(self._accepting_from)
        timeout = max(0.0, min(waits) - now) if waits else None
        for key, events in self._selector.select(timeout):
            if key.fileobj is self._listener:
                self._accept()
            elif key.fileobj is self._wakened:
                self._take_answers()
            elif events & selectors.EVENT_WRITE:
                self._write(key.data)
            else:
                self._read(key.data)
        now = time.monotonic()
        for connection in [c for c in self._open if c.deadline <= now]:
            log.debug(
                "%s: closed a connection from %s at its deadline", self.name, connection.address
            )
            self._close(connection)

    def _accept(self) -> None:
        for _ in range(64):
            try:
                sock, peer = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as error:  # out of file descriptors: let some close first
                log.warning("%s cannot accept a connection: %s", self.name, error)
                self._selector.unregister(self._listener)
                self._accepting_from = time.monotonic() + ACCEPT_PAUSE
                return
            address = str(peer[0])
            if len(self._open) >= self._limit:
                _refuse(sock, _BUSY)
            elif self._by_address[address] >= self._per_address:
                _refuse(sock, _BUSY_ADDRESS)
            else:
                sock.setblocking(False)
                connection = _Connection(sock, address, time.monotonic() + self._timeout)
                self._open.add(connection)
                self._by_address[address] += 1
                self._selector.register(sock, selectors.EVENT_READ, connection)
                self._read(connection)  # what came with it, or a reset: no slot for the dead

    def _read(self, connection: _Connection) -> None:
        answered = connection.out is not None or connection.working
        wanted = 4096 if answered else MAX_REQUEST_BYTES + 1 - len(connection.received)
        try:
            data = connection.sock.recv(wanted)
        except BlockingIOError:
            return
        except OSError as error:
            log.debug("%s: a client went away: %s", self.name, error)
            self._close(connection)
            return
        if not data:
            self._close(connection)  # the client closed (or gave up before its answer)
            return
        if answered:
            connection.dropped += len(data)
            if connection.dropped > LINGER_BYTES:
                self._close(connection)
            return
        connection.received += data
        try:
            head = head_of(bytes(connection.received))
            if head is None:
                return
            request = parse(head, connection.address)
        except Refused as refused:
            self._send(connection, refused.answer)
            return
        connection.working = True
        self._selector.unregister(connection.sock)
        first = 0 if request.path.split("?", 1)[0] in self._urgent else 1
        self._work.put((first, next(self._order), connection, request))

    def _work_loop(self) -> None:
        while True:
            _, _, connection, request = self._work.get()
            if connection is None or request is None:
                return
            if connection.closed:
                continue  # its deadline passed while it waited
            try:
                self._handler(request)
                answer = request.answer or _NO_ANSWER
                log.debug(
                    "%s: %s GET %s %d", self.name, request.client, request.path, request.status
                )
            except Exception:
                log.warning("%s: a request failed", self.name, exc_info=True)
                answer = _NO_ANSWER
            self._answers.put((connection, answer))
            self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: a wake-up is pending anyway
            self._waker.send(b"\0")

    def _take_answers(self) -> None:
        with contextlib.suppress(OSError):
            while self._wakened.recv(4096):
                pass
        while True:
            try:
                connection, answer = self._answers.get_nowait()
            except queue.Empty:
                return
            if connection.closed:
                continue
            connection.working = False
            connection.out = memoryview(answer)
            self._selector.register(connection.sock, selectors.EVENT_WRITE, connection)
            self._write(connection)

    def _send(self, connection: _Connection, answer: bytes) -> None:
        connection.out = memoryview(answer)
        self._selector.modify(connection.sock, selectors.EVENT_WRITE, connection)
        self._write(connection)

    def _write(self, connection: _Connection) -> None:
        assert connection.out is not None
        try:
            sent = connection.sock.send(connection.out)
        except BlockingIOError:
            return
        except OSError as error:
            log.debug("%s: a client went away before its answer: %s", self.name, error)
            self._close(connection)
            return
        connection.out = connection.out[sent:]
        if connection.out:
            return
        try:  # answered: wait for the client to close, reading and dropping what it sends
            connection.sock.shutdown(socket.SHUT_WR)
            self._selector.modify(connection.sock, selectors.EVENT_READ, connection)
        except OSError:
            self._close(connection)

    def _close(self, connection: _Connection) -> None:
        if connection.closed:
            return
        connection.closed = True
        self._open.discard(connection)
        self._by_address[connection.address] -= 1
        if not self._by_address[connection.address]:
            del self._by_address[connection.address]
        if not connection.working:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(connection.sock)
        connection.sock.close()


def _refuse(sock: socket.socket, answer: bytes) -> None:
    """Tell a connection over the limit why it is closed, without waiting for it (what
    it sent already is read first, so that closing does not reset the answer)."""
    try:
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.recv(65_536)
        sock.send(answer)
    except OSError:
        pass
    finally:
        sock.close()
