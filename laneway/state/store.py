"""StateStore: where a stateful consumer keeps its per-key state (see the stateful guide)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from laneway.errors import ConfigError
from laneway.options import choice, duration, number
from laneway.sources.topic_names import check_topic_name
from laneway.state.codec import StateCodec
from laneway.state.files.base import StateBackend, file_name
from laneway.state.restore import ChangelogBehind
from laneway.state.table import PartitionTable
from laneway.types import PartitionId

CACHED_KEYS = 100_000
"""Keys kept in memory per partition by default."""
CHECKPOINT_INTERVAL = 5.0
"""Seconds between checkpoints of the state files by default."""


class StateStore:
    """Per-key state for a consumer's handler, durable in a compacted changelog topic.

    ``laneway.Consumer(source, apply, state=StateStore("./state", changelog="ledger.balances"))``
    calls ``apply(message, state)`` with the :class:`~laneway.state.state.State` of the
    message's key. ``path`` is a directory for one file per partition (a cache of the
    changelog that makes restores short; ``None``: in memory, every start restores in
    full), kept by ``backend`` (``"sqlite"``, the default, or ``"lmdb"`` with
    ``pip install laneway[lmdb]``: see :class:`~laneway.StateBackend`);
    ``changelog`` a compacted topic with the input's partition count (created when
    missing and ``create_changelog``; one with another count or not compacted is a
    ConfigError naming it). ``serializer``: a :mod:`laneway.serde` codec for the values
    (default JSON). One input topic per store: its partition *n*'s state is in changelog
    partition *n*. ``when_changelog_behind`` says what a restore does when the changelog
    ends before the checkpoint of a file that passes its checks (the changelog lost state
    the file holds): ``"refuse"`` (the default: the run ends with a ConfigError naming the
    partition), ``"rebuild"`` (the file's state is written back into the changelog) or
    ``"start_empty"`` (the file is set aside; see
    :class:`~laneway.state.restore.ChangelogBehind`).

    Tuning: ``cached_keys`` (keys kept in memory per partition; past it clean keys are read
    from the file again), ``checkpoint_interval`` (seconds between state-file checkpoints:
    shorter means less changelog to read after a crash, and more brief pauses of result
    writing, about a round of writes each). Keyless messages share their partition's
    keyless state (the empty key), so ``null_keys="unordered"`` is refused with a store.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        changelog: str,
        *,
        serializer: Any = None,
        create_changelog: bool = True,
        cached_keys: int = CACHED_KEYS,
        checkpoint_interval: float = CHECKPOINT_INTERVAL,
        backend: StateBackend | str = StateBackend.SQLITE,
        when_changelog_behind: ChangelogBehind | str = ChangelogBehind.REFUSE,
    ) -> None:
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise ConfigError(
                f"StateStore path={path!r} is not valid; expected a directory or None"
            )
        if not isinstance(changelog, str):
            raise ConfigError(
                f"StateStore changelog={changelog!r} is not valid; expected a topic name"
            )
        check_topic_name(changelog, "StateStore changelog")
        self.path = None if path is None else Path(path)
        self.changelog = changelog
        self.codec = StateCodec(serializer, changelog)
        self.create_changelog = bool(create_changelog)
        self.cached_keys = int(number()(cached_keys, "StateStore cached_keys") or 1)
        interval = duration()(checkpoint_interval, "StateStore checkpoint_interval")
        self.checkpoint_interval = float(interval or CHECKPOINT_INTERVAL)
        self.backend = choice(StateBackend, backend, "StateStore backend")
        self.when_changelog_behind = choice(
            ChangelogBehind, when_changelog_behind, "StateStore when_changelog_behind"
        )

    def table(
        self,
        pid: PartitionId,
        group: str,
        on_replaced: Callable[[PartitionTable], None] | None = None,
    ) -> PartitionTable:
        """Open the state of input partition ``pid`` for ``group`` (its file, if any);
        ``on_replaced``: see :class:`~laneway.state.table.PartitionTable`."""
        topic, partition = pid
        file = None
        if self.path is not None:
            name = file_name(self.backend, partition)
            file = self.path / _safe(group) / _safe(self.changelog) / name
        identity = {
            "group": group,
            "topic": topic,
            "changelog": self.changelog,
            "partition": str(partition),
        }
        return PartitionTable(file, identity, self.cached_keys, self.backend, on_replaced)

    def __repr__(self) -> str:
        where = "memory" if self.path is None else str(self.path)
        return f"StateStore({where!r}, changelog={self.changelog!r})"


def _safe(name: str) -> str:
    """``name`` as one path component (topic and group names may hold characters a file
    name should not)."""
    return re.sub(r"[^A-Za-z0-9._-]", lambda m: f"%{ord(m.group()):02x}", name)
