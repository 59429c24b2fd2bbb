"""The benchmark scenarios and the plan of runs they expand into.

A :class:`Scenario` is a workload (how many messages, which work per message) with lists of
partition counts, key counts, key spreads and ordering modes (and, with a ``--work-ms``
grid, work values); every combination of those is a *variant*,
and every variant is run once per engine (``raw``, ``baseline``, ``thread``, ``async``,
``process``), ``--repeat`` times. Command-line overrides replace a scenario's lists or sizes
for every selected scenario.

Work per message, decided once for all engines so rows compare like with like:

* ``trivial``: nothing (the handler only records it ran).
* ``sleep``: a blocking wait of ``work_ms`` — ``time.sleep`` for sync, thread and process
  handlers, ``asyncio.sleep`` for the async handler (what each engine's user would write).
* ``io``: a real network round trip on loopback: the handler sends a small request over TCP
  to an echo server the bench starts in its own process, which answers after ``work_ms``
  (a remote service with that latency). Sync, thread and process handlers use a blocking
  socket; the async handler uses non-blocking socket I/O on the event loop. Unlike
  ``sleep``, this includes the real cost of system calls and of the server.
* ``cpu``: ``cpu_iterations`` rounds of sha256 (CPU-bound, holds the GIL).
* ``scaling``: ``work_ms`` of busy CPU spin per message, over 1/2/4/8/15 partitions, with
  ``ordering="partition"`` so parallelism is bounded by the partition count.
* ``members``: ``work_ms`` of busy CPU per message over 8 partitions, consumed by 1/2/4/8
  members of one group (processes, on Kafka) and by 1/2/4/8 process-engine workers; see
  :mod:`laneway.bench.members.scenario` (it has its own table, not engine rows).
* ``keys``: one partition, a wait drawn uniformly from ``[0, work_ms]`` per message
  (deterministic per sequence number, so every engine gets the same work; ``time.sleep`` /
  ``asyncio.sleep``), for every key count x ordering mode.

Keys are spread evenly over the messages (``uniform``: message ``i`` has key ``i mod keys``)
unless ``--keys`` names ``zipf`` (see :mod:`laneway.bench.engines.key_spread`): then a few
hot keys carry most messages, as real traffic does, and key ordering shows what a hot key
costs. ``--work-ms 0,0.1,1,10,100`` runs every variant once per value (the grid users
compare across libraries: ``sleep`` is blocking work for sync, thread and process handlers
and ``asyncio.sleep`` for async ones).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from laneway.bench.engines.instrumentation import instrumented
from laneway.bench.engines.key_spread import UNIFORM, ZIPF
from laneway.bench.engines.pipelines import STATEFUL
from laneway.options import EngineKind, Ordering, names

LANEWAY_ENGINE = {
    "baseline" if kind is EngineKind.SYNC else kind.value: kind for kind in EngineKind
}
"""The ``Consumer(engine=...)`` behind each bench engine: ``baseline`` is the sync engine."""

CEILING = "ceiling"
"""The client loop that only counts what it reads (:mod:`laneway.bench.engines.raw`)."""
CLIENT_LOOPS = (CEILING, "raw")
"""The engines that are bare client loops, not laneway consumers."""
ENGINES = (*CLIENT_LOOPS, *LANEWAY_ENGINE)
"""Engines in run order: the client loops (no consumer) first, since every other row is
compared to them: ``ceiling`` counts what the client reads, ``raw`` also reads and records
each message as every engine's rows do."""

ORDERINGS = names(Ordering)

DEFAULT_TOPIC_PREFIX = "laneway-bench"
"""The start of every topic and group name the bench creates (``--topic-prefix``)."""

DEFAULT_CONCURRENCY = 128
"""Threads / coroutines for the thread and async engines: above the 100 keys of the I/O
scenarios, so keys, not the pool, bound their parallelism."""


@dataclass(frozen=True)
class Scenario:
    """A workload and the partition / key / ordering combinations it is measured over."""

    name: str
    work: str
    messages: int
    partitions: tuple[int, ...]
    keys: tuple[int, ...]
    orderings: tuple[str, ...]
    work_ms: float = 0.0
    cpu_iterations: int = 0
    shows: str = ""
    spreads: tuple[str, ...] = (UNIFORM,)
    """How keys spread over the messages: ``uniform`` and/or ``zipf`` (one run each)."""
    work_grid: tuple[float, ...] = ()
    """With more than one value, ``work_ms`` of each variant (one run each)."""

    def headline(self) -> str:
        """What one message costs, in words, from the scenario's actual settings."""
        return describe_work(self.work, self.work_grid or self.work_ms, self.cpu_iterations)


