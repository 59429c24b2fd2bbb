"""The ledger with its balances in a StateStore (examples/ledger/stateful.py): killed with
SIGKILL mid-file and run again, it prints exactly the accounts of the sequential reference
(the CSV tool's output for the same transactions), rejected counts included."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
from pathlib import Path

from checkout import ROOT

EXAMPLE = ROOT / "examples" / "ledger"
sys.path.insert(0, str(EXAMPLE))

from generator import generate, reference  # noqa: E402
from service import differences  # noqa: E402
from stateful import produce_file, run  # noqa: E402
from tool import write_accounts  # noqa: E402

COUNT = 20_000
CLIENTS = 200
SEED = 20_261_128


def start(log_dir: Path, state_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE / "stateful.py"), str(log_dir), str(state_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_once_handled(process: subprocess.Popen[str], handled: int) -> int:
    """SIGKILL ``process`` once its progress lines say it handled ``handled`` messages."""
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith("{") and json.loads(line)["handled"] >= handled:
            process.send_signal(signal.SIGKILL)
            process.wait(30)
            return int(json.loads(line)["handled"])
    raise AssertionError(f"the run ended before handling {handled}: exit {process.wait()}")


def test_balances_are_exact_after_kill_9_mid_file_and_a_restart(tmp_path: Path) -> None:
    transactions = generate(COUNT, CLIENTS, SEED)
    balances = reference(transactions)[0].balances()
    expected = io.StringIO()
    write_accounts(balances, expected)
    log_dir, state_dir = tmp_path / "log", tmp_path / "state"
    produce_file(log_dir, transactions)

    first = start(log_dir, state_dir)
    handled = kill_once_handled(first, COUNT // 3)
    assert handled < COUNT, "killed too late to be mid-file"

    second = start(log_dir, state_dir)
    output, errors = second.communicate(timeout=300)
    assert second.returncode == 0, errors[-2000:]
    assert output == expected.getvalue()
    # The accounts' rejected counts too (not in the CSV): a replayed deposit applied twice
    # would be rejected as a duplicate, leaving the balance right and the count off.
    assert not differences(balances, run(log_dir, state_dir, idle_timeout=0.5))
