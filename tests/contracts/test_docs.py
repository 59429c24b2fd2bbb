"""The documentation's own promises: no link leaves the repository, the README's links
resolve, and the first handler of the getting-started page runs as the page says."""

from __future__ import annotations

import contextlib
import io
import re

from checkout import ROOT

PAGES = [
    ROOT / "README.md",
    ROOT / "CHANGELOG.md",
    ROOT / "mkdocs.yml",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "examples").rglob("README.md")),
]


def test_no_link_leaves_the_repository() -> None:
    outside = [
        f"{page.relative_to(ROOT)}: {url}"
        for page in PAGES
        for url in re.findall(r"https?://[^\s)>\]]+", page.read_text())
    ]
    assert not outside, outside


def test_the_readme_links_to_files_of_the_repository() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    assert "docs/index.md" in links and "docs/getting-started.md" in links
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing, missing


def test_the_getting_started_handler_runs_as_the_page_says() -> None:
    page = (ROOT / "docs" / "getting-started.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    [first_handler] = [block for block in blocks if "laneway.EmbeddedLog()" in block]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(first_handler, "getting-started.md", "exec"), {})
    expected = re.search(r"print\(.*\)\s+# (.*)\n", first_handler)
    assert expected is not None
    assert printed.getvalue().strip() == expected.group(1).strip()
