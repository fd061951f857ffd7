"""pytest imports test files by basename (prepend mode), so two test_x.py anywhere under tests/
clash as soon as both import: e.g. a GPU test whose importorskip starts passing."""

from conftest import ROOT


def test_test_file_basenames_are_unique():
    names = sorted(p.name for p in (ROOT / "tests").rglob("test_*.py"))
    assert len(names) > 20
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
