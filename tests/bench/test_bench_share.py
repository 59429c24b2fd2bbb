"""`laneway bench --scenarios share`: the share-group scenario end to end, tiny, on the
real Kafka broker (share groups need Kafka >= 4.2 with share.version=1, as scripts/kafka
runs it)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient

from laneway.cli import main


@pytest.mark.kafka
def test_share_scenario_reports_every_row_and_loses_nothing(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    json_path = tmp_path / "share.json"
    prefix = f"share-bench-{uuid.uuid4().hex[:6]}"
    args = [
        "bench",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--scenarios",
        "share",
        "--messages",
        "240",
        "--work-ms",
        "1",
        "--json",
        str(json_path),
        "--topic-prefix",
        prefix,
    ]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(json_path.read_text())
    assert doc["rows"] == [], "the share scenario expands into no engine runs"
    share = doc["share"]
    assert share["settings"]["messages"] == 240
    assert share["settings"]["trivial_messages"] == 240
    assert share["settings"]["work_ms"] == 1
    assert share["valid"] is True
    members = {(row["kind"], row["members"]): row for row in share["members"]}
    assert set(members) == {(kind, n) for kind in ("share", "classic") for n in (1, 4, 12)}
    for (kind, count), row in members.items():
        where = f"{kind} x {count}"
        assert row["messages"] == 240, where
        assert row["lost"] == 0 and row["duplicates"] == 0, where
        assert row["runtime_s"] > 0 and row["tps"] > 0, where
    # a classic group gives a member at most one of the 8 partitions' worth of work
    assert members[("classic", 12)]["active"] == 8
    assert members[("share", 1)]["active"] == 1
    loops = [row["loop"] for row in share["trivial"]]
    assert loops == ["bare ShareConsumer loop", "KafkaShareSource, sync engine"]
    for row in share["trivial"]:
        assert row["messages"] == row["expected"] == 240, row["loop"]
        assert len(row["tps_runs"]) == share["settings"]["trivial_rounds"], row["loop"]
        assert row["tps"] == max(row["tps_runs"]), row["loop"]
    assert share["source_vs_bare"] > 0 and share["members_12_speedup"] > 0
    assert "vs classic" in result.stdout
    assert "of the bare loop" in result.stdout
    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics().topics
    assert not [t for t in topics if t.startswith(prefix)], "run topics are deleted"


def test_share_scenario_without_a_broker_is_a_clear_error() -> None:
    result = CliRunner().invoke(main, ["bench", "--scenarios", "share"])
    assert result.exit_code == 1
    assert "the share scenario needs a Kafka broker" in result.output
    assert "--bootstrap-servers" in result.output
