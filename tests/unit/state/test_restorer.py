"""The Restorer and a changelog that ends before what a file holds: refused by default, a
rebuild written back (and made again when cut short), or the file set aside. On a real
embedded log; the file is a real one."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest

import laneway
from laneway.errors import ConfigError, SourceError
from laneway.state import restore
from laneway.state.changelog import EmbeddedChangelog
from laneway.state.records import Row, offset_in
from laneway.state.restore import ChangelogBehind, RestoreJob, Restorer
from laneway.state.table import PartitionTable

ROWS = [(b"k%d" % i, b"%d" % i, i) for i in range(10)]


class FailsOnce(EmbeddedChangelog):
    """The embedded log's changelog, whose first write is cut short after its first row."""

    def __init__(self, log: laneway.EmbeddedLog) -> None:
        super().__init__(log)
        self.failed = False

    def write(self, topic: str, partition: int, rows: Sequence[Row]) -> None:
        if not self.failed:
            self.failed = True
            super().write(topic, partition, rows[:1])
            raise SourceError("writing to in.state[0] failed: the broker went away")
        super().write(topic, partition, rows)


def a_file_ahead_of_its_changelog(tmp_path: Path) -> tuple[laneway.EmbeddedLog, Path]:
    """A file with ten rows and checkpoint 10, and an empty changelog (created again)."""
    path = tmp_path / "0.sqlite"
    table = PartitionTable(path, {"group": "g"}, 100)
    table.load(ROWS)
    table.restored(10, table.generation)
    table.close()
    log = laneway.EmbeddedLog()
    log.create_topic("in.state", partitions=1)
    return log, path


def finished(restorer: Restorer, limit: float = 10.0) -> RestoreJob:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        done = restorer.finished()
        if done:
            return done[0]
        time.sleep(0.02)
    raise AssertionError("the restore did not finish")


def test_by_default_the_restore_is_refused(tmp_path: Path) -> None:
    log, path = a_file_ahead_of_its_changelog(tmp_path)
    restorer = Restorer(EmbeddedChangelog(log), "in.state")
    table = PartitionTable(path, {"group": "g"}, 100)
    restorer.restore(RestoreJob(("in", 0), table, 0))
    job = finished(restorer)
    assert isinstance(job.refused, ConfigError)
    assert "in.state[0] in the embedded log ends at 0, before the checkpoint 10" in str(job.refused)
    assert table.checkpoint == 10 and log.end_offsets("in.state") == {0: 0}
    restorer.close()
    table.close()


def test_a_rebuild_cut_short_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(restore, "RETRY_AFTER", 0.05)
    log, path = a_file_ahead_of_its_changelog(tmp_path)
    changelog = FailsOnce(log)
    restorer = Restorer(changelog, "in.state", ChangelogBehind.REBUILD)
    table = PartitionTable(path, {"group": "g"}, 100)
    restorer.restore(RestoreJob(("in", 0), table, 0))
    job = finished(restorer)
    assert changelog.failed and job.refused is None and not table.rebuilding
    written = log.read("in.state", 0, 0, 100)
    latest = {m.key: (m.value, offset_in(m.headers)) for m in written}
    assert latest == {key: (value, offset) for key, value, offset in ROWS}
    assert table.checkpoint == log.end_offsets("in.state")[0] == len(written) == 11
    assert all(table.get(key) == (value, offset) for key, value, offset in ROWS)
    restorer.close()
    table.close()


def test_start_empty_sets_the_file_aside(tmp_path: Path) -> None:
    log, path = a_file_ahead_of_its_changelog(tmp_path)
    restorer = Restorer(EmbeddedChangelog(log), "in.state", ChangelogBehind.START_EMPTY)
    table = PartitionTable(path, {"group": "g"}, 100)
    restorer.restore(RestoreJob(("in", 0), table, 0))
    job = finished(restorer)
    assert job.refused is None and job.full
    assert table.get(b"k1") == (None, -1)  # what the (empty) changelog holds
    assert [p for p in tmp_path.glob("0.sqlite.set-aside-*") if p.name.endswith("Z")]
    restorer.close()
    table.close()