def describe_work(work: str, work_ms: float | Sequence[float], cpu_iterations: int) -> str:
    """The work per message in words, e.g. ``~5 ms blocking wait per message`` (or for a
    grid of values ``~0/1/10 ms ...``)."""
    grid = [work_ms] if isinstance(work_ms, (int, float)) else list(work_ms)
    ms = "/".join(f"{value:g}" for value in grid)
    if work == "none":
        return "no work per message"
    if work == "sleep":
        return f"~{ms} ms blocking wait per message"
    if work == "io":
        return f"~{ms} ms network round trip per message"
    if work == "cpu":
        return f"{cpu_iterations} x sha256 per message"
    if work == "busy":
        return f"~{ms} ms CPU per message"
    return f"random 0-{ms} ms wait per message"


SCENARIOS: Mapping[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "trivial", "none", 100_000, (8,), (100,), ("key",),
            shows="control-plane overhead vs a raw consume loop",
        ),
        Scenario(
            "sleep", "sleep", 20_000, (8,), (100,), ("key",), work_ms=5.0,
            shows="blocking I/O: bound is keys / latency",
        ),
        Scenario(
            "io", "io", 20_000, (8,), (100,), ("key",), work_ms=5.0,
            shows="real loopback network I/O: bound is keys / latency",
        ),
        Scenario(
            "cpu", "cpu", 20_000, (8,), (100,), ("key",), cpu_iterations=500,
            shows="CPU-bound: process engine vs cores",
        ),
        Scenario(
            "scaling", "busy", 10_000, (1, 2, 4, 8, 15), (100,), ("partition",), work_ms=1.0,
            shows="partition / worker scaling efficiency",
        ),
        Scenario(
            "keys", "random", 10_000, (1,), (1, 10, 100, 10_000), ORDERINGS, work_ms=5.0,
            shows="ordering mode vs key count",
        ),
        Scenario(
            "members", "busy", 10_000, (8,), (1,), ("partition",), work_ms=1.0,
            shows="seed 001: 1/2/4/8 members (processes, one group) and process-engine "
            "workers: per-member load, scaling, efficiency, delivery",
        ),
    )
}  # fmt: skip
MEMBERS = "members"
"""The scenario run by :mod:`laneway.bench.members.scenario` (members and workers, not engines)."""


SHARE_SCENARIO = "share"
"""The share-group scenario (Kafka only; :mod:`laneway.bench.share.scenario`): members of a share
group against a classic consumer group, and the share source against a bare loop. It is
not expanded into engine runs, and runs only when named in ``--scenarios``."""

SKEW_SCENARIO = "skew"
"""Hot keys contained and tenants served in turn (:mod:`laneway.bench.skew.scenario`): its
own tables, not engine rows; run only when named."""

LOAD_SCENARIOS: Mapping[str, str] = {
    "spike": "N requests produced at once while the consumers run, a real PostgreSQL "
    "transaction each (seed 004): sell-out time and produce -> done latency per topology",
    "paced": "a fixed produce rate while consuming, optionally with the database slowed: "
    "latency percentiles under steady load per topology",
}
"""Open-loop scenarios on Kafka and PostgreSQL (:mod:`laneway.bench.load.bench`): run by
topology (``--topologies``), not by engine, and only when asked for by name."""

ALL_SCENARIOS = (*SCENARIOS, SHARE_SCENARIO, SKEW_SCENARIO, *LOAD_SCENARIOS)
"""Every scenario ``--scenarios`` accepts."""

SPIKE_REQUESTS = 1_000
"""Requests of a spike (``--messages``): seed 004's 1,000 at once."""
PACED_RATE = 500.0
"""Requests a second of the paced scenario (``--rate``): within what every default
topology handles on the 2-core reference machine, so latency shows each one's overhead."""
PACED_DURATION = 10.0
"""Seconds the paced scenario produces for (``--duration``)."""
LOAD_PARTITIONS = 8
"""Partitions of the spike and paced topics, as in seed 004."""
LOAD_POOL = 16
"""Most database connections per consumer process (``--pool``)."""


