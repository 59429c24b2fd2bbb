"""Checking an LMDB state file in a child process before the consumer's process opens it.

LMDB trusts its file: reading a damaged one can end the reading process (SIGBUS past the
end of the file, SIGABRT on an assertion), measured on 250 files with random bytes written
mid-file: 3 such ends. A consumer that opened such a file at every start would crash at
every start. So an LMDB file that is there is first read whole (every row and its check,
each found again by key, LMDB's count: :meth:`~laneway.state.files.lmdb.LmdbFile.verify`)
by ``python -m laneway.state.files.lmdb_check PATH``; a file that fails, or whose check
ended the child, is not opened (:class:`~laneway.state.files.checks.UnusableFile`: the
table sets it aside). The child costs a Python start (about 0.1 s) and the read.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from laneway.state.files.checks import UnusableFile

CHECK_TIMEOUT = 600.0
"""Seconds the child may take to read a file (about a second per million keys)."""
UNUSABLE = 3
"""The child's exit code for a file that fails its check (the reason on its stdout)."""


def check_apart(path: Path, timeout: float = CHECK_TIMEOUT) -> None:
    """Read the LMDB file at ``path`` whole in a child process; an :class:`UnusableFile`
    saying why when it fails its check, or reading it ended the child."""
    command = [sys.executable, "-m", "laneway.state.files.lmdb_check", str(path)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise UnusableFile(f"checking it took longer than {timeout:g} s") from None
    if done.returncode == 0:
        return
    if done.returncode < 0:
        raise UnusableFile(f"reading it ended the checking process (signal {-done.returncode})")
    why = (done.stdout.strip() or done.stderr.strip() or "no reason given").splitlines()[-1]
    raise UnusableFile(why if done.returncode == UNUSABLE else f"its check failed: {why}")


def main(argv: list[str]) -> int:
    from laneway.state.files.lmdb import LmdbFile

    try:
        file = LmdbFile(Path(argv[0]), checked_apart=False)
        try:
            file.meta()
            file.verify()
        finally:
            file.close()
    except UnusableFile as error:
        print(error)
        return UNUSABLE
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
