"""``laneway run MODULE:ATTR``: the handler is imported by name, and a name that is not
there says so, with the closest one the module has."""

from __future__ import annotations

from pathlib import Path

import pytest

from laneway.errors import HandlerImportError
from laneway.service.handler_ref import load_handler


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "refs_app.py").write_text("def handle(message):\n    pass\n\nLIMIT = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "refs_app"


def test_a_handler_is_found_by_module_and_attribute(app: str) -> None:
    assert load_handler(f"{app}:handle").__name__ == "handle"


def test_a_misspelt_attribute_names_the_closest_one(app: str) -> None:
    with pytest.raises(HandlerImportError) as raised:
        load_handler(f"{app}:handel")
    assert "has no attribute 'handel'" in str(raised.value)
    assert str(raised.value).endswith("(did you mean 'handle'?)")
    with pytest.raises(HandlerImportError) as unlike:
        load_handler(f"{app}:process_orders")
    assert "did you mean" not in str(unlike.value)
