"""A handler module for ``laneway run`` tests, configured through the environment.

``SERVICE_RECORD_DIR``: each process appends ``pid partition offset`` per handled message
to ``<dir>/<pid>.log``. ``SERVICE_WORK_MS``: milliseconds each message sleeps.
``SERVICE_HANG_FILE``: a message whose value is ``b"hang"`` waits while that file exists.
``SERVICE_CRASH``: set, a message whose value is ``b"crash"`` kills its process.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from laneway.types import Message


def handle(message: Message) -> None:
    if os.environ.get("SERVICE_CRASH") and message.value == b"crash":
        os._exit(9)
    hang = os.environ.get("SERVICE_HANG_FILE")
    if hang and message.value == b"hang":
        while os.path.exists(hang):
            time.sleep(0.05)
    work = float(os.environ.get("SERVICE_WORK_MS", "0")) / 1000.0
    if work:
        time.sleep(work)
    directory = os.environ.get("SERVICE_RECORD_DIR")
    if directory:
        with open(Path(directory) / f"{os.getpid()}.log", "a") as out:
            out.write(f"{os.getpid()} {message.partition} {message.offset}\n")


def records(directory: Path) -> list[tuple[int, int, int]]:
    """Every ``(pid, partition, offset)`` handled, from all processes' files."""
    found = []
    for path in directory.glob("*.log"):
        for line in path.read_text().splitlines():
            pid, partition, offset = line.split()
            found.append((int(pid), int(partition), int(offset)))
    return found
