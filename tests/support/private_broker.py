"""A single-node broker of a test's own, run by a copy of scripts/kafka in a temporary
directory (sharing this checkout's downloaded jars), so that stopping, killing or
reconfiguring it never disturbs other tests or other users of the session broker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import kafka_helpers

HEAP = "-Xms256m -Xmx512m"


class PrivateBroker:
    """A single-node broker of its own, run by a copy of scripts/kafka under ``root``."""

    def __init__(self, root: Path, features: str = "") -> None:
        scripts = root / "scripts"
        scripts.mkdir(parents=True)
        self.script = scripts / "kafka"
        shutil.copy2(kafka_helpers.KAFKA_SCRIPT, self.script)
        shutil.copy2(kafka_helpers.KAFKA_SCRIPT.with_name("kafka-pom.xml"), scripts)
        libs = kafka_helpers.KAFKA_SCRIPT.parent.parent / ".kafka" / "libs"
        if (libs / ".complete").is_file():  # else the copy downloads the jars itself
            (root / ".kafka").mkdir()
            (root / ".kafka" / "libs").symlink_to(libs)
        self.address = ""
        self.features = features
        """Feature levels for its storage (``LANEWAY_BROKER_FEATURES``), e.g.
        ``group.version=0``: a broker without KIP-848's consumer group protocol."""

    def pid(self) -> int:
        """The broker JVM's pid (scripts/kafka keeps it in ``.kafka/pid``)."""
        return int((self.script.parent.parent / ".kafka" / "pid").read_text().strip())

    def run(self, command: str, timeout: float = 900.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(self.script), command],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "KAFKA_HEAP_OPTS": HEAP, "LANEWAY_BROKER_FEATURES": self.features},
        )
