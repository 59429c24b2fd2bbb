"""Rules about the test files that the tests enforce: pytest imports each test module by its
basename (the folders have no __init__.py), so two test files of one name anywhere under
tests/ make a whole run fail with "import file mismatch" while each passes alone."""

from __future__ import annotations

from collections import defaultdict

from checkout import ROOT


def test_every_test_file_has_a_basename_of_its_own() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for path in (ROOT / "tests").rglob("test_*.py"):
        places[path.name].append(str(path.relative_to(ROOT)))
    assert {name: found for name, found in places.items() if len(found) > 1} == {}
