"""``laneway run`` through the real CLI in a subprocess, against the real broker."""

from __future__ import annotations

import json
import os
import signal
import socket
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


def listening_on(port: int) -> set[str]:
    """The local addresses of the sockets listening on TCP ``port`` (``/proc/net/tcp*``)."""
    found: set[str] = set()
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                raw = bytes.fromhex(address)
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                found.add(socket.inet_ntop(family, words))
    return found


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
    assert listening_on(metrics_port) == {"127.0.0.1"}, "loopback unless --metrics-address says"
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
        '"sasl.oauthbearer.config" = "principal=admin secret=oauth-secret"\n'
        '"sasl.oauthbearer.assertion.private.key.passphrase" = "key-passphrase"\n'
        '"sasl.oauthbearer.assertion.private.key.pem" = "-----BEGIN PRIVATE KEY-----"\n'
        'client.id = "from-file"\n'
    )
    secret_file = service.tmp_path / "scram-password"
    secret_file.write_text("from-a-mounted-file\n")
    printed: list[str] = []

    def shown(*args: str, env: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
        code, output = service.run("--config", str(config), "--print-config", *args, env=env)
        assert code == 0, output
        printed.append(output)
        rows = {}
        for line in output.splitlines():
            name, rest = line.split(None, 1)
            value, origin = rest.rstrip().rsplit(" (", 1)
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
    for name in (
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "sasl.oauthbearer.assertion.private.key.pem",
    ):
        assert rows[f"kafka.{name}"] == ("***", "file")
    env = {
        "LANEWAY_KAFKA_CLIENT_ID": "from-env",
        "LANEWAY_KAFKA_SASL_PASSWORD_FILE": str(secret_file),
        "LANEWAY_KAFKA_SASL_USERNAME": "alice",
    }
    rows = shown(env=env)
    assert rows["kafka.client.id"] == ("'from-env'", "env"), "a variable wins over the file"
    assert rows["kafka.sasl.password"] == ("***", "env file")
    assert rows["kafka.sasl.username"] == ("***", "env")
    for secret in ("hunter2", "oauth-secret", "key-passphrase", "PRIVATE KEY", "mounted", "alice"):
        assert all(secret not in output for output in printed), secret


@pytest.mark.parametrize(
    ("args", "expected", "code"),
    [
        (["--config", "bad.toml"], "unknown key 'concurency'; did you mean 'concurrency'?", 2),
        (["--config", "quoted.toml"], "concurrency = '64' is a string; expected a whole", 2),
        (["--config", "kafka.toml", "--group", "g", "--topic", "t", "--bootstrap-servers",
          "BROKER"], "[kafka] 'sesion.timeout.ms' is not a librdkafka property; did you mean "
         "'session.timeout.ms'?", 2),
        (["--engine", "fibers"], "engine='fibers' is not valid; allowed values:", 2),
        (["--concurrency", "300", "--max-buffered", "100", "--group", "g", "--topic", "t",
          "--bootstrap-servers", "BROKER"], "concurrency=300 is not valid with max_buffered=100",
         2),
        (["--group", "g", "--topic", "t", "--bootstrap-servers", "127.0.0.1:1",
          "--connect-timeout", "1"], "cannot reach the Kafka cluster at 127.0.0.1:1", 3),
        (["--group", "g", "--topic", "no-such-topic-anywhere", "--bootstrap-servers", "BROKER"],
         "unknown topic 'no-such-topic-anywhere'", 3),
        (["--group", "g", "--topic", "no-such-topic-anywhere", "--bootstrap-servers", "BROKER",
          "--share"], "unknown topic 'no-such-topic-anywhere'", 3),
        (["--group", "g", "--topic", "t", "--bootstrap-servers", "BROKER", "--health-port", "8080",
          "--health-address", "0.0.0.0:8080"], "health_address='0.0.0.0:8080' is not valid", 2),
    ],
)  # fmt: skip
def test_start_up_errors_are_one_line_and_an_exit_code(
    service: AppService, args: list[str], expected: str, code: int, kafka_bootstrap: str
) -> None:
    (service.tmp_path / "bad.toml").write_text("concurency = 4\n")
    (service.tmp_path / "quoted.toml").write_text('concurrency = "64"\n')
    (service.tmp_path / "kafka.toml").write_text("[kafka]\nsesion.timeout.ms = 6000\n")
    began = time.monotonic()
    returned, output = service.run(*[kafka_bootstrap if a == "BROKER" else a for a in args])
    assert returned == code, output
    assert output.splitlines() == [output.strip()], f"one line, nothing before it:\n{output}"
    assert output.startswith("laneway run: error:") and expected in output, output
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


@pytest.mark.parametrize("show_keys", [False, True])
def test_readyz_reports_a_stall_and_recovers_and_livez_stays_up(
    service: AppService, kafka_bootstrap: str, show_keys: bool
) -> None:
    topic, group = unique_name("svc-stall"), unique_name("g")
    create_topic(kafka_bootstrap, topic, 2)
    hang = service.tmp_path / "hang"
    hang.touch()
    port = free_port()
    process = service.start(
        "--bootstrap-servers", kafka_bootstrap, "--group", group, "--topic", topic,
        "--health-port", str(port), "--stall-timeout", "1", "--config", str(service.kafka_file),
        *(["--health-show-keys", "--health-address", "0.0.0.0"] if show_keys else []),
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
    [stalled] = body["stalled"]  # type: ignore[misc]
    assert (stalled["topic"], stalled["offset"]) == (topic, 0)
    if show_keys:
        assert stalled["key"] == "stuck"
        assert listening_on(port) == {"0.0.0.0"}, "--health-address"
    else:
        assert "key" not in stalled and "stuck" not in json.dumps(body), "keys are user data"
        assert listening_on(port) == {"127.0.0.1"}, "loopback unless --health-address says"
    assert probe("/livez")[0] == 200
    assert len(service_app.records(service.records)) == 2, "other keys went on"
    hang.unlink()
    wait_until(lambda: probe("/readyz")[0] == 200, 10, "/readyz to recover")
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    [warning] = [line for line in output.splitlines() if "longer than stall_timeout" in line]
    if show_keys:
        assert f"on {topic}[" in warning and "@0 (key b'stuck')," in warning, warning
    else:
        assert "stuck" not in output, "keys are user data: not in the log lines either"


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


def test_the_share_group_preview_warning_is_logged_once_per_process_tree(
    service: AppService, kafka_bootstrap: str
) -> None:
    topic, group = unique_name("svc-share"), unique_name("g")
    create_topic(kafka_bootstrap, topic, 2)
    produce(kafka_bootstrap, topic, [(b"k%d" % i, b"v") for i in range(20)])
    supervisor = service.start(
        "--bootstrap-servers", kafka_bootstrap, "--group", group, "--topic", topic,
        "--share", "--members", "2",
    )  # fmt: skip
    wait_until(lambda: len(service_app.records(service.records)) >= 20, 60, "every record")
    time.sleep(2)  # both members have polled (librdkafka's line comes with the first poll)
    supervisor.send_signal(signal.SIGTERM)
    output, _ = supervisor.communicate(timeout=60)
    assert supervisor.returncode == 0, output
    assert "member 1 started" in output
    assert output.count('The share consumer is in "Preview"') == 1, output


def test_a_secret_librdkafka_echoes_in_an_error_is_not_shown(
    service: AppService, kafka_bootstrap: str
) -> None:
    config = service.tmp_path / "oauth.toml"
    config.write_text(
        '[kafka]\n"security.protocol" = "SASL_PLAINTEXT"\n"sasl.mechanism" = "OAUTHBEARER"\n'
        '"enable.sasl.oauthbearer.unsecure.jwt" = true\n'
        '"sasl.oauthbearer.config" = "principal=svc bogus=oauth-s3cret-value"\n'
    )
    code, output = service.run(
        "--bootstrap-servers", kafka_bootstrap, "--group", "g", "--topic", "t",
        "--config", str(config), "--connect-timeout", "3",
    )  # fmt: skip
    assert code != 0 and "laneway run: error:" in output, output
    assert "Unrecognized sasl.oauthbearer.config beginning at: ***" in output
    assert "s3cret" not in output
