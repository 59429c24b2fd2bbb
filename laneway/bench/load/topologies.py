"""Topologies of the ``spike`` and ``paced`` benchmarks: how many ``laneway run`` processes,
which engine, how much concurrency, which limits.

A topology is written the way it reads, e.g. ``4x sync`` (four member processes of one
group, sync engine), ``async c64`` (one process, async engine, concurrency 64),
``2x async c64``, ``async c64 adaptive`` (``concurrency_limit="adaptive"``) or
``async c64 max200`` (``max_rate=200``): ``[Nx ]ENGINE[ cC][ adaptive][ maxR]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from laneway.config import DEFAULT_CONCURRENCY
from laneway.options import EngineKind

DEFAULT_TOPOLOGIES = (
    "1x sync", "4x sync", "8x sync", "async c8", "async c64", "async c256", "thread c64",
    "2x async c64",
)  # fmt: skip
"""Seed 004's "many light consumers" (N sync processes) against one process with
concurrency, as issue 15 asks: sync x 1/4/8 members, async at 8/64/256, thread at 64,
and 2 members x async."""

HANDLERS = {
    EngineKind.ASYNC: "laneway.bench.tickets.handlers:reserve_async",
    EngineKind.THREAD: "laneway.bench.tickets.handlers:reserve_blocking",
    EngineKind.SYNC: "laneway.bench.tickets.handlers:reserve_blocking",
}

_PATTERN = re.compile(
    r"(?:(?P<members>\d+)x )?(?P<engine>sync|thread|async)(?: c(?P<concurrency>\d+))?"
    r"(?P<adaptive> adaptive)?(?: max(?P<rate>\d+(?:\.\d+)?))?"
)


@dataclass(frozen=True)
class Topology:
    """``members`` processes of one consumer group, each running ``engine`` with
    ``concurrency`` handlers at once, optionally with an adaptive concurrency limit and a
    ``max_rate`` (messages per second per process)."""

    name: str
    engine: EngineKind
    concurrency: int
    members: int = 1
    adaptive: bool = False
    max_rate: float | None = None

    @property
    def handler(self) -> str:
        return HANDLERS[self.engine]

    def run_flags(self) -> list[str]:
        """The ``laneway run`` flags that make a consumer of this topology."""
        flags = ["--engine", self.engine.value, "--members", str(self.members)]
        if self.engine is not EngineKind.SYNC:
            flags += ["--concurrency", str(self.concurrency)]
        if self.adaptive:
            flags += ["--concurrency-limit", "adaptive"]
        if self.max_rate is not None:
            flags += ["--max-rate", f"{self.max_rate:g}"]
        return flags

    def pool_size(self, most: int) -> int:
        """Database connections per member: one per handler that can run, up to ``most``."""
        return min(self.concurrency, most)


def parse_topology(text: str) -> Topology:
    """The topology ``text`` names; ValueError saying the syntax when it names none."""
    name = " ".join(text.split())
    match = _PATTERN.fullmatch(name)
    if match is None:
        raise ValueError(
            f"{text!r} is not a topology; write [Nx ]ENGINE[ cC][ adaptive][ maxR], e.g. "
            "'4x sync', 'async c64', '2x async c64', 'async c64 adaptive', 'async c64 max200'"
        )
    engine = EngineKind(match["engine"])
    members = int(match["members"] or 1)
    concurrency = int(match["concurrency"] or DEFAULT_CONCURRENCY[engine])
    if engine is EngineKind.SYNC and concurrency != 1:
        raise ValueError(f"{text!r}: the sync engine runs one message at a time (no cC)")
    if engine is EngineKind.SYNC and match["adaptive"]:
        raise ValueError(f"{text!r}: an adaptive limit needs the thread or async engine")
    if not 1 <= members <= 64 or concurrency < 1:
        raise ValueError(f"{text!r}: members must be 1-64 and concurrency at least 1")
    rate = float(match["rate"]) if match["rate"] else None
    if rate is not None and rate <= 0:
        raise ValueError(f"{text!r}: maxR must be a rate above 0 messages a second")
    return Topology(name, engine, concurrency, members, bool(match["adaptive"]), rate)
