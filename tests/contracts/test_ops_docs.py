"""The command-line reference and the operating guide speak of every option the operator's
commands have, and the commands' help states the exit codes."""

from __future__ import annotations

import click
import pytest
from checkout import ROOT

from laneway.ops.dlq.command import dlq
from laneway.ops.lag import lag
from laneway.ops.state import state
from laneway.ops.top.command import top

COMMANDS = {
    "lag": lag,
    "top": top,
    "dlq list": dlq.commands["list"],  # type: ignore[attr-defined]
    "dlq show": dlq.commands["show"],  # type: ignore[attr-defined]
    "dlq replay": dlq.commands["replay"],  # type: ignore[attr-defined]
    "state get": state.commands["get"],  # type: ignore[attr-defined]
    "state dump": state.commands["dump"],  # type: ignore[attr-defined]
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_is_in_the_command_line_reference(name: str) -> None:
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    section = page.split(f"## `laneway {name.split()[0]}`", 1)[1].split("\n## ", 1)[0]
    options = [
        option
        for param in COMMANDS[name].params
        if isinstance(param, click.Option)
        for option in param.opts
    ]
    missing = [option for option in options if option not in section]
    assert not missing, f"laneway {name}: {missing} not in docs/reference/cli.md"


def test_the_help_states_the_exit_codes() -> None:
    for command in (lag, top, dlq, state):
        assert "Exit codes: 0 done; 1 unexpected error; 2 bad" in (command.help or "")


def test_the_operating_guide_uses_each_command() -> None:
    guide = (ROOT / "docs" / "guides" / "operating.md").read_text()
    for used in ("laneway lag", "laneway top", "laneway dlq list", "laneway dlq show"):
        assert used in guide
    assert "laneway dlq replay" in guide and "--dry-run" in guide
