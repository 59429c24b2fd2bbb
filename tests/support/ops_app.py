"""A handler for ``laneway run`` in the operator-command tests: the key ``slow`` stays in
its handler until the file ``OPS_RELEASE`` exists; every other message is recorded
(``partition offset`` per line in ``OPS_RECORDS``) as it finishes."""

from __future__ import annotations

import os
import time

import laneway


def handle(message: laneway.Message) -> None:
    if message.key == b"slow":
        deadline = time.monotonic() + 120
        while not os.path.exists(os.environ["OPS_RELEASE"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        return
    with open(os.environ["OPS_RECORDS"], "a") as out:
        out.write(f"{message.partition} {message.offset}\n")


def finished(records: str | os.PathLike[str]) -> set[tuple[int, int]]:
    """The (partition, offset) of every message :func:`handle` recorded in ``records``."""
    if not os.path.exists(records):
        return set()
    with open(records) as lines:
        return {(int(p), int(o)) for p, o in (line.split() for line in lines)}
