"""Session-wide pytest fixtures shared by laneway's tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator

import pytest
from kafka_helpers import run_kafka_script
from topics import EmbeddedTopic, KafkaTopic, LogTopic

BOOTSTRAP_ENV = "LANEWAY_KAFKA_BOOTSTRAP"
# The first start in a fresh clone downloads the broker jars with Maven.
START_TIMEOUT_S = 900.0


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap address of a real single-node Kafka broker on 127.0.0.1.

    Uses LANEWAY_KAFKA_BOOTSTRAP when it is set (the broker belongs to whoever set it). Otherwise
    reuses the broker that scripts/kafka already runs for this checkout, or starts one and stops
    it when the test session ends.
    """
    preset = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if preset:
        yield preset
        return
    status = run_kafka_script("status", timeout_s=30.0)
    if status.returncode == 0:
        yield status.stdout.strip()
        return
    started = run_kafka_script("start", timeout_s=START_TIMEOUT_S)
    if started.returncode != 0:
        pytest.fail(f"scripts/kafka start failed:\n{started.stderr}", pytrace=False)
    try:
        yield started.stdout.strip()
    finally:
        stopped = run_kafka_script("stop", timeout_s=60.0)
        if stopped.returncode != 0:
            sys.stderr.write(f"scripts/kafka stop failed:\n{stopped.stderr}")


@pytest.fixture
def make_topic(request: pytest.FixtureRequest) -> Callable[[str, int], LogTopic]:
    """Make a fresh topic on the embedded log (``"embedded"``) or the real broker (``"kafka"``)."""

    def make(kind: str, partitions: int) -> LogTopic:
        if kind == "embedded":
            return EmbeddedTopic(partitions)
        return KafkaTopic(request.getfixturevalue("kafka_bootstrap"), partitions)

    return make
