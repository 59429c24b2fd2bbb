"""LocalFile: the file behind a partition's table, its lock, and what is done with a file
that cannot be used.

The file is locked (``flock`` on ``<file>.lock``) while a consumer uses it: a second
consumer on the same directory (a shared volume, a member not yet gone) gets a file in
memory instead of waiting for it or sharing it. A file is checked when it is opened: one
made for something else (another group, input topic, changelog, partition or format) is
noted in :attr:`LocalFile.why_full` (the table is then restored in full into it). A file
that cannot be used at all (see :class:`~laneway.state.files.checks.UnusableFile`) is set
aside (:func:`~laneway.state.files.base.set_aside`: renamed with the time, never deleted)
with a WARNING naming it and why, and a new file takes its place; memory does when the file
cannot be set aside, when the new one cannot be made, or when it is the second replaced.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Mapping
from pathlib import Path

from laneway.logs import get_logger
from laneway.state.files.base import StateBackend, StateFile, open_file, set_aside
from laneway.state.files.checks import UnusableFile

log = get_logger("laneway.state.table")

FORMAT = "2"
"""The file format (2: rows and names carry checks); a file of another format is restored
anew."""


class LocalFile:
    """The state file of one partition at ``path`` (``None``: in memory), kept by
    ``backend``, for what ``identity`` names (see the module docs). Not thread-safe: its
    table calls it under its lock."""

    def __init__(
        self, path: Path | None, identity: Mapping[str, str], backend: StateBackend
    ) -> None:
        self.path = path
        self._backend = backend
        self._identity = {**identity, "format": FORMAT}
        self._lock_file: int | None = None
        self.why_full: str | None = None
        """Why the file cannot be used as it is (a full restore follows), ``None`` if it can."""
        self.generation = 0
        """How many times the file was replaced (a restore begun before must start again)."""
        self.file = self._open(path)

    def _open(self, path: Path | None) -> StateFile:
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as error:
                return self._in_memory(f"its directory cannot be used ({error})")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                log.warning(
                    "state file %s is in use by another process: restoring this partition "
                    "into memory instead",
                    path,
                )
                self.why_full = "its file is in use by another process"
                path = self.path = None
            else:
                self._lock_file = fd
        try:
            file = open_file(self._backend, path)
        except UnusableFile as error:
            return self._fresh(error)
        except BaseException:
            self._unlock()
            raise
        if path is not None and self.why_full is None:
            try:
                self.why_full = self._check(file)
            except UnusableFile as error:
                file.close()
                return self._fresh(error)
        return file

    def _check(self, file: StateFile) -> str | None:
        meta = file.meta()
        if not meta:
            return "it has no state file yet"
        for name, wanted in self._identity.items():
            if meta.get(name) != wanted:
                return f"its file is for {name} {meta.get(name)!r}, not {wanted!r}"
        if not meta.get("checkpoint", "").isdigit():
            return "its file has no checkpoint"
        return None

    def checkpoint_meta(self, checkpoint: int) -> dict[str, str]:
        """The named strings of a file that reflects the changelog up to ``checkpoint``."""
        when = repr(time.time())
        return {**self._identity, "checkpoint": str(checkpoint), "held": str(checkpoint),
                "checkpoint_time": when, "rebuilding": "0"}  # fmt: skip

    def replace(self, error: UnusableFile) -> None:
        """The file cannot be used (``error`` says why): set it aside, a new one in its
        place."""
        with contextlib.suppress(Exception):
            self.file.close()
        self.file = self._fresh(error)

    def _fresh(self, error: UnusableFile) -> StateFile:
        path = self.path
        self.why_full = f"its file could not be used ({error})"
        self.generation += 1
        if path is None:
            return open_file(self._backend, None)
        try:
            aside = set_aside(path, self._backend)
        except OSError as failure:
            return self._in_memory(f"{error}; it cannot be set aside either ({failure})")
        if self.generation > 1:
            log.warning(
                "state file %s cannot be used again (%s): set aside as %s", path, error, aside
            )
            return self._in_memory("its new file could not be used either")
        log.warning(
            "state file %s cannot be used (%s): set aside as %s; the partition is restored "
            "in full from the changelog",
            path, error, aside,
        )  # fmt: skip
        try:
            return open_file(self._backend, path)
        except UnusableFile as again:
            return self._in_memory(f"a new file cannot be made there either ({again})")

    def _in_memory(self, why: str) -> StateFile:
        log.warning(
            "state file %s: %s; restoring this partition into memory instead", self.path, why
        )
        self.why_full = self.why_full or f"its file cannot be used: {why}"
        self.path = None
        self._unlock()
        return open_file(self._backend, None)

    def close(self) -> None:
        """Close the file and release its lock (idempotent)."""
        self.file.close()
        self._unlock()

    def _unlock(self) -> None:
        if self._lock_file is not None:
            os.close(self._lock_file)
            self._lock_file = None
