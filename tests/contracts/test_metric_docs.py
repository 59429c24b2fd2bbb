"""The metrics page and the Grafana dashboard stay in step with laneway/metrics.py."""

from __future__ import annotations

import json
import re

from checkout import ROOT

from laneway.metrics import DEFINITIONS, MetricKind, table


def test_the_metrics_page_holds_the_generated_table() -> None:
    page = (ROOT / "docs" / "reference" / "metrics.md").read_text()
    generated = page.split("<!-- generated: metrics table -->\n", 1)[1]
    assert generated.split("\n<!-- end: metrics table -->", 1)[0] == table()


def test_the_dashboard_queries_only_defined_metrics_and_shows_every_kind_of_signal() -> None:
    dashboard = json.loads((ROOT / "dashboards" / "laneway.json").read_text())
    names = set()
    for metric, spec in DEFINITIONS.items():
        if spec.kind is MetricKind.HISTOGRAM:
            names |= {f"{metric.value}_bucket", f"{metric.value}_sum", f"{metric.value}_count"}
        else:
            names.add(metric.value)
    used = set()
    for panel in dashboard["panels"]:
        assert panel["title"] and panel["description"]
        for target in panel["targets"]:
            used |= set(re.findall(r"laneway_[a-z_]+", target["expr"]))
    assert used <= names, used - names
    for needed in ("laneway_consumer_lag", "laneway_oldest_unfinished_seconds",
                   "laneway_end_to_end_latency_seconds_bucket", "laneway_in_flight",
                   "laneway_buffered", "laneway_messages_processed_total"):  # fmt: skip
        assert needed in used