@dataclass(frozen=True)
class Overrides:
    """Command-line values that replace every selected scenario's own (``None``: keep)."""

    messages: int | None = None
    partitions: tuple[int, ...] | None = None
    keys: tuple[int, ...] | None = None
    spreads: tuple[str, ...] | None = None
    orderings: tuple[str, ...] | None = None
    work_ms: tuple[float, ...] | None = None
    """One value, or a grid of values each run in turn."""
    cpu_iterations: int | None = None
    concurrency: int | None = None

    @property
    def single_work_ms(self) -> float | None:
        """``--work-ms`` for the scenarios that take one value (members, share; the command
        refuses a grid for them); None when not given."""
        return None if self.work_ms is None else self.work_ms[0]

    def apply(self, scenario: Scenario) -> Scenario:
        grid = self.work_ms or ()
        return replace(
            scenario,
            messages=self.messages or scenario.messages,
            partitions=self.partitions or scenario.partitions,
            keys=self.keys or scenario.keys,
            spreads=self.spreads or scenario.spreads,
            orderings=self.orderings or scenario.orderings,
            work_ms=grid[0] if grid else scenario.work_ms,
            work_grid=grid if len(grid) > 1 else (),
            cpu_iterations=self.cpu_iterations or scenario.cpu_iterations,
        )


@dataclass(frozen=True)
class Variant:
    """One partition count x key count x key spread x ordering (x work, with a grid)
    combination of a scenario."""

    partitions: int
    keys: int
    ordering: str
    spread: str = UNIFORM
    work_ms: float | None = None
    """The variant's work when the scenario has a grid of values (None: the scenario's)."""

    @property
    def label(self) -> str:
        """E.g. ``p8 k100 key``, ``p8 k100 zipf key``, ``p8 k100 key 10ms``."""
        spread = " zipf" if self.spread == ZIPF else ""
        work = "" if self.work_ms is None else f" {self.work_ms:g}ms"
        return f"p{self.partitions} k{self.keys}{spread} {self.ordering}{work}"


@dataclass(frozen=True)
class RunSpec:
    """Everything one measured run needs: the scenario, the variant, the engine and its pool."""

    scenario: Scenario
    variant: Variant
    engine: str
    concurrency: int
    repeat: int
    instrument: str = ""
    """``metrics``, ``otel-metrics`` or ``tracing`` for an instrumented twin of the run."""

    @property
    def label(self) -> str:
        """The engine as rows name it: ``async``, or ``async+metrics`` for a twin."""
        return f"{self.engine}+{self.instrument}" if self.instrument else self.engine

    @property
    def name(self) -> str:
        """A file-name-safe identifier, e.g. ``keys-p1-k10-key-async-1``."""
        variant = self.variant.label.replace(" ", "-")
        return f"{self.scenario.name}-{variant}-{self.label}-{self.repeat}"


def variants(scenario: Scenario) -> list[Variant]:
    """Every partitions x keys x spread x ordering (x work) combination, in the scenario's
    list order."""
    grid: tuple[float | None, ...] = scenario.work_grid or (None,)
    combos = itertools.product(
        grid, scenario.partitions, scenario.keys, scenario.spreads, scenario.orderings
    )
    return [Variant(p, k, o, spread, work) for work, p, k, spread, o in combos]


def with_work_of(scenario: Scenario, variant: Variant) -> Scenario:
    """The scenario as one variant runs it: its grid value as ``work_ms``."""
    if variant.work_ms is None:
        return scenario
    return replace(scenario, work_ms=variant.work_ms, work_grid=())


def concurrency_for(engine: str, override: int | None) -> int:
    """Pool size per engine: 1 for the client loops and baseline, one process per core,
    else 128 or ``override``."""
    if engine in (*CLIENT_LOOPS, "baseline"):
        return 1
    if engine == "process":
        return os.cpu_count() or 1
    return override or DEFAULT_CONCURRENCY


def plan(
    names: Sequence[str],
    engines: Sequence[str],
    overrides: Overrides,
    repeat: int,
    instruments: Sequence[str] = (),
) -> list[RunSpec]:
    """The runs in execution order: per scenario, per variant, per repetition, per engine
    (each followed by its instrumented twins, see :mod:`laneway.bench.engines.instrumentation`)."""
    ordered_engines = [e for e in ENGINES if e in engines]
    runs: list[RunSpec] = []
    for name in names:
        if name in (MEMBERS, SHARE_SCENARIO, SKEW_SCENARIO):
            continue  # laneway.bench.members.scenario and laneway.bench.share.scenario run these
        grid = overrides.apply(SCENARIOS[name])
        for variant in variants(grid):
            scenario = with_work_of(grid, variant)
            for rep in range(1, repeat + 1):
                for engine in ordered_engines:
                    pool = concurrency_for(engine, overrides.concurrency)
                    runs.append(RunSpec(scenario, variant, engine, pool, rep))
                    for twin in instrumented(engine, instruments):
                        if twin in STATEFUL and variant.ordering == "unordered":
                            continue  # a store needs each key's messages one at a time
                        runs.append(RunSpec(scenario, variant, engine, pool, rep, twin))
    return runs
