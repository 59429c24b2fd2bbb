"""A MkDocs hook: the pages under ``docs/examples/`` include their example's README
(``--8<-- "examples/<name>/README.md"``), which links the documentation's files the way
GitHub reads it, from ``examples/<name>/`` (``../../docs/images/x.png``). On the site the
same file is ``../images/x.png``, so this hook includes those READMEs itself, with such
links rewritten, before MkDocs checks the links (the snippets extension would include them
after, unchanged)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = re.compile(r'^--8<-- "(examples/[\w.-]+/README\.md)"$', re.MULTILINE)
FROM_AN_EXAMPLE = "](../../docs/"
FROM_ITS_PAGE = "](../"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    root = Path(config["config_file_path"]).parent

    def include(found: re.Match[str]) -> str:
        text = (root / found[1]).read_text(encoding="utf-8")
        return text.replace(FROM_AN_EXAMPLE, FROM_ITS_PAGE)

    return README.sub(include, markdown)
