"""The ``skew`` bench scenario: hot keys contained, and a quiet tenant beside a flood.

``laneway bench --scenarios skew`` (on the embedded log, or on Kafka with
``--bootstrap-servers``) runs :mod:`laneway.bench.skew.hot_keys` and
:mod:`laneway.bench.skew.tenants` and prints one table each with its goal; ``--json``
keeps every figure under ``skew``. It takes two to four minutes.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from laneway.bench.engines.targets import Target
from laneway.bench.skew.hot_keys import HotKeySettings, run_hot_keys
from laneway.bench.skew.tenants import TenantSettings, run_tenants


def run_skew(
    target: Target,
    console: Console,
    hot: HotKeySettings | None = None,
    tenants: TenantSettings | None = None,
) -> dict[str, Any]:
    """Both measurements, printed; the JSON document (``valid``: nothing lost or out of
    order)."""
    contained = run_hot_keys(target, hot or HotKeySettings())
    _print_hot_keys(console, contained, target.kind)
    served = run_tenants(target, tenants or TenantSettings())
    _print_tenants(console, served, target.kind)
    return {
        "hot_keys": contained,
        "tenants": served,
        "valid": bool(contained["valid"] and served["valid"]),
    }


def _print_hot_keys(console: Console, report: dict[str, Any], kind: str) -> None:
    s = report["settings"]
    table = Table(
        title=f"skew: Zipf keys (s={s['exponent']}, {s['keys']:,} keys, {s['messages']:,} "
        f"messages, {s['work_ms']:g} ms each) on the {kind} log, max_buffered="
        f"{s['max_buffered']:,}"
    )
    for column in (
        "run", "cold msgs", "cold msg/s", "all msg/s", "hottest key s", "its bound s",
        "peak buffered kB", "held off", "lost", "dup", "order",
    ):  # fmt: skip
        table.add_column(column, justify="left" if column == "run" else "right")
    for row in report["rows"]:
        table.add_row(
            row["run"],
            f"{row['cold_messages']:,}",
            f"{row['cold_tps']:,.0f}",
            f"{row['all_tps']:,.0f}",
            f"{row['hot_seconds']:.2f}" if row["hot_seconds"] else "-",
            f"{row['hot_bound_seconds']:.2f}" if row["hot_bound_seconds"] else "-",
            f"{row['peak_buffered_bytes'] / 1e3:,.0f}",
            f"{row['held_off']:,}",
            str(row["lost"]),
            str(row["duplicates"]),
            "PASS" if row["order_ok"] else "FAIL",
        )
    console.print(table)
    console.print(
        f"cold keys contained: {report['contained_ratio']:.2f}x of their throughput without "
        f"the hot keys (goal >= {report['goal']:g}); uncontained: "
        f"{report['uncontained_ratio']:.2f}x",
        highlight=False,
    )


def _print_tenants(console: Console, report: dict[str, Any], kind: str) -> None:
    s = report["settings"]
    table = Table(
        title=f"skew: tenant B at {s['quiet_rate']:g}/s, tenant A flooding at "
        f"{s['flood_factor']:g}x that, {s['work_ms']:g} ms each, {s['seconds']:g} s on the "
        f"{kind} log"
    )
    for column in ("run", "B msgs", "A msgs", "B p50 ms", "B p99 ms", "A p99 ms", "order"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for row in report["rows"]:
        table.add_row(
            row["run"],
            f"{row['quiet_messages']:,}",
            f"{row['flood_messages']:,}",
            f"{row['quiet_p50_ms']:,.1f}",
            f"{row['quiet_p99_ms']:,.1f}",
            f"{row['flood_p99_ms']:,.1f}" if row["flood_messages"] else "-",
            "PASS" if row["order_ok"] and not row["lost"] else "FAIL",
        )
    console.print(table)
    console.print(
        f"B's p99 beside the flood: {report['fair_ratio']:.2f}x of alone with fairness (goal "
        f"<= {report['goal']:g}), {report['fifo_ratio']:.2f}x in fetch order",
        highlight=False,
    )
