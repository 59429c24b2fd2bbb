"""``laneway run`` with a stateful handler on a real broker, through faults of its state:
a damaged state file (issue 48: the run hung for good in close, deaf to SIGTERM, or exited
1 at every restart), and a changelog deleted while it runs (issue 48: every count silently
started again from zero after the restart).

Each run is the real command in a process of its own, stopped with SIGTERM like an
orchestrator stops it; the counts are read back from the changelog.
"""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import kafka_helpers
import pytest
from changelogs import latest_counts, read_kafka
from file_damage import damage
from service_runs import SUPPORT, Service, free_port, wait_until

pytestmark = pytest.mark.kafka

PARTITIONS = 4
KEYS = 50
GAUGE = "laneway_state_not_durable_partitions"


def records(start: int, count: int) -> list[tuple[bytes, bytes]]:
    return [(f"k{i % KEYS}".encode(), b"1") for i in range(start, start + count)]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


class Runs:
    """``laneway run state_handlers:count`` on one topic, group and state directory."""

    def __init__(self, tmp_path: Path, bootstrap: str, backend: str = "sqlite") -> None:
        self.bootstrap = bootstrap
        self.topic = kafka_helpers.unique_name("counts")
        self.changelog = f"{self.topic}.state"
        self.group = kafka_helpers.unique_name("g")
        kafka_helpers.create_topic(bootstrap, self.topic, PARTITIONS)
        self.service = Service(tmp_path, "state_handlers:count", [SUPPORT])
        self.state = tmp_path / "state"
        self.args = [
            "--bootstrap-servers", bootstrap, "--group", self.group, "--topic", self.topic,
            "--config", str(self.service.kafka_file), "--state-dir", str(self.state),
            "--state-changelog", self.changelog, "--state-backend", backend,
        ]  # fmt: skip
        self.folder = self.state / self.group / self.changelog

    def start(self, *extra: str) -> tuple[subprocess.Popen[str], int]:
        port = free_port()
        return self.service.start(*self.args, "--health-port", str(port), *extra), port

    def until_done(self, process: subprocess.Popen[str], port: int, timeout: float = 60) -> None:
        """Wait until the run's backlog is empty on every partition (or it exited)."""

        def done() -> bool:
            if process.poll() is not None:
                return True
            status, body = get(f"http://127.0.0.1:{port}/backlog")
            if status != 200:
                return False
            backlog = json.loads(body)
            return len(backlog["partitions"]) == PARTITIONS and backlog["lag"] == 0

        wait_until(done, timeout, "the run to finish its messages")
        assert process.poll() is None, f"the run exited:\n{process.communicate()[0]}"

    def stop(self, process: subprocess.Popen[str], within: float = 60) -> tuple[int, str]:
        """SIGTERM, then the exit code and output (a run still there after ``within``
        seconds is a hang: killed, and the test fails)."""
        process.send_signal(signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=within)
        except subprocess.TimeoutExpired:
            self.service.kill(process)
            pytest.fail(f"the run did not end {within:g} s after SIGTERM")
        return process.returncode, output

    def counts(self) -> dict[bytes, int]:
        return latest_counts(read_kafka(self.bootstrap, self.changelog))

    def close(self) -> None:
        self.service.close()


@pytest.fixture
def runs(request: pytest.FixtureRequest, kafka_bootstrap: str, tmp_path: Path) -> Any:
    made: list[Runs] = []

    def make(backend: str = "sqlite") -> Runs:
        made.append(Runs(tmp_path, kafka_bootstrap, backend))
        return made[-1]

    yield make
    for each in made:
        each.close()


@pytest.mark.parametrize("backend", ["sqlite", "lmdb"])
def test_a_damaged_state_file_neither_hangs_nor_crash_loops(runs: Any, backend: str) -> None:
    run = runs(backend)
    kafka_helpers.produce(run.bootstrap, run.topic, records(0, 600))
    process, port = run.start()
    run.until_done(process, port)
    assert run.stop(process)[0] == 0
    file = run.folder / f"0.{backend}"
    damage(file, "truncated")  # cut to 5,000 bytes, as in the issue
    kafka_helpers.produce(run.bootstrap, run.topic, records(600, 400))
    process, port = run.start()
    run.until_done(process, port)  # the partition restored from the changelog: it runs
    code, output = run.stop(process)
    assert code == 0, output
    assert f"WARNING laneway.state.table: state file {file} cannot be used" in output
    assert "set aside as" in output and "Traceback" not in output
    assert "stopped after" in output  # the usual drain summary
    assert [p for p in run.folder.glob(f"0.{backend}.set-aside-*") if p.name.endswith("Z")]
    kafka_helpers.produce(run.bootstrap, run.topic, records(1_000, 100))
    process, port = run.start()  # the next start finds a good file: no crash loop
    run.until_done(process, port)
    code, output = run.stop(process)
    assert code == 0 and "cannot be used" not in output, output
    assert run.counts() == Counter(key for key, _ in records(0, 1_100))


def test_a_deleted_changelog_is_said_refused_at_restart_and_rebuilt(runs: Any) -> None:
    """The changelog deleted with Kafka's own kafka-topics while the run counts: an ERROR
    once its writes have failed for 30 s, /readyz and the status page say state is not
    durable, laneway_state_not_durable_partitions counts the partitions; SIGTERM still
    ends the run with its drain summary. Restarted on the changelog created again, empty,
    the run exits 2 naming the partition, its checkpoint and the changelog's end; with
    --state-changelog-behind rebuild every count comes out exact."""
    run = runs()
    kafka_helpers.produce(run.bootstrap, run.topic, records(0, 2_000))
    metrics = free_port()
    process, port = run.start("--metrics-port", str(metrics))
    run.until_done(process, port)
    kafka_helpers.delete_topic(run.bootstrap, run.changelog)
    # Messages whose changes can no longer reach the changelog:
    kafka_helpers.produce(run.bootstrap, run.topic, records(2_000, 1_000))

    def said() -> bool:
        status, body = get(f"http://127.0.0.1:{port}/readyz")
        return status == 503 and "state is not durable" in body

    def counted() -> bool:  # the gauges are sampled once a second
        _, shown = get(f"http://127.0.0.1:{metrics}/metrics")
        gauge = [line for line in shown.splitlines() if line.startswith(GAUGE)]
        return bool(gauge) and float(gauge[0].split()[-1]) > 0

    wait_until(said, 90, "/readyz to say state is not durable")
    wait_until(counted, 5, f"{GAUGE} above 0")
    _, page = get(f"http://127.0.0.1:{port}/status.json")
    assert json.loads(page)["lists"]["not_durable"]["entries"], page
    code, output = run.stop(process, within=90)
    assert code == 0 and "stopped after" in output, output
    errors = [line for line in output.splitlines() if " ERROR " in line]
    assert any("is not durable" in line and run.changelog in line for line in errors), output

    process, _ = run.start()  # the changelog is created again, empty
    try:
        output, _ = process.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        run.service.kill(process)
        pytest.fail(f"the refused run did not end: {process.communicate()[0]}")
    assert process.returncode == 2, output
    [refusal] = [line for line in output.splitlines() if line.startswith("laneway run: error:")]
    assert f"the changelog {run.changelog}[" in refusal
    assert "ends at 0, before" in refusal and "the checkpoint" in refusal
    assert "state_changelog_behind=rebuild" in refusal

    process, port = run.start("--state-changelog-behind", "rebuild")
    run.until_done(process, port)
    code, output = run.stop(process)
    assert code == 0 and "rebuilt the changelog" in output, output
    assert run.counts() == Counter(key for key, _ in records(0, 3_000))
