"""Damage done to a state file, the kinds of it the fault-injection tests inflict, each on
the real file on disk (never a fake of SQLite or LMDB)."""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

KINDS = ("truncated", "garbage_mid", "garbage_header", "foreign", "lock_missing", "permissions")
"""What can be wrong with a state file: cut to 5,000 bytes; random bytes over its middle
third; random bytes over its first 8 KB (SQLite's header page, LMDB's two meta pages);
replaced by a file of another format (another application's SQLite database: not a state
file for the SQLite backend, not an LMDB file for the LMDB one); its lock files deleted
(laneway's ``.lock`` and the backend's own: LMDB's ``-lock``, SQLite's ``-shm`` and
``-wal``); no permission to read or write it (run the consumer as a user other than root:
root passes every permission check)."""

SET_ASIDE = frozenset(KINDS) - {"lock_missing"}
"""The kinds after which the file cannot be used (a missing lock file is made again)."""


def damage(path: Path, kind: str, seed: int = 7) -> None:
    """Do ``kind`` of damage to the state file at ``path`` (``<partition>.<backend>``)."""
    rnd = random.Random(seed)
    if kind == "truncated":
        os.truncate(path, 5_000)
    elif kind == "garbage_mid":
        size = path.stat().st_size
        with open(path, "r+b") as file:
            file.seek(size // 3)
            file.write(rnd.randbytes(size // 3))
    elif kind == "garbage_header":
        with open(path, "r+b") as file:
            file.write(rnd.randbytes(8_192))
    elif kind == "foreign":  # another application's SQLite database, moved over it
        other = path.with_name(path.name + ".foreign")
        other.unlink(missing_ok=True)
        db = sqlite3.connect(other)
        db.execute("CREATE TABLE users (name TEXT PRIMARY KEY, email TEXT)")
        db.execute("INSERT INTO users VALUES ('ada', 'ada@example.com')")
        db.commit()
        db.close()
        stat = path.stat()
        os.chmod(other, stat.st_mode)
        if os.geteuid() == 0:
            os.chown(other, stat.st_uid, stat.st_gid)
        os.replace(other, path)
    elif kind == "lock_missing":
        for suffix in (".lock", "-lock", "-shm", "-wal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    elif kind == "permissions":
        os.chmod(path, 0)
    else:
        raise ValueError(f"no such damage: {kind}")
