"""A griffe extension: laneway's docstrings, written with reStructuredText roles, as Markdown.

The code's docstrings cross-reference with Sphinx roles (``:class:`~laneway.x.Y```) and
introduce code blocks with a trailing ``::``; mkdocstrings renders Markdown. This turns a
role into an *optional* autorefs link (a link when the target is in the API reference,
plain code otherwise, never a build warning: docstrings may name internals the reference
leaves out) and ``::`` into ``:`` (the indented block after it is already a Markdown code
block). Hand-written pages use ordinary ``[text][laneway.Name]`` links, which the strict
build checks.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|meth|func|mod|data|attr|exc|obj):`(~?)([\w.]+)(\(\))?`")
LITERAL_BLOCK = re.compile(r"::\n\n", re.MULTILINE)
CALLABLE_ROLES = (":meth:", ":func:")


class RestRoles(griffe.Extension):
    """Rewrites each docstring once it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is None:
            return
        text = obj.docstring.value

        def link(match: re.Match[str]) -> str:
            short, target = match.group(1) == "~", match.group(2)
            shown = target.rsplit(".", 1)[-1] if short else target
            if match.group(0).startswith(CALLABLE_ROLES) or match.group(3):
                shown += "()"
            identifier = resolve(obj, target)
            return f'<autoref identifier="{identifier}" optional><code>{shown}</code></autoref>'

        text = ROLE.sub(link, text)
        text = LITERAL_BLOCK.sub(":\n\n", text)
        obj.docstring.value = text


def resolve(obj: griffe.Object, target: str) -> str:
    """The full path a role's ``target`` names: as written when it is dotted from the
    package, else the first enclosing scope of ``obj`` (class, then module) that has it."""
    if target.startswith("laneway"):
        return target
    first = target.split(".", 1)[0]
    scope: griffe.Object | None = obj if obj.is_class or obj.is_module else obj.parent
    while scope is not None:
        if first in scope.members:
            return f"{scope.path}.{target}"
        scope = scope.parent
    return target
