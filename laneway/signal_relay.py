"""SignalRelay: act on SIGINT/SIGTERM from a thread of its own, not inside the signal handler."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType, TracebackType


class SignalRelay:
    """Installs handlers for ``signals`` that only write the signal's number to a pipe; a
    daemon thread reads it and calls ``callback(signum)``.

    Python runs a signal handler on the main thread between two bytecodes, which may be
    inside a ``with lock:`` block of the code it interrupted. A handler that takes that
    lock itself (stopping a consumer wakes its control loop under a lock) then waits for
    itself forever, and the process never exits on SIGTERM. Writing to a pipe takes no
    lock; the relay thread takes locks like any other thread, waiting at worst until the
    interrupted code leaves its block.

    Use it as a context manager on the main thread; the previous handlers are restored on
    exit.
    """

    def __init__(self, signals: Sequence[signal.Signals], callback: Callable[[int], None]) -> None:
        self._signals = list(signals)
        self._callback = callback
        self._previous: dict[signal.Signals, object] = {}
        self._read = self._write = -1
        self._thread: threading.Thread | None = None

    def __enter__(self) -> SignalRelay:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._thread = threading.Thread(target=self._relay, name="laneway-signals", daemon=True)
        self._thread.start()
        self._previous = {sig: signal.signal(sig, self._handle) for sig in self._signals}
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        os.close(self._write)  # the relay reads the end of the pipe and returns
        if self._thread is not None:
            self._thread.join()
        os.close(self._read)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(BlockingIOError):  # a full pipe has signals enough
            os.write(self._write, bytes([signum]))

    def _relay(self) -> None:
        while True:
            received = os.read(self._read, 64)
            if not received:
                return
            for signum in received:
                self._callback(signum)
