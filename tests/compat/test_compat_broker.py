"""The broker of the compatibility suite is what `scripts/kafka start --version V --defaults`
promises: that release, with Kafka's own server defaults (the settings our other test brokers
change, unchanged here)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from conftest import CompatBroker
from kafka_helpers import run_kafka_script

pytestmark = pytest.mark.compat


def test_the_broker_runs_kafkas_defaults(compat_broker: CompatBroker) -> None:
    assert compat_broker.defaults
    admin = AdminClient({"bootstrap.servers": compat_broker.bootstrap})
    broker = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([broker])[broker].result(30)
    values = {name: configs[name].value for name in (
        "auto.create.topics.enable", "num.partitions", "group.initial.rebalance.delay.ms",
        "offsets.topic.num.partitions",
    )}  # fmt: skip
    assert values == {
        "auto.create.topics.enable": "true",
        "num.partitions": "1",
        "group.initial.rebalance.delay.ms": "3000",
        "offsets.topic.num.partitions": "50",
    }


def test_scripts_kafka_names_this_broker_by_its_version(compat_broker: CompatBroker) -> None:
    found = run_kafka_script(
        "status", timeout_s=30.0, arguments=("--version", compat_broker.version, "--defaults")
    )
    assert (found.returncode, found.stdout.strip()) == (0, compat_broker.bootstrap)
