"""``laneway run`` through the real CLI in a subprocess, against the real broker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import service_app
from kafka_helpers import committed_offsets, create_topic, end_offsets, produce, unique_name
from service_runs import SUPPORT, Service, free_port, wait_until

from laneway.offsets.codec import decode

pytestmark = pytest.mark.kafka


class AppService(Service):
    """``laneway run service_app:handle``, recording what it handles under ``records``."""

    def __init__(self, tmp_path: Path) -> None:
        self.records = tmp_path / "records"
        self.records.mkdir()
        super().__init__(
            tmp_path, "service_app:handle", [SUPPORT], {"SERVICE_RECORD_DIR": str(self.records)}
        )


@pytest.fixture
def service(tmp_path: Path) -> Iterator[AppService]:
    running = AppService(tmp_path)
    yield running
    running.close()


def test_sigterm_mid_run_drains_and_commits_exactly_what_was_handled(
    service: AppService, kafka_bootstrap: str
) -> None:
    topic, group = unique_name("svc-term"), unique_name("g")
    create_topic(kafka_bootstrap, topic, 4)
    produce(kafka_bootstrap, topic, [(b"k%d" % (i % 50), b"v") for i in range(3_000)])
    metrics_port = free_port()
    process = service.start(
        "--bootstrap-servers", kafka_bootstrap, "--group", group, "--topic", topic,
        "--engine", "thread", "--concurrency", "8", "--config", str(service.kafka_file),
        "--metrics-port", str(metrics_port), env={"SERVICE_WORK_MS": "5"},
    )  # fmt: skip
    wait_until(lambda: len(service_app.records(service.records)) >= 300, 30, "some messages")
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as answer:
        scraped = answer.read().decode()
    series = f'laneway_messages_processed_total{{topic="{topic}"}}'
    processed = [line for line in scraped.splitlines() if line.startswith(series)]
    assert processed and float(processed[0].split()[-1]) > 0, "/metrics on --metrics-port"
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    handled = service_app.records(service.records)
    assert 300 <= len(handled) < 3_000, "stopped mid-run"
    by_partition: dict[int, list[int]] = defaultdict(list)
    for _, partition, offset in handled:
        by_partition[partition].append(offset)
    committed = committed_offsets(kafka_bootstrap, group, topic)
    for partition, offsets in by_partition.items():
        # committed: every offset below the commit point, plus those the commit metadata
        # records as finished beyond it (lanes that never got a thread stopped earlier)
        offset, metadata = committed[partition]
        assert len(offsets) == len(set(offsets)), "nothing handled twice"
        assert set(offsets) == set(range(offset)) | decode(metadata, offset), partition
    assert "stopped after" in output


def test_settings_come_from_flag_then_environment_then_file(
    service: AppService, kafka_bootstrap: str
) -> None:
    config = service.tmp_path / "laneway.toml"
    config.write_text(
        'concurrency = 11\nmax_buffered = 777\ngroup = "from-file"\ntopics = ["a", "b"]\n'
        '[kafka]\n"security.protocol" = "PLAINTEXT"\n"sasl.password" = "hunter2"\n'
    )

    def shown(*args: str, env: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
        code, output = service.run("--config", str(config), "--print-config", *args, env=env)
        assert code == 0, output
        rows = {}
        for line in output.splitlines():
            name, rest = line.split(None, 1)
            value, origin = rest.rsplit(None, 1)
            rows[name] = (value.strip(), origin.strip("()"))
        return rows

    env = {"LANEWAY_CONCURRENCY": "22"}
    assert shown("--concurrency", "33", env=env)["concurrency"] == ("33", "flag")
    assert shown(env=env)["concurrency"] == ("22", "env")
    rows = shown()
    assert rows["concurrency"] == ("11", "file")
    assert rows["max_buffered"] == ("777", "file")
    assert rows["group"] == ("'from-file'", "file")
    assert rows["topics"] == ("a, b", "file")
    assert rows["commit_interval"] == ("1.0", "default")
    assert rows["kafka.security.protocol"] == ("'PLAINTEXT'", "file")
    assert rows["kafka.sasl.password"] == ("***", "file")


@pytest.mark.parametrize(
    ("args", "expected", "code"),
    [
        (["--config", "bad.toml"], "unknown key 'concurency'; did you mean 'concurrency'?", 2),
        (["--engine", "fibers"], "engine='fibers' is not valid; allowed values:", 2),
        (["--group", "g", "--topic", "t", "--bootstrap-servers", "127.0.0.1:1",
          "--connect-timeout", "1"], "cannot reach the Kafka cluster at 127.0.0.1:1", 3),
    ],
)  # fmt: skip
def test_start_up_errors_are_one_line_and_an_exit_code(
    service: AppService, args: list[str], expected: str, code: int
) -> None:
    (service.tmp_path / "bad.toml").write_text("concurency = 4\n")
    began = time.monotonic()
    returned, output = service.run(*args)
    assert returned == code, output
    errors = [line for line in output.splitlines() if line.startswith("laneway run: error:")]
    assert len(errors) == 1 and expected in errors[0], output
    assert time.monotonic() - began < 10


def test_a_handler_that_cannot_be_imported_is_one_line_and_exit_2(
    service: AppService, kafka_bootstrap: str
) -> None:
    process = subprocess.run(
        [sys.executable, "-m", "laneway", "run", "no_such_module:handle",
         "--bootstrap-servers", kafka_bootstrap, "--group", "g", "--topic", "t"],
        env=service.env, cwd=service.tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert process.returncode == 2
    assert process.stderr.strip() == (
        "laneway run: error: cannot import module 'no_such_module' for handler "
        "'no_such_module:handle': ModuleNotFoundError: No module named 'no_such_module'"
    )


def test_readyz_reports_a_stall_and_recovers_and_livez_stays_up(
    service: AppService, kafka_bootstrap: str
) -> None:
    topic, group = unique_name("svc-stall"), unique_name("g")
    create_topic(kafka_bootstrap, topic, 2)
    hang = service.tmp_path / "hang"
    hang.touch()
    port = free_port()
    process = service.start(
        "--bootstrap-servers", kafka_bootstrap, "--group", group, "--topic", topic,
        "--health-port", str(port), "--stall-timeout", "1", "--config", str(service.kafka_file),
        env={"SERVICE_HANG_FILE": str(hang)},
    )  # fmt: skip

    def probe(path: str) -> tuple[int, dict[str, object]]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())
        except OSError:
            return 0, {}

    wait_until(lambda: probe("/readyz")[0] == 200, 30, "the service to be ready")
    produce(kafka_bootstrap, topic, [(b"stuck", b"hang"), (b"other", b"ok"), (b"other", b"ok")])
    sent = time.monotonic()
    wait_until(lambda: probe("/readyz")[0] == 503, 10, "/readyz to report the stall")
    assert time.monotonic() - sent <= 1 + 1 + 1.5, "within stall_timeout + 1 s (+ the fetch)"
    status, body = probe("/readyz")
    assert status == 503 and "stall_timeout=1 s" in str(body["reason"])
    assert body["stalled"][0]["key"] == "stuck"  # type: ignore[index]
    assert probe("/livez")[0] == 200
    assert len(service_app.records(service.records)) == 2, "other keys went on"
    hang.unlink()
    wait_until(lambda: probe("/readyz")[0] == 200, 10, "/readyz to recover")
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output


def test_on_stall_exit_ends_the_process_with_exit_code_4(
    service: AppService, kafka_bootstrap: str
) -> None:
    topic = unique_name("svc-exit")
    create_topic(kafka_bootstrap, topic, 1)
    produce(kafka_bootstrap, topic, [(b"stuck", b"hang")])
    hang = service.tmp_path / "hang"
    hang.touch()
    code, output = service.run(
        "--bootstrap-servers", kafka_bootstrap, "--group", unique_name("g"), "--topic", topic,
        "--stall-timeout", "1", "--on-stall", "exit", "--config", str(service.kafka_file),
        "--log-format", "json", env={"SERVICE_HANG_FILE": str(hang)},
    )  # fmt: skip
    assert code == 4, output
    lines = [json.loads(line) for line in output.splitlines()]
    stall = next(line for line in lines if "longer than stall_timeout" in line["message"])
    assert stall["level"] == "warning" and stall["logger"] == "laneway.control.stalls"
    assert (stall["topic"], stall["partition"], stall["offset"]) == (topic, 0, 0)
    assert any("on_stall='exit'" in line["message"] for line in lines)


def test_members_share_the_partitions_and_a_killed_member_is_replaced(
    service: AppService, kafka_bootstrap: str
) -> None:
    topic, group = unique_name("svc-members"), unique_name("g")
    create_topic(kafka_bootstrap, topic, 8)
    count = 2_400
    produce(kafka_bootstrap, topic, [(b"k%d" % (i % 80), b"v") for i in range(count)])
    supervisor = service.start(
        "--bootstrap-servers", kafka_bootstrap, "--group", group, "--topic", topic,
        "--members", "3", "--concurrency", "4", "--commit-interval", "0.2",
        "--config", str(service.kafka_file), env={"SERVICE_WORK_MS": "10"},
    )  # fmt: skip

    def pids() -> set[int]:
        return {pid for pid, _, _ in service_app.records(service.records)}

    wait_until(lambda: len(pids()) == 3, 60, "three members to handle messages")
    victim = min(pids())
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: len(pids()) >= 4, 60, "a replacement member to handle messages")

    ends = {p: end for p, end in end_offsets(kafka_bootstrap, topic).items() if end}

    def all_committed() -> bool:
        committed = committed_offsets(kafka_bootstrap, group, topic)
        return {p: o for p, (o, _) in committed.items()} == ends

    wait_until(all_committed, 120, "every offset to be committed")
    supervisor.send_signal(signal.SIGTERM)
    output, _ = supervisor.communicate(timeout=60)
    assert supervisor.returncode == 0, output
    handled = service_app.records(service.records)
    assert {(p, o) for _, p, o in handled} == {
        (p, o) for p, end in ends.items() for o in range(end)
    }, "nothing lost"
    assert "member 0 started" in output and "restarting it" in output


def test_a_member_that_keeps_crashing_stops_the_group_with_exit_code_5(
    service: AppService, kafka_bootstrap: str
) -> None:
    topic = unique_name("svc-crash")
    create_topic(kafka_bootstrap, topic, 2)
    produce(kafka_bootstrap, topic, [(b"k", b"crash")])
    began = time.monotonic()
    code, output = service.run(
        "--bootstrap-servers", kafka_bootstrap, "--group", unique_name("g"), "--topic", topic,
        "--members", "2", "--config", str(service.kafka_file), env={"SERVICE_CRASH": "1"},
    )  # fmt: skip
    assert code == 5, output
    assert "crashed 5 times within 60 s" in output
    assert time.monotonic() - began < 45
