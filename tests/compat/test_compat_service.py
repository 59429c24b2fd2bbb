"""``laneway run``, the operator's commands and exactly-once on the broker as it comes: a
member killed with -9 and started again loses nothing; ``lag``, ``top`` and ``status`` read
the group; results are written exactly once; share groups where the broker serves them."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import service_app
from conftest import CompatBroker
from kafka_helpers import committed_to_end, create_topic, produce, read_records, unique_name
from ops_cli import laneway as laneway_cli
from service_runs import SUPPORT, Service, free_port, wait_until

import laneway
from laneway.errors import SourceError

pytestmark = pytest.mark.compat

RECORDS = 2_000


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    records = tmp_path / "records"
    records.mkdir()
    running = Service(
        tmp_path, "service_app:handle", [SUPPORT], {"SERVICE_RECORD_DIR": str(records)}
    )
    yield running
    running.close()


def test_a_member_killed_and_started_again_loses_nothing_and_the_tools_read_the_group(
    compat_broker: CompatBroker, service: Service, tmp_path: Path
) -> None:
    bootstrap = compat_broker.bootstrap
    topic, group = unique_name("compat-run"), unique_name("compat-run")
    create_topic(bootstrap, topic, 4)
    produce(bootstrap, topic, [(b"k%d" % (i % 50), b"v") for i in range(RECORDS)])
    records = tmp_path / "records"
    arguments = ("--bootstrap-servers", bootstrap, "--group", group, "--topic", topic,
                 "--engine", "thread")  # fmt: skip
    first = service.start(*arguments, env={"SERVICE_WORK_MS": "5"})
    wait_until(lambda: len(service_app.records(records)) >= 300, 60, "the first member to work")
    service.kill(first)
    health = free_port()
    second = service.start(*arguments, "--health-port", str(health))
    # The killed member's partitions move once its session ends (45 s by Kafka's default).
    wait_until(lambda: committed_to_end(bootstrap, group, topic, RECORDS), 150, "everything")
    handled = {(partition, offset) for _, partition, offset in service_app.records(records)}
    assert len(handled) == RECORDS  # each record at least once, across both lives

    lag = laneway_cli("lag", "--bootstrap-servers", bootstrap, "--group", group, "--json",
                      cwd=tmp_path)  # fmt: skip
    assert lag.returncode == 0, lag.stderr
    assert (json.loads(lag.stdout)["lag"], json.loads(lag.stdout)["backlog"]) == (0, 0)
    top = laneway_cli("top", "--bootstrap-servers", bootstrap, "--group", group, "--once",
                      cwd=tmp_path)  # fmt: skip
    assert top.returncode == 0 and topic in top.stdout, top.stdout + top.stderr
    status = laneway_cli("status", "--bootstrap-servers", bootstrap, "--group", group,
                         "--member", f"127.0.0.1:{health}", "--json", cwd=tmp_path)  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert topic in status.stdout

    second.send_signal(signal.SIGTERM)
    output, _ = second.communicate(timeout=60)
    assert second.returncode == 0, output


def echo(message: laneway.Message) -> laneway.Produce:
    return laneway.Produce(f"{message.topic}.out", message.value, key=message.key)


def test_results_are_written_exactly_once_across_two_runs(compat_broker: CompatBroker) -> None:
    bootstrap = compat_broker.bootstrap
    topic, group = unique_name("compat-eos"), unique_name("compat-eos")
    create_topic(bootstrap, topic, 2)
    create_topic(bootstrap, f"{topic}.out", 2)
    produce(bootstrap, topic, [(b"k%d" % (i % 10), b"%d" % i) for i in range(200)])
    for _ in range(2):  # the second run goes on from the first's transactions
        source = laneway.KafkaSource(bootstrap, group, [topic])
        consumer = laneway.Consumer(source, echo, exactly_once=True, handle_signals=False)
        assert consumer.run(max_messages=100).processed == 100
    out = read_records(bootstrap, f"{topic}.out", 200)
    assert sorted(int(record.value or b"0") for record in out) == list(range(200))


def test_a_share_group_reads_every_record_where_the_broker_serves_them(
    compat_broker: CompatBroker,
) -> None:
    bootstrap = compat_broker.bootstrap
    topic, group = unique_name("compat-share"), unique_name("compat-share")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, [(b"k%d" % i, b"v") for i in range(50)])
    source = laneway.KafkaShareSource(bootstrap_servers=bootstrap, group=group, topics=[topic])
    consumer = laneway.Consumer(source, lambda m: None, ordering="unordered", handle_signals=False)
    if not compat_broker.has_share_groups:
        with pytest.raises(SourceError, match=r"does not serve share groups.*KafkaSource"):
            consumer.run(max_messages=50)
        return
    done: list[laneway.ConsumerStats] = []
    runner = threading.Thread(target=lambda: done.append(consumer.run(max_messages=50)))
    runner.start()
    runner.join(90)
    if runner.is_alive():
        consumer.stop()
        runner.join(30)
        pytest.fail(f"the share group read {consumer.stats().processed} of 50 in 90 s")
    assert done[0].processed == 50
