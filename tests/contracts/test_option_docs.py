"""The options and command-line reference pages stay in step with the code they come from:
ConsumerConfig's fields and laneway run's own settings (the service's and the sources')."""

from __future__ import annotations

import dataclasses

from checkout import ROOT

from laneway.config import option_specs
from laneway.config.reference import option_groups, options_page
from laneway.service.settings import service_settings_table, service_specs


def test_the_options_page_holds_the_generated_reference() -> None:
    page = (ROOT / "docs" / "reference" / "options.md").read_text()
    generated = page.split("<!-- generated: options -->\n", 1)[1]
    assert generated.split("\n<!-- end: options -->", 1)[0] == options_page().rstrip("\n"), (
        "docs/reference/options.md is stale: run .venv/bin/python scripts/generate-docs"
    )


def test_every_option_has_one_entry_in_the_section_of_its_group() -> None:
    page = options_page()
    sections = page.split("\n## ")
    groups = option_groups()
    assert len(sections) == len(groups) and page.startswith("## ")
    placed: list[str] = []
    for section, group in zip(sections, groups, strict=True):
        own = [f.name for f in dataclasses.fields(group) if f.name in option_specs()]
        assert own, group
        entries = [line[5:-1] for line in section.splitlines() if line.startswith("### `")]
        assert entries == own, (group, entries)
        assert f"Module `{group.__module__}`" in section
        placed += entries
    assert sorted(placed) == sorted(option_specs())


def test_the_command_line_page_holds_the_generated_service_settings() -> None:
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    generated = page.split("<!-- generated: service settings -->\n", 1)[1]
    table = generated.split("\n<!-- end: service settings -->", 1)[0]
    assert table == service_settings_table(), (
        "docs/reference/cli.md is stale: run .venv/bin/python scripts/generate-docs"
    )
    for name in service_specs():
        if name not in ("handler", "topics"):
            assert f"`--{name.replace('_', '-')}" in table, name
