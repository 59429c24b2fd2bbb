"""PartitionTable's memory: clean keys are dropped past ``cached_keys`` and read from the
file again; dirty keys (not in the file yet) always stay, and many of them do not make
every read rebuild the cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from laneway.state.files.base import StateBackend, file_name
from laneway.state.table import PartitionTable

BACKENDS = pytest.mark.parametrize("backend", list(StateBackend), ids=lambda b: b.value)


@BACKENDS
def test_reads_past_cached_keys_come_back_from_the_file(
    backend: StateBackend, tmp_path: Path
) -> None:
    table = PartitionTable(tmp_path / file_name(backend, 0), {"group": "g"}, 10, backend)
    table.load((b"k%d" % i, b"%d" % i, i) for i in range(100))
    for i in range(100):
        assert table.get(b"k%d" % i) == (b"%d" % i, i)
    assert len(table.cached) <= 10
    assert table.evictions == 9
    table.close()


@BACKENDS
def test_dirty_keys_stay_and_do_not_rebuild_the_cache_on_every_read(
    backend: StateBackend, tmp_path: Path
) -> None:
    table = PartitionTable(tmp_path / file_name(backend, 0), {"group": "g"}, 10, backend)
    for i in range(50):  # changed, not yet in the changelog: they cannot be dropped
        table.put(b"d%d" % i, (b"x", i))
    for i in range(100):
        assert table.get(b"c%d" % i) == (None, -1)
    # One rebuild per cached_keys reads, not one per read (90 with the old rule).
    assert table.evictions == 9
    assert all(table.get(b"d%d" % i) == (b"x", i) for i in range(50))
    assert len(table.cached) <= 10 + 50
    table.flush(((b"d%d" % i, b"x", i) for i in range(50)), checkpoint=7)
    for i in range(200):
        table.get(b"c%d" % i)
    assert len(table.cached) <= 10  # once written, they may go
    assert table.get(b"d3") == (b"x", 3)  # from the file
    table.close()
