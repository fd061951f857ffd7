"""The package's layers (docs, Layout of the code): every import between commbench's packages and top-level modules
points down LAYERS, and no module imports itself back through others. Imports inside functions count
(they are how a cycle hides); imports under `if TYPE_CHECKING:` do not (they never run)."""

import ast
import graphlib

import pytest

from conftest import ROOT

PACKAGE = ROOT / "commbench"

# Top to bottom: each entry may import the entries below it, never one above. A package stands for all its modules.
LAYERS = (
    "__main__", "cli",  # the commands: a thin layer over the Python API
    "workload",  # a training step's traffic: configs, traces, its own measurement and prediction
    "run",  # the parent: launch, turns of ab, the sweep's session, the jobs of --repeat
    "analysis",  # the readers' results: compare, verdicts, stragglers, the model, the report
    "presentation",  # what a person reads: the terminal, a sweep's tables, the progress of run, ab and check
    "rank",  # the rank process: worker, harness, turns, the check's ranks
    "plan",
    "folder",  # the results folder: its schema and files, written, locked, placed, resumed and read
    "spec", "spec_checks", "spec_text", "options",  # what a sweep asks for (spec_checks: its validation)
    "algorithms",  # commbench's own algorithms, on a backend's communicator
    "backends",  # the backends' registry and their communicators
    "kernels",  # the native code: cuda/ built for the host or a GPU, the C MPI loop, the floor probe
    "runinfo",  # run.json's facts of the machine, the versions and the launch
    "machine",  # machine facts: placement, hardware, background load, power, traffic counters
    "collectives",  # the collectives' specs and exact input patterns
    "slurm", "binaries", "sources", "split", "trees", "timers", "tuning", "events", "library_calls", "fabric_rule",
    "metrics", "dtypes", "plugins", "interrupts", "errors",
    "",  # commbench/__init__.py: the version
)


def _runtime_imports(tree):
    """The import statements that run: all but those under `if TYPE_CHECKING:`."""
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
            for child in node.body for n in ast.walk(child)}
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in skip]


def _modules() -> dict[str, object]:
    """Dotted module name -> its path, for every module of the package."""
    out = {}
    for p in PACKAGE.rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _edges(mods: dict) -> dict[str, set]:
    """Module -> the package modules it imports (relative imports resolved; `from pkg import name` is the
    module pkg.name where there is one, else pkg)."""
    def known(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    edges = {}
    for m, p in mods.items():
        here = m if p.name == "__init__.py" else m.rpartition(".")[0]
        found = set()
        for node in _runtime_imports(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here
                    for _ in range(node.level - 1):
                        up = up.rpartition(".")[0]
                    base = f"{up}.{base}" if base else up
                if base.split(".")[0] == "commbench":
                    found |= {known(f"{base}.{a.name}") for a in node.names}
            else:
                found |= {known(a.name) for a in node.names if a.name.split(".")[0] == "commbench"}
        edges[m] = found - {m, ""}
    return edges


def _layer(module: str) -> str:
    """The LAYERS entry a module belongs to: its package below commbench, or the top-level module itself."""
    return module.split(".")[1] if "." in module else ""


MODULES = _modules()
EDGES = _edges(MODULES)


def test_every_package_and_top_level_module_has_its_layer():
    assert len(MODULES) > 150 and "commbench.folder.write" in MODULES
    assert sorted({_layer(m) for m in MODULES} - set(LAYERS)) == []
    assert sorted(set(LAYERS) - {_layer(m) for m in MODULES}) == []


def _upward(edges) -> list[str]:
    rank = {name: i for i, name in enumerate(LAYERS)}
    return [f"{m} -> {t}" for m, targets in sorted(edges.items()) for t in sorted(targets)
            if _layer(m) != _layer(t) and rank[_layer(t)] < rank[_layer(m)]]


def test_every_import_between_layers_points_down():
    assert _upward(EDGES) == []


def test_no_module_imports_itself_back():
    graphlib.TopologicalSorter(EDGES).prepare()  # raises CycleError naming the cycle


def test_the_checks_see_upward_imports_cycles_and_skip_type_checking_only(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from typing import TYPE_CHECKING\nimport commbench.runinfo\ndef f():\n    from commbench import run\n"
                   "if TYPE_CHECKING:\n    from commbench.cli import app\n")
    found = [n for n in _runtime_imports(ast.parse(bad.read_text())) if isinstance(n, ast.ImportFrom)]
    assert [n.module for n in found] == ["typing", "commbench"]
    assert _upward({"commbench.rank.worker": {"commbench.run.launch", "commbench.plan"}}) == [
        "commbench.rank.worker -> commbench.run.launch"]
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter({"a": {"b"}, "b": {"a"}}).prepare()
