"""The handler of the soak's members (``laneway run handler:handle``): 2 ms of I/O-like
wait, then one line per record to ``<LANEWAY_SOAK_DIR>/<pid>.log``: partition, offset,
when it was produced (wall-clock ms), its sequence number, when it was done."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import IO

import laneway

_lock = threading.Lock()
_out: dict[int, IO[str]] = {}


def handle(message: laneway.Message) -> None:
    time.sleep(0.002)
    produced, sequence = (message.value or b"0 -1").split(b" ")
    done = time.time_ns() // 1_000_000
    line = f"{message.partition} {message.offset} {int(produced)} {int(sequence)} {done}\n"
    pid = os.getpid()
    with _lock:
        out = _out.get(pid)
        if out is None:
            path = Path(os.environ["LANEWAY_SOAK_DIR"]) / f"{pid}.log"
            out = _out[pid] = open(path, "a", buffering=1)  # noqa: SIM115 - kept for the life
        out.write(line)
