"""The public contract page and the API page stay in step with ``laneway.__all__``.

Every public name is on one of the two pages, and every ``laneway.X...`` the pages name
exists: an attribute of ``laneway`` (or of what it names), or a module that imports.
Dead-letter header names (``laneway.error.type``, ...) are record headers, not Python
names: they are taken from the code that writes them, and the contract page must list
each one.
"""

from __future__ import annotations

import importlib
import re
from functools import cache
from types import ModuleType

from checkout import ROOT

import laneway
from laneway.control.dead_letters.router import dead_letter_headers
from laneway.types import Failure, Message

CONTRACT = ROOT / "docs" / "reference" / "contract.md"
API = ROOT / "docs" / "reference" / "api.md"

REFERENCE = re.compile(r"(?<![\w.\-/])laneway(?:\.[A-Za-z_]\w*)+")
"""A dotted name under ``laneway`` anywhere on a page (prose, code spans, code blocks,
cross-reference targets and ``:::`` entries alike)."""


def public_names() -> list[str]:
    return [name for name in laneway.__all__ if name != "__version__"]


@cache
def header_names() -> frozenset[str]:
    """The headers laneway adds to a dead-letter record, from the code that adds them."""
    failure = Failure(Message("t", 0, 0, None, b""), "ValueError", "bad", 1, "Traceback")
    return frozenset(name for name, _ in dead_letter_headers(failure))


def code_of(page: str) -> str:
    """The page's code: fenced blocks, inline code spans and cross-reference targets."""
    blocks = re.findall(r"^```.*?^```", page, flags=re.DOTALL | re.MULTILINE)
    prose = re.sub(r"^```.*?^```", "", page, flags=re.DOTALL | re.MULTILINE)
    spans = re.findall(r"`[^`\n]+`", prose)
    targets = re.findall(r"\]\[([\w.]+)\]", prose)
    return "\n".join([*blocks, *spans, *targets])


def resolve(reference: str) -> object:
    """What ``reference`` names: attributes from ``laneway`` down, importing a submodule
    where a module has no such attribute yet (``laneway.kafka`` is not loaded by
    ``import laneway``). Raises AttributeError or ImportError when nothing is there."""
    parts = reference.split(".")
    found: object = importlib.import_module(parts[0])
    for depth in range(2, len(parts) + 1):
        try:
            found = getattr(found, parts[depth - 1])
        except AttributeError:
            if not isinstance(found, ModuleType):
                raise
            found = importlib.import_module(".".join(parts[:depth]))
    return found


def test_every_public_name_is_on_the_contract_or_the_api_page() -> None:
    entries = set(re.findall(r"^::: laneway\.(\w+)\s*$", API.read_text(), flags=re.MULTILINE))
    contract = code_of(CONTRACT.read_text())
    missing = [
        name
        for name in public_names()
        if name not in entries and not re.search(rf"\b{re.escape(name)}\b", contract)
    ]
    assert not missing, (
        f"laneway.__all__ names {missing} that neither docs/reference/contract.md (in code) "
        "nor docs/reference/api.md (a '::: laneway.NAME' entry) documents"
    )


def test_every_laneway_name_the_pages_give_exists() -> None:
    unresolved = []
    for page in (CONTRACT, API):
        for reference in sorted(set(REFERENCE.findall(page.read_text())) - header_names()):
            try:
                resolve(reference)
            except (AttributeError, ImportError) as error:
                unresolved.append(f"{page.relative_to(ROOT)}: {reference} ({error})")
    assert not unresolved, (
        "these pages name laneway objects that do not exist (a planned or removed name?): "
        + "; ".join(unresolved)
    )


def test_the_resolver_refuses_what_does_not_exist() -> None:
    assert resolve("laneway.Consumer.run") is laneway.Consumer.run
    assert isinstance(resolve("laneway.kafka"), ModuleType)
    for absent in ("laneway.EmbeddedSource", "laneway.codecs", "laneway.Consumer.lag"):
        try:
            resolve(absent)
        except (AttributeError, ImportError):
            continue
        raise AssertionError(f"{absent} resolved")


def test_the_contract_page_lists_every_dead_letter_header() -> None:
    page = CONTRACT.read_text()
    missing = sorted(name for name in header_names() if f"`{name}`" not in page)
    assert header_names() and not missing, missing
