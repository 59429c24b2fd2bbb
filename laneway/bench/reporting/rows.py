"""Result rows of a benchmark and the ``--json`` document.

JSON schema (``schema`` = 1), one top-level object:

``machine``
    ``cores`` (logical), ``physical_cores``, ``cpu``, ``memory_gb``, ``load_1m`` (when the
    file was written), ``python``, ``implementation``, ``platform``, ``laneway``,
    ``confluent_kafka``, ``librdkafka``, ``uvloop`` (``null`` when not installed).
``settings``
    ``target`` (``{"kind": "embedded"}`` or ``{"kind": "kafka", "bootstrap_servers": ...}``),
    ``scenarios``, ``engines``, ``event_loop`` (the async engine's loop), ``repeat``,
    ``timeout_s``, ``profile``, ``overrides`` (the command-line values, ``null`` when not
    given), ``started_at`` (UTC, ISO 8601), ``argv``.
``rows``
    One object per (scenario, variant, engine), repetitions merged (the median-throughput
    repetition's figures; correctness is the worst seen):

    ==================== =========================================================
    ``scenario``         scenario name (``trivial``, ``sleep``, ``io``, ``cpu``, ...)
    ``variant``          ``"p<partitions> k<keys> <ordering>"``
    ``engine``           ``raw``, ``baseline``, ``thread``, ``async`` or ``process``;
                         ``<engine>+metrics`` / ``+tracing`` for instrumented twins
    ``tps``              messages handled per second over ``runtime_s``
    ``tps_runs``         ``tps`` of every repetition
    ``runtime_s``        first fetch -> final commit (raw: first -> last message)
    ``ratio_to_raw``     ``tps`` / raw ``tps`` of the same variant (``null``: no raw row)
    ``ratio_to_baseline`` ``tps`` / baseline ``tps`` of the same variant (or ``null``)
    ``messages``         messages produced; ``handled``, ``distinct``, ``lost``,
                         ``duplicates`` as in :mod:`laneway.bench.engines.analysis`
    ``ordering_check``   ``PASS``, ``FAIL`` or ``n/a``; ``ordering_violation`` the first
                         violation found (or ``null``)
    ``latency_ms``       ``avg``, ``p50``, ``p95``, ``p99``, ``max`` (produce -> done)
    ``latency_cdf``      ``[[percentile, ms], ...]``
    ``handler_ms_avg``   mean handler time (start -> end)
    ``startup_s``        ``run()`` call -> first handler start (not in ``runtime_s``)
    ``wall_s``           the whole ``run()`` call; ``produce_s`` producing the backlog
    ``ceiling_tps``      msg/s of the bare work run the way this engine runs it, without
                         laneway, in the same run (see :mod:`laneway.bench.engines.ceilings`;
                         ``null`` for scenarios not bound by their work or with
                         ``--no-ceilings``); ``ceiling_how`` says how (``"2 processes"``)
    ``ratio_to_ceiling`` ``tps`` / ``ceiling_tps`` (or ``null``)
    ``other_cpu``        share of all cores that *other* processes used during the run
                         (0 on an idle machine; more makes every figure lower and noisier)
    ``status``           ``OK``, ``TIMEOUT`` or ``ERROR`` (``error`` says why)
    others               ``partitions``, ``keys``, ``key_spread`` (``uniform`` or
                         ``zipf``), ``ordering``, ``concurrency``,
                         ``work``, ``work_ms``, ``cpu_iterations``, ``target``,
                         ``commits``, ``repeats``, ``profiles``
    ==================== =========================================================
``recommendations``
    ``[{"scenario", "headline", "engine", "ratio_to_baseline", "text"}, ...]``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import confluent_kafka
import psutil

import laneway
from laneway import compiled
from laneway.bench.engines.analysis import FAIL, check, counted, latency
from laneway.bench.engines.ceilings import Limits
from laneway.bench.engines.harness import ERROR, OK, TIMEOUT, Measurement

Row = dict[str, Any]
SCHEMA = 1
_STATUS_RANK = {OK: 0, TIMEOUT: 1, ERROR: 2}


def measure_row(m: Measurement, target: str) -> Row:
    """Analyse one run into a row (ratios are filled in by :func:`merge_rows`)."""
    spec, scenario, variant = m.spec, m.spec.scenario, m.spec.variant
    correct = (
        check(m.records, m.produced, variant.ordering)
        if m.counted is None
        else counted(m.counted, m.produced)
    )
    lat = latency(m.records)
    tps = correct.distinct / m.elapsed if m.elapsed > 0 else 0.0
    return {
        "scenario": scenario.name,
        "variant": variant.label,
        "engine": spec.label,
        "target": target,
        "partitions": variant.partitions,
        "keys": variant.keys,
        "key_spread": variant.spread,
        "ordering": variant.ordering,
        "concurrency": spec.concurrency,
        "work": scenario.work,
        "work_ms": scenario.work_ms,
        "cpu_iterations": scenario.cpu_iterations,
        "status": m.status,
        "error": m.error,
        "messages": m.produced,
        "handled": correct.handled,
        "distinct": correct.distinct,
        "lost": correct.lost,
        "duplicates": correct.duplicates,
        "ordering_check": correct.ordering if m.status != ERROR else FAIL,
        "ordering_violation": correct.violation,
        "runtime_s": m.elapsed,
        "tps": tps,
        "tps_runs": [tps],
        "ratio_to_raw": None,
        "ratio_to_baseline": None,
        "latency_ms": None
        if lat is None
        else {"avg": lat.avg_ms, "p50": lat.p50_ms, "p95": lat.p95_ms, "p99": lat.p99_ms,
              "max": lat.max_ms},
        "latency_cdf": [] if lat is None else [list(point) for point in lat.cdf],
        "handler_ms_avg": None if lat is None else lat.handler_avg_ms,
        "startup_s": m.startup,
        "wall_s": m.wall,
        "produce_s": m.produce_s,
        "commits": m.commits,
        "repeats": 1,
        "profiles": list(m.profiles),
        "other_cpu": m.other_cpu,
        "ceiling_tps": None,
        "ceiling_how": None,
        "ratio_to_ceiling": None,
    }  # fmt: skip


def merge_rows(rows: Sequence[Row]) -> list[Row]:
    """One row per (scenario, variant, engine): the median-tps repetition, worst correctness.

    Then fills ``ratio_to_raw`` / ``ratio_to_baseline`` of finished (OK) rows from the same
    variant's rows.
    """
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row["scenario"], row["variant"], row["engine"]), []).append(row)
    merged: list[Row] = []
    for reps in groups.values():
        ranked = sorted(reps, key=lambda r: r["tps"])
        row = dict(ranked[(len(ranked) - 1) // 2])
        row["tps_runs"] = [r["tps"] for r in reps]
        row["repeats"] = len(reps)
        row["status"] = max((r["status"] for r in reps), key=_STATUS_RANK.__getitem__)
        row["lost"] = max(r["lost"] for r in reps)
        row["duplicates"] = max(r["duplicates"] for r in reps)
        if any(r["ordering_check"] == FAIL for r in reps):
            row["ordering_check"] = FAIL
        row["profiles"] = [p for r in reps for p in r["profiles"]]
        merged.append(row)
    by_variant = {(r["scenario"], r["variant"], r["engine"]): r for r in merged}
    for row in merged:
        if row["status"] != OK:
            continue
        for reference, key in (("raw", "ratio_to_raw"), ("baseline", "ratio_to_baseline")):
            base = by_variant.get((row["scenario"], row["variant"], reference))
            if base is not None and base["status"] == OK and base["tps"] > 0:
                row[key] = row["tps"] / base["tps"]
    return merged


def attach_ceilings(rows: Sequence[Row], limits: Limits) -> None:
    """Fill ``ceiling_tps``, ``ceiling_how`` and ``ratio_to_ceiling`` of merged rows."""
    for row in rows:
        ceiling = limits.get((row["scenario"], row["variant"]), {}).get(row["engine"])
        if ceiling is None or ceiling.tps <= 0:
            continue
        row["ceiling_tps"] = ceiling.tps
        row["ceiling_how"] = ceiling.how
        if row["status"] == OK:
            row["ratio_to_ceiling"] = row["tps"] / ceiling.tps


def is_valid(row: Row) -> bool:
    """A row whose figures can be trusted: finished, nothing lost or doubled, order kept."""
    return bool(
        row["status"] == OK
        and row["lost"] == 0
        and row["duplicates"] == 0
        and row["ordering_check"] != FAIL
        and row["tps"] > 0
    )


def machine() -> dict[str, Any]:
    """The machine and software versions the figures were measured with."""
    return {
        "cores": os.cpu_count(),
        "load_1m": os.getloadavg()[0],
        "physical_cores": psutil.cpu_count(logical=False),
        "cpu": _cpu_model(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "laneway": laneway.__version__,
        "laneway_compiled": compiled.active(),
        "confluent_kafka": _version_of("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "uvloop": _version_of("uvloop"),
    }


def machine_line() -> str:
    """The hardware line every report starts with: figures mean little without it, e.g.
    ``machine: 2 cores (2 physical, Intel(R) Xeon(R) ...), 23.5 GiB, load 0.41; CPython
    3.11.9 on Linux-...; laneway 0.9.0 (compiled), confluent-kafka 2.16.1 (librdkafka
    2.16.0)``, where *compiled* or *Python source* says which code of laneway's per-message
    path ran (see :mod:`laneway.compiled`)."""
    m = machine()
    loop = f", uvloop {m['uvloop']}" if m.get("uvloop") else ""
    code = "compiled" if m["laneway_compiled"] else "Python source"
    return (
        f"machine: {m['cores']} cores ({m['physical_cores']} physical, {m['cpu']}), "
        f"{m['memory_gb']} GiB, load {m['load_1m']:.2f}; {m['implementation']} "
        f"{m['python']} on {m['platform']}; laneway {m['laneway']} ({code}), confluent-kafka "
        f"{m['confluent_kafka']} (librdkafka {m['librdkafka']}){loop}"
    )


def _version_of(package: str) -> str | None:
    """The installed version of an optional package, or None."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def document(
    rows: list[Row], settings: dict[str, Any], recommendations: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "machine": machine(),
        "settings": settings,
        "rows": rows,
        "recommendations": recommendations,
    }


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def read_json(path: Path) -> dict[str, Any]:
    """A document written by ``--json``; ValueError when it is not one."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: cannot read a benchmark JSON file: {error}") from error
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise ValueError(f"{path}: not a laneway bench JSON file (no 'rows' list)")
    rows: list[Any] = doc["rows"]
    for row in rows:
        if not isinstance(row, dict) or not {"scenario", "engine", "tps"} <= row.keys():
            raise ValueError(f"{path}: a row lacks 'scenario', 'engine' or 'tps': {row!r}")
    return doc
