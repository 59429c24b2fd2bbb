"""The ledger as a CSV tool (``python examples/ledger ...``): parsing, the command, stress.

The tool runs as the user runs it, as a subprocess, on files written here; its accounts
must equal those of the plain sequential loop (``tool.sequential``) byte for byte, on
every engine, and every malformed row must be reported with its line number and skipped.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from checkout import ROOT

EXAMPLE = ROOT / "examples" / "ledger"
sys.path.insert(0, str(EXAMPLE))

from csv_input import numbered_lines, parse_block, parse_row, read_rows  # noqa: E402
from tool import sequential, write_accounts  # noqa: E402

CSV = """type, client, tx, amount
deposit, 1, 1, 1.0
deposit,2,2,2.5
withdrawal, 1, 3, 0.5001
dispute, 2, 2,
deposit, 1, 4, 1.23456
refund, 1, 5, 1.0
deposit, 70000, 6, 1.0

withdrawal, 2, 7
chargeback, 2, 2,
resolve,1,1
deposit,1,8,\t2.0000\t
"""
"""Lines 6, 7, 8 and 10 are malformed: five decimals, an unknown type, a client above
u16, a withdrawal without an amount. Line 9 is blank (skipped silently); line 12 is a
rejection (resolving an undisputed deposit), not a malformed row."""
EXPECTED = """client,available,held,total,locked
1,2.4999,0.0000,2.4999,false
2,0.0000,0.0000,0.0000,true
"""


def run_tool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_rows_parse_with_whitespace_and_four_places() -> None:
    assert parse_row(" deposit ,  7 , 3 , 12.3456 \n") == (0, 7, 3, 123_456)
    assert parse_row("dispute,7,3,") == (2, 7, 3, 0)
    assert parse_row("resolve,7,3") == (3, 7, 3, 0)
    for bad in (
        "deposit,1,2,1.23456",
        "deposit,1,2,",
        "deposit,1,2,0",
        "deposit,1,2,1.",
        "deposit,1,2,-1",
        "dispute,1,2,5",
        "deposit,65536,2,1",
        "deposit,1,4294967296,1",
        "deposit,1_0,2,1",
        "deposit,1,2,1,4",
    ):
        assert isinstance(parse_row(bad), str), bad


def test_a_block_parses_exactly_like_line_by_line() -> None:
    lines = io.StringIO(CSV).readlines()
    block = "".join(f"{number}\t{line}" for number, line in numbered_lines(lines))
    rows, malformed = parse_block(block)
    reported: list[int] = []
    expected = [
        value for row in read_rows(lines, lambda n, *_: reported.append(n)) for value in row
    ]
    assert rows == expected
    assert [number for number, _, _ in malformed] == reported == [6, 7, 8, 10]
    good = "".join(f"{n}\t{line}" for n, line in enumerate(("deposit, 1, 1, 2.5\n",) * 3, 2))
    assert parse_block(good) == ([0, 1, 1, 25_000] * 3, [])


def test_the_command_reports_malformed_rows_and_matches_the_sequential_run(
    tmp_path: Path,
) -> None:
    path = tmp_path / "transactions.csv"
    path.write_text(CSV, encoding="utf-8")
    reference = io.StringIO()
    write_accounts(sequential(io.StringIO(CSV), lambda *_: None), reference)
    assert reference.getvalue() == EXPECTED
    for engine in ("sync", "process"):
        done = run_tool(str(path), "--engine", engine, "--partitions", "3", "--batch", "2")
        assert done.returncode == 0, done.stderr
        assert done.stdout == EXPECTED
        for number in (6, 7, 8, 10):
            assert f"transactions.csv:{number}: skipped" in done.stderr
        assert "4 malformed row(s) skipped" in done.stderr


def test_generate_is_seeded_and_every_engine_agrees_with_the_sequential_run(
    tmp_path: Path,
) -> None:
    generated = run_tool("--generate", "3000", "--seed", "5", "--clients", "50")
    assert generated.returncode == 0, generated.stderr
    assert (
        generated.stdout == run_tool("--generate", "3000", "--seed", "5", "--clients", "50").stdout
    )
    lines = generated.stdout.splitlines(keepends=True)
    assert lines[0] == "type,client,tx,amount\n" and len(lines) == 3001
    kinds = {line.split(",")[0] for line in lines[1:]}
    assert {"deposit", "withdrawal", "dispute", "resolve", "chargeback"} <= kinds
    path = tmp_path / "generated.csv"
    path.write_text(generated.stdout, encoding="utf-8")
    reference = io.StringIO()
    write_accounts(sequential(lines, lambda *_: None), reference)
    for engine in ("thread", "async"):
        done = run_tool(str(path), "--engine", engine, "--batch", "7")
        assert done.returncode == 0, done.stderr
        assert done.stdout == reference.getvalue()


def test_bad_arguments_are_named() -> None:
    assert "missing" in run_tool().stderr
    assert "--batch" in run_tool("x.csv", "--batch", "0").stderr
    missing = run_tool("/nonexistent/transactions.csv")
    assert missing.returncode == 2 and "cannot read" in missing.stderr


def test_stress_checks_every_row_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "stress.json"
    done = run_tool("stress", "--counts", "100,2000", "--engines", "sync,async", "--json", str(out))
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text(encoding="utf-8"))["rows"]
    assert [(r["count"], r["engine"]) for r in rows] == [
        (count, engine) for count in (100, 2000) for engine in ("sequential", "sync", "async")
    ]
    assert all(row["check"] == "PASS" for row in rows)
    assert all(row["process_mb"] > 10 for row in rows if row["engine"] != "sequential")
    assert "Transactions Count" in done.stdout


@pytest.mark.parametrize("engine", ["sync", "process"])
def test_an_empty_file_gives_no_accounts(tmp_path: Path, engine: str) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("type,client,tx,amount\n", encoding="utf-8")
    done = run_tool(str(path), "--engine", engine)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "client,available,held,total,locked\n"
