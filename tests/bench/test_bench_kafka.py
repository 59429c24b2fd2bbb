"""`laneway bench --bootstrap-servers`: one small run against the real Kafka broker."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient
from kafka_helpers import read_records

from laneway.bench.engines.pipelines import output_topic
from laneway.bench.engines.raw import consumer_settings
from laneway.bench.engines.targets import KafkaTarget, backlog
from laneway.cli import main
from laneway.sources.kafka.client_config import DEFAULTS


@pytest.mark.kafka
def test_trivial_on_kafka_keeps_order_and_loses_nothing(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    json_path = tmp_path / "kafka.json"
    prefix = f"team-a-{uuid.uuid4().hex[:6]}"
    args = [
        "bench",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--scenarios",
        "trivial",
        "--messages",
        "2000",
        "--engines",
        "ceiling,raw,baseline,async",
        "--timeout",
        "120",
        "--json",
        str(json_path),
        "--topic-prefix",
        prefix,
    ]
    before = set(AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics().topics)
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(json_path.read_text())
    assert doc["settings"]["target"] == {
        "kind": "kafka",
        "bootstrap_servers": kafka_bootstrap,
        "topic_prefix": prefix,
    }
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for _ in range(50):  # the group listing lags behind a group's first commit
        groups = [g.group_id for g in admin.list_consumer_groups().result(timeout=10).valid]
        if any(g.startswith(f"{prefix}-group-") for g in groups):
            break
        time.sleep(0.2)
    assert any(g.startswith(f"{prefix}-group-") for g in groups), "groups carry the prefix"
    after = set(AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics().topics)
    assert not [t for t in after - before if t.startswith(prefix)], "run topics are deleted"
    rows = {row["engine"]: row for row in doc["rows"]}
    assert set(rows) == {"ceiling", "raw", "baseline", "async"}
    for engine, row in rows.items():
        assert row["status"] == "OK", engine
        assert row["messages"] == 2000, engine
        # the ceiling loop only counts: 2,000 read, and no order to check
        assert row["ordering_check"] == ("n/a" if engine == "ceiling" else "PASS"), engine
        assert row["lost"] == 0 and row["duplicates"] == 0, engine
        assert row["tps"] > 0, engine
        # the group join happens before the first fetch: start-up, not runtime
        assert row["startup_s"] > 0, engine
    assert "on the kafka log at" in result.stdout
    assert "trivial: no work per message" in result.stdout


@pytest.mark.kafka
def test_the_raw_results_loop_writes_every_message_it_reads(kafka_bootstrap: str) -> None:
    """The ``raw+results`` twin's bare client loop: every message read is written to the
    output topic, and the loop ends only once all writes are acknowledged."""
    target = KafkaTarget(kafka_bootstrap)
    prepared = target.prepare("rawout", partitions=4, messages=3000, keys=30)
    out = output_topic(prepared.topic)
    try:
        target.create_output(prepared, out)
        result = target.raw_loop(prepared, prepared.produced, out).run()
        assert not result.timed_out
        assert len(result.records) == 3000
        written = read_records(kafka_bootstrap, out, 3000)
        assert sorted((r.key, r.value) for r in written) == sorted(backlog(3000, 30))
    finally:
        target.cleanup(prepared)


def test_unreachable_broker_is_a_clear_error() -> None:
    args = ["bench", "--bootstrap-servers", "127.0.0.1:1", "--scenarios", "trivial"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "no Kafka broker answers at 127.0.0.1:1" in result.output


@pytest.mark.kafka
def test_members_share_one_group_and_deliver_everything(kafka_bootstrap: str) -> None:
    from laneway.bench.members import scenario as members

    lines: list[str] = []
    report = members.measure(
        kafka_bootstrap, f"members-{uuid.uuid4().hex[:6]}", counts=(1, 2), messages=400,
        work_ms=0.2, say=lines.append,
    )  # fmt: skip
    assert [row.count for row in report.members] == [1, 2]
    assert [row.count for row in report.workers] == [1, 2]
    for row in report.members + report.workers:
        assert row.error is None, row.error
        assert (row.distinct, row.handled) == (400, 400)
        assert len(row.loads) == row.count and sum(row.loads) == 400
    # 8 partitions, the same number of messages in each: the 2 members split them evenly.
    assert report.members[1].loads == [200, 200]
    assert report.members[0].scaling == 1.0 and report.members[1].scaling > 0
    assert report.bare_1 > 0 and report.bare_2 > 0


def test_the_bare_loop_fetches_as_laneway_does() -> None:
    # With librdkafka's 1 s fetch.queue.backoff.ms the bare loop starved and read below
    # laneway's own sync engine: a ceiling that laneway could pass.
    settings = consumer_settings("127.0.0.1:9092", "g")
    for key, value in DEFAULTS.items():
        assert settings[key] == value, key
    assert int(str(settings["fetch.queue.backoff.ms"])) < 1000  # librdkafka: 1000
    assert settings["enable.auto.commit"] is False
