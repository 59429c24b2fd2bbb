"""Clients that hold a server's connections the cheap way: each sends its request a byte
every 0.1 s, never finishing it, and connects again the moment the server closes it; and
a probe that asks what a kubelet or a scraper asks meanwhile."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field

DRIP_EVERY = 0.1
"""Seconds between two bytes of a slow client's request."""


@dataclass
class SlowClients:
    """``count`` threads trickling ``GET path`` to ``port`` on loopback and reconnecting
    as soon as they are closed, until :meth:`stop`; ``connections`` counts the connections
    they made (a reconnect is one more)."""

    port: int
    path: str
    count: int
    connections: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        for number in range(self.count):
            thread = threading.Thread(target=self._client, name=f"slow-client-{number}")
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(10)

    def _client(self) -> None:
        request = f"GET {self.path} HTTP/1.1\r\nHost: x\r\nX-Slow: ".encode() + b"x" * 100_000
        while not self._stop.is_set():
            with self._lock:
                self.connections += 1
            with contextlib.suppress(OSError):
                self._drip(request)

    def _drip(self, request: bytes) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.setblocking(False)
            for byte in request:
                if self._stop.is_set():
                    return
                sock.send(bytes([byte]))
                if self._stop.wait(DRIP_EVERY):
                    return
                try:
                    if sock.recv(65536) == b"":
                        return  # closed by the server: connect again at once
                except BlockingIOError:
                    pass


@contextlib.contextmanager
def slow_clients(port: int, path: str, count: int) -> Iterator[SlowClients]:
    clients = SlowClients(port, path, count)
    clients.start()
    try:
        yield clients
    finally:
        clients.stop()


@dataclass(frozen=True)
class Probe:
    """One probe's answer: its HTTP status (0: no answer, e.g. timed out) and how long it
    took in seconds."""

    status: int
    seconds: float


def probe(port: int, path: str, timeout: float) -> Probe:
    """``GET path`` as a kubelet does: a fresh connection, ``timeout`` seconds at most."""
    began = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as answer:
            answer.read()
            status = answer.status
    except urllib.error.HTTPError as error:
        status = error.code
    except OSError:
        status = 0
    return Probe(status, time.monotonic() - began)


def probes(port: int, paths: tuple[str, ...], count: int, timeout: float) -> list[Probe]:
    """``count`` probes 0.1 s apart, taking ``paths`` in turn."""
    found = []
    for number in range(count):
        found.append(probe(port, paths[number % len(paths)], timeout))
        time.sleep(0.1)
    return found
