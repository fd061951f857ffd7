"""The package says where code runs (README, Layout): what runs inside a rank (rank/) and what every
side shares (collectives/, algorithms/, plan.py and the top-level modules) import nothing from the
parent (run/), the readers (analysis/), the commands (cli/) or the workload tool (workload/)."""

import ast

import pytest

from conftest import ROOT

PACKAGE = ROOT / "commbench"
UPPER = ("commbench.run", "commbench.analysis", "commbench.cli", "commbench.workload")


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names)


SHARED = sorted([*PACKAGE.glob("rank/**/*.py"), *PACKAGE.glob("collectives/*.py"), *PACKAGE.glob("algorithms/*.py"),
                 *(p for p in PACKAGE.glob("*.py") if p.name != "__main__.py")])


def test_the_shared_modules_are_found_and_an_upward_import_is_seen(tmp_path):
    assert len(SHARED) > 40 and PACKAGE / "collectives" / "broadcast.py" in SHARED
    bad = tmp_path / "bad.py"
    bad.write_text("import commbench.runinfo\nfrom commbench import run\nfrom commbench.analysis.load import x\n")
    assert [m for m in _imports(bad) if any(m == u or m.startswith(u + ".") for u in UPPER)] == [
        "commbench.run", "commbench.analysis.load", "commbench.analysis.load.x"]


@pytest.mark.parametrize("path", SHARED, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_rank_and_shared_code_imports_nothing_from_the_parent_or_the_readers(path):
    upper = [m for m in _imports(path) if any(m == u or m.startswith(u + ".") for u in UPPER)]
    assert not upper, upper
