"""Damaged state files, on both backends and both logs: set aside, restored, counts exact.

Each case runs a counting consumer (``tests/support/state_fault_child.py``, a process of its
own) three times on one state directory. The first run fills the files. Then each of the
six partitions' files gets a different kind of damage (``file_damage.KINDS``: cut to 5,000
bytes, random bytes mid-file, random bytes over its header, another format, its lock files
deleted, no permissions), real damage to the file on disk, at one moment: before the second
run opens it (``open``), right before its first checkpoint while handlers use it
(``checkpoint``), or while it is restored from its checkpoint (``restore``); the second run
then gets more messages, and a third run follows.

Every run must end by itself (exit 0: no hang, no crash); afterwards every key's count in
the changelog is the number of its messages, every partition's file passes its checks and
holds exactly the changelog's state, and each file that could not be used was set aside
(renamed ``<file>.set-aside-<time>``, not deleted) with a WARNING naming it.

As root, whom no permission stops, the consumers run without the capabilities that let
root pass permission checks (``setpriv --bounding-set -dac_override,-dac_read_search``), so
that a file without permissions is one they cannot open.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import kafka_helpers
import pytest
from changelogs import latest_counts, read_kafka
from checkout import SUPPORT
from file_damage import KINDS, SET_ASIDE
from file_damage import damage as damage_file

import laneway
from laneway.state.files.base import StateBackend, file_name, open_file

PARTITIONS = len(KINDS)
KEYS = 60
RUNS = ((0, 600, 0), (600, 300, 300), (1200, 150, 0))
"""Each run's first message index, messages produced before it counts, and after the damage."""
CHILD = SUPPORT / "state_fault_child.py"
SIDECARS = ("-wal", "-shm", "-journal", "-lock")
PHASES = ("open", "checkpoint", "restore")
HEALED = frozenset({"truncated", "garbage_mid"})
"""Damage SQLite may write over while it has the file open: when it closes the file it
copies its write-ahead log back into it, every page changed in the run, which in these
small files can be every damaged page. Such a file passes its checks and holds exactly the
changelog's state (checked like every other), so it need not be set aside."""
LOGS = ["embedded", pytest.param("kafka", marks=pytest.mark.kafka)]
BACKENDS = [b.value for b in StateBackend]


def run_child(settings: dict[str, Any], output: Path) -> str:
    """Run the consumer to its end (as a root bound by permissions, under root); its
    output."""
    command = [sys.executable, str(CHILD), json.dumps(settings)]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.fail("as root, these tests need setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
        command = [setpriv, "--bounding-set", "-dac_override,-dac_read_search", *command]
    env = {**os.environ, "PYTHONPATH": str(SUPPORT)}
    with output.open("w") as out:
        process = subprocess.run(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=150, check=False
        )
    text = output.read_text()
    assert process.returncode == 0, f"the consumer exited {process.returncode}:\n{text}"
    return text


def changelog_counts(where: dict[str, Any], changelog: str) -> dict[bytes, int]:
    if "log_dir" in where:
        log = laneway.EmbeddedLog(where["log_dir"])
        try:
            ends = log.end_offsets(changelog)
            read = [m for p, end in ends.items() for m in log.read(changelog, p, 0, end)]
        finally:
            log.close()
        return latest_counts([(m.key, m.value, list(m.headers)) for m in read])
    return latest_counts(read_kafka(where["bootstrap"], changelog))


def check_files(folder: Path, backend: str, counts: dict[bytes, int]) -> None:
    """Every partition's file passes its checks and holds the changelog's counts."""
    held: dict[bytes, int] = {}
    for partition in range(PARTITIONS):
        file = open_file(
            StateBackend(backend), folder / file_name(StateBackend(backend), partition)
        )
        try:
            assert file.meta().get("checkpoint", "").isdigit()
            file.verify()
            for key, value, _offset in file.rows():
                assert value is not None
                held[key] = int(value)
        finally:
            file.close()
    assert held == counts


@pytest.mark.parametrize("log", LOGS)
@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_kind_of_damage_is_set_aside_and_restored_exactly(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str, phase: str, log: str
) -> None:
    topic, group, changelog = "counts", "counters", "counts.state"
    where: dict[str, Any] = {"log_dir": str(tmp_path / "log")}
    if log == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        topic, group = kafka_helpers.unique_name("counts"), kafka_helpers.unique_name("g")
        changelog = f"{topic}.state"
        kafka_helpers.create_topic(bootstrap, topic, PARTITIONS)
        where = {"bootstrap": bootstrap}
    else:
        embedded = laneway.EmbeddedLog(tmp_path / "log")
        embedded.create_topic(topic, partitions=PARTITIONS)
        embedded.close()
    state = tmp_path / "state"
    folder = state / group / changelog
    kinds = {str(partition): kind for partition, kind in enumerate(KINDS)}
    settings = {
        **where,
        "topic": topic,
        "group": group,
        "changelog": changelog,
        "state_dir": str(state),
        "backend": backend,
        "keys": KEYS,
        "idle": 3.0,
    }
    outputs = []
    for run, (start, first, then) in enumerate(RUNS):
        damage = None
        if run == 1:
            if phase == "open":
                for partition, kind in kinds.items():
                    damage_file(folder / f"{partition}.{backend}", kind)
            else:
                damage = {"phase": phase, "kinds": kinds}
        step = {**settings, "start": start, "first": first, "then": then, "damage": damage}
        outputs.append(run_child(step, tmp_path / f"run-{run}.log"))
    text = "\n".join(outputs)

    produced = Counter(f"k{i % KEYS}".encode() for i in range(sum(f + t for _, f, t in RUNS)))
    counts = changelog_counts(where, changelog)
    assert counts == dict(produced)
    check_files(folder, backend, counts)
    for partition, kind in kinds.items():
        name = f"{partition}.{backend}"
        aside = [p for p in folder.glob(f"{name}.set-aside-*") if not p.name.endswith(SIDECARS)]
        healed = backend == "sqlite" and phase == "checkpoint" and kind in HEALED
        if kind not in SET_ASIDE:
            assert not aside, f"{name} ({kind}) was set aside:\n{text}"
        elif not healed:
            assert aside, f"{name} ({kind}) was not set aside:\n{text}"
            assert f"WARNING laneway.state.table: state file {folder / name} cannot be used" in text
