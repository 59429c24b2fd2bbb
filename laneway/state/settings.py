"""``laneway run``'s state settings: where a stateful handler's store lives."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from laneway.errors import ConfigError
from laneway.options import OptionSpec, choice_of, names, optional_text
from laneway.state.files.base import StateBackend
from laneway.state.restore import ChangelogBehind
from laneway.state.store import StateStore

STATE_OPTIONS: dict[str, tuple[object, OptionSpec]] = {
    "state_dir": (
        None,
        OptionSpec(
            "directory of the state store's files (one file per partition; with "
            "--members, member i uses DIR/member-i); with --state-changelog the handler is "
            "called as handler(message, state)",
            optional_text,
            "text",
        ),
    ),
    "state_changelog": (
        None,
        OptionSpec(
            "the compacted topic that keeps the handler's per-key state (created when "
            "missing, co-partitioned with the input); needs --state-dir",
            optional_text,
            "text",
        ),
    ),
    "state_backend": (
        StateBackend.SQLITE.value,
        OptionSpec(
            "what keeps the state files: sqlite (the standard library's) or lmdb (pip "
            "install laneway[lmdb]; restores and checkpoints about 4x faster)",
            choice_of(StateBackend),
            "choice",
            choices=names(StateBackend),
        ),
    ),
    "state_changelog_behind": (
        ChangelogBehind.REFUSE.value,
        OptionSpec(
            "what to do when the changelog ends before the checkpoint of a state file that "
            "passes its checks (the changelog was deleted and created again, cut short, or "
            "is another cluster's): refuse (the run exits 2 naming the partition), rebuild "
            "(write the file's state back into the changelog) or start_empty (set the "
            "file aside, start from what the changelog holds)",
            choice_of(ChangelogBehind),
            "choice",
            choices=names(ChangelogBehind),
        ),
    ),
}
"""The settings that build ``laneway run``'s :class:`~laneway.state.store.StateStore`,
declared once: name -> (default, spec); the service appends them to its own."""


def store_of(values: Mapping[str, Any], member: int | None = None) -> StateStore | None:
    """The store the settings ``values`` name (``None`` without either setting);
    ``member``: the index of a ``--members`` process, which keeps its files apart."""
    directory, changelog = values["state_dir"], values["state_changelog"]
    if directory is None and changelog is None:
        return None
    if directory is None or changelog is None:
        given, missing = ("state_dir", "state_changelog")
        if directory is None:
            given, missing = missing, given
        raise ConfigError(
            f"{given} needs {missing}: give both --state-dir DIR and --state-changelog TOPIC"
        )
    path = Path(directory)
    if member is not None:
        path = path / f"member-{member}"
    return StateStore(
        path,
        changelog,
        backend=values["state_backend"],
        when_changelog_behind=values["state_changelog_behind"],
    )
