"""A stateful ``laneway run`` starts as well as a stateless one: the same one-line errors and
exit codes, no raw client lines, no ERROR on a normal first start; and ``laneway state``
tells a topic that is not a changelog apart."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_helpers import create_topic, produce, unique_name
from ops_cli import laneway as laneway_cli
from service_runs import SUPPORT, Service, wait_until

pytestmark = pytest.mark.kafka


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    running = Service(tmp_path, "state_handlers:count", [SUPPORT])
    yield running
    running.close()


def state_flags(tmp_path: Path, topic: str) -> tuple[str, ...]:
    return ("--state-dir", str(tmp_path / "state"), "--state-changelog", f"{topic}.state")


def logged(output: str, *levels: str) -> list[str]:
    return [line for line in output.splitlines() if any(f" {level} " in line for level in levels)]


def test_a_misspelt_input_topic_is_exit_3_with_did_you_mean(
    service: Service, kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = unique_name("stateful-in")
    create_topic(kafka_bootstrap, topic, 2)
    code, output = service.run(
        "--bootstrap-servers", kafka_bootstrap, "--group", unique_name("g"),
        "--topic", topic + "x", *state_flags(tmp_path, topic),
    )  # fmt: skip
    assert code == 3, output
    assert f"did you mean '{topic}'" in output
    assert logged(output, "WARNING", "ERROR") == [], output


def test_an_unreachable_cluster_is_one_line_and_exit_3(service: Service, tmp_path: Path) -> None:
    code, output = service.run(
        "--bootstrap-servers", "127.0.0.1:1", "--group", "g", "--topic", "t",
        "--connect-timeout", "3", *state_flags(tmp_path, "t"),
    )  # fmt: skip
    assert code == 3, output
    assert "cannot reach the Kafka cluster at 127.0.0.1:1" in output
    assert len(output.splitlines()) < 20, output  # not librdkafka's ~190 connection lines


def test_a_stateful_handler_without_a_store_is_told_what_it_needs(
    service: Service, kafka_bootstrap: str
) -> None:
    code, output = service.run(
        "--bootstrap-servers", kafka_bootstrap, "--group", "g", "--topic", "t"
    )
    assert code == 2, output
    assert "takes a message and its state" in output
    assert "--state-dir DIR --state-changelog TOPIC" in output


def test_a_first_stateful_start_logs_no_error(
    service: Service, kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = unique_name("stateful-first")
    create_topic(kafka_bootstrap, topic, 4)
    produce(kafka_bootstrap, topic, [(b"k%d" % (i % 20), b"1") for i in range(200)])
    process = service.start(
        "--bootstrap-servers", kafka_bootstrap, "--group", unique_name("g"), "--topic", topic,
        *state_flags(tmp_path, topic), "--log-level", "info",
    )  # fmt: skip
    lines: list[str] = []

    def restored() -> bool:
        assert process.stdout is not None
        lines.append(process.stdout.readline())
        return "assigned" in lines[-1] or "restored" in lines[-1]

    wait_until(restored, 60, "the partitions assigned")
    process.send_signal(signal.SIGTERM)
    rest, _ = process.communicate(timeout=60)
    output = "".join(lines) + rest
    assert process.returncode == 0, output
    assert logged(output, "ERROR") == [], output


def test_laneway_state_refuses_a_topic_that_is_not_a_changelog(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = unique_name("not-a-changelog")
    create_topic(kafka_bootstrap, topic, 1)
    produce(kafka_bootstrap, topic, [(b"k", b"v")] * 3)
    done = laneway_cli(
        "state", "get", "--bootstrap-servers", kafka_bootstrap, "--changelog", topic,
        "--key", "k", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"topic {topic} is not a laneway changelog" in done.stderr
