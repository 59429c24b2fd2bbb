"""The options reference page stays in step with ConsumerConfig, its one source."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from laneway.config import option_specs
from laneway.config.reference import option_groups, options_page

ROOT = Path(__file__).resolve().parent.parent


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
