"""`laneway bench --bootstrap-servers`: one small run against the real Kafka broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from laneway.cli import main


@pytest.mark.kafka
def test_trivial_on_kafka_keeps_order_and_loses_nothing(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    json_path = tmp_path / "kafka.json"
    args = [
        "bench",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--scenarios",
        "trivial",
        "--messages",
        "2000",
        "--engines",
        "raw,baseline,async",
        "--timeout",
        "120",
        "--json",
        str(json_path),
    ]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(json_path.read_text())
    assert doc["settings"]["target"] == {"kind": "kafka", "bootstrap_servers": kafka_bootstrap}
    rows = {row["engine"]: row for row in doc["rows"]}
    assert set(rows) == {"raw", "baseline", "async"}
    for engine, row in rows.items():
        assert row["status"] == "OK", engine
        assert row["messages"] == 2000, engine
        assert row["ordering_check"] == "PASS", engine
        assert row["lost"] == 0 and row["duplicates"] == 0, engine
        assert row["tps"] > 0, engine
        # the group join happens before the first fetch: start-up, not runtime
        assert row["startup_s"] > 0, engine
    assert "on the kafka log at" in result.stdout
    assert "trivial: no work per message" in result.stdout


def test_unreachable_broker_is_a_clear_error() -> None:
    args = ["bench", "--bootstrap-servers", "127.0.0.1:1", "--scenarios", "trivial"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "no Kafka broker answers at 127.0.0.1:1" in result.output
