"""``laneway run --state-dir DIR --state-changelog TOPIC`` with a counting handler (on Kafka
with ``--state-backend lmdb``), then
``laneway state get`` and ``dump`` reading what it counted back from the changelog, on a
durable embedded log and on a real Kafka broker, through the real CLI."""

from __future__ import annotations

import json
import signal
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from kafka_helpers import create_topic, produce, unique_name
from ops_cli import laneway, laneway_json
from service_runs import SUPPORT, Service, free_port, wait_until

import laneway as lw

PARTITIONS = 4
KEYS = [f"k{i}".encode() for i in range(10)]


def workload() -> list[bytes | None]:
    """The messages' keys: k<i> 3 * i + 1 times, and 5 keyless messages."""
    keys: list[bytes | None] = []
    for i, key in enumerate(KEYS):
        keys += [key] * (3 * i + 1)
    return keys + [None] * 5


def counts_of(keys: list[bytes | None], partitions: list[int]) -> dict[tuple[int, str], int]:
    """Each (partition, key)'s count of messages (a keyless one's key: the empty key)."""
    return dict(
        Counter((p, (key or b"").decode()) for key, p in zip(keys, partitions, strict=True))
    )


def run_until_finished(service: Service, filled: int, *args: str) -> None:
    """``laneway run state_handlers:count ARGS`` until its backlog is empty on the ``filled``
    partitions that hold messages (``/backlog`` leaves out a partition it never read:
    keyless messages may leave one empty), then SIGTERM."""
    port = free_port()
    process = service.start(*args, "--health-port", str(port))

    def finished() -> bool:
        assert process.poll() is None, process.communicate()[0]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/backlog", timeout=2) as r:
                body = json.loads(r.read())
        except OSError:
            return False
        return len(body["partitions"]) == filled and body["lag"] == 0

    try:
        wait_until(finished, 60, "the run to finish every message")
    except AssertionError:
        process.send_signal(signal.SIGTERM)
        raise AssertionError(f"the run did not finish:\n{process.communicate()[0]}") from None
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output


def check_state_commands(
    where: list[str], name: str, expected: dict[tuple[int, str], int], tmp_path: Path
) -> None:
    changelog = ["--changelog", name]
    dumped = laneway_json("state", "dump", *changelog, "--show-values", *where, cwd=tmp_path)
    counts = {(s["partition"], s["key"]): int(s["value"]) for s in dumped["states"]}
    assert counts == expected
    assert dumped["skipped"] == 0

    hidden = laneway_json("state", "dump", *changelog, *where, cwd=tmp_path)
    assert all("value" not in s for s in hidden["states"])
    assert len(hidden["states"]) == len(counts)
    table = laneway("state", "dump", *changelog, *where, cwd=tmp_path)
    assert table.returncode == 0 and "value" not in table.stdout, table.stdout

    one = laneway_json("state", "get", "--key", "k7", "--show-values", *changelog, *where,
                       cwd=tmp_path)  # fmt: skip
    assert [s["value"] for s in one["states"]] == ["22"]
    shown = laneway("state", "get", "--key", "k7", "--show-values", *changelog, *where,
                    cwd=tmp_path)  # fmt: skip
    assert shown.returncode == 0 and "22" in shown.stdout, shown.stdout
    missing = laneway("state", "get", "--key", "nobody", *changelog, *where, cwd=tmp_path)
    assert missing.returncode == 0 and "no state for key nobody" in missing.stdout

    no_changelog = laneway("state", "dump", *where, cwd=tmp_path)
    assert no_changelog.returncode == 2 and "--changelog" in no_changelog.stderr
    unknown = laneway("state", "dump", "--changelog", "nope", *where, cwd=tmp_path)
    assert unknown.returncode == 3 and "'nope'" in unknown.stderr, unknown.stderr


def test_run_with_state_then_read_it_on_the_embedded_log(tmp_path: Path) -> None:
    path = tmp_path / "log"
    log = lw.EmbeddedLog(path)
    log.create_topic("counts", partitions=PARTITIONS)
    keys = workload()
    partitions = [log.produce("counts", b"1", key=key)[0] for key in keys]
    log.close()
    service = Service(tmp_path, "state_handlers:count", [SUPPORT])
    where = ["--log-dir", str(path)]
    state = ["--state-dir", str(tmp_path / "state"), "--state-changelog", "counts.state"]
    filled = len(set(partitions))
    run_until_finished(service, filled, "--group", "g", "--topic", "counts", *where, *state)
    check_state_commands(where, "counts.state", counts_of(keys, partitions), tmp_path)
    assert list((tmp_path / "state").rglob("*.sqlite")), "no state file was written"


@pytest.mark.kafka
def test_run_with_state_then_read_it_on_kafka(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic, changelog = unique_name("counts"), unique_name("counts.state")
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    keys = workload()
    written = produce(kafka_bootstrap, topic, [(key, b"1") for key in keys])
    service = Service(tmp_path, "state_handlers:count", [SUPPORT])
    where = ["--bootstrap-servers", kafka_bootstrap]
    state = ["--state-dir", str(tmp_path / "state"), "--state-changelog", changelog]
    state += ["--state-backend", "lmdb"]  # the embedded case runs the default, SQLite
    args = ["--group", unique_name("g"), "--topic", topic, "--config", str(service.kafka_file)]
    run_until_finished(service, len({partition for partition, _ in written}), *args, *where, *state)
    expected = counts_of(keys, [partition for partition, _ in written])
    check_state_commands(where, changelog, expected, tmp_path)
    assert list((tmp_path / "state").rglob("*.lmdb")), "no LMDB state file was written"
    assert not list((tmp_path / "state").rglob("*.sqlite"))
