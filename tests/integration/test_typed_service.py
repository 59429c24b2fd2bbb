"""``laneway run --value-deserializer``: typed messages from the command line, the
environment and the TOML file, on a durable embedded log, through the real CLI.

The types come from the working directory (``shop/models.py``), imported like the
handler: ``json:shop.models:Order`` decodes values into ``Order``; a record that does
not decode is dead-lettered and the run goes on; a spec that names nothing is one line
and exit code 2.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from checkout import ROOT

from laneway.sources.embedded.log import EmbeddedLog

MODELS = """
import msgspec

class Order(msgspec.Struct):
    id: int
    amount: float
"""

HANDLERS = """
import os, signal
import laneway
from shop.models import Order

def handle(message: laneway.Message[Order]) -> None:
    with open("handled", "a") as out:
        out.write(f"{type(message.value).__name__} {message.value.id}\\n")
    if message.value.id == 4:
        os.kill(os.getpid(), signal.SIGTERM)  # drain, commit, exit 0
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "models.py").write_text(MODELS)
    (tmp_path / "shop" / "handlers.py").write_text(HANDLERS)
    log = EmbeddedLog(tmp_path / "log")
    log.create_topic("orders", partitions=1)
    for i in range(5):
        if i == 2:
            log.produce("orders", b'{"id": 2}', b"k")  # no amount: dead-lettered
        log.produce("orders", msgspec.json.encode({"id": i, "amount": 1.0}), b"k")
    log.close()
    return tmp_path


def laneway_run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "laneway", "run", "shop.handlers:handle", *args],
        cwd=cwd,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("LANEWAY_VALUE")},
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


SOURCE = ("--log-dir", "log", "--topic", "orders", "--group", "shop", "--engine", "sync")


def test_value_deserializer_from_a_flag_decodes_into_the_type(app: Path) -> None:
    code, output = laneway_run(app, *SOURCE, "--value-deserializer", "json:shop.models:Order")
    assert code == 0, output
    assert (app / "handled").read_text().split("\n")[:-1] == [f"Order {i}" for i in range(5)]
    assert (
        "could not decode the value: ValidationError: Object missing required field `amount`"
        in output
    )
    log = EmbeddedLog(app / "log")
    try:
        assert log.end_offsets("orders.dlq") == {0: 1}
    finally:
        log.close()


def test_value_deserializer_from_the_environment_and_the_file(app: Path) -> None:
    env = {"LANEWAY_VALUE_DESERIALIZER": "json:shop.models:Order"}
    code, output = laneway_run(app, *SOURCE, "--print-config", env=env)
    assert code == 0, output
    [line] = [row for row in output.splitlines() if row.startswith("value_deserializer")]
    assert "serde.json(shop.models.Order)" in line and line.endswith("(env)")
    (app / "laneway.toml").write_text('value_deserializer = "json:shop.models:Order"\n')
    code, output = laneway_run(app, *SOURCE, "--config", "laneway.toml", "--print-config")
    [line] = [row for row in output.splitlines() if row.startswith("value_deserializer")]
    assert line.endswith("(file)"), output
    code, output = laneway_run(app, *SOURCE, "--config", "laneway.toml")
    assert code == 0, output
    assert (app / "handled").read_text().count("Order") == 5


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("json:shop.models:Nope", "value_deserializer: module 'shop.models' has no attribute"),
        ("yaml", "value_deserializer='yaml' is not valid"),
    ],
)
def test_a_spec_that_names_nothing_is_one_line_and_exit_2(app: Path, spec: str, error: str) -> None:
    code, output = laneway_run(app, *SOURCE, "--value-deserializer", spec)
    assert code == 2, output
    assert error in output
    assert "Traceback" not in output
