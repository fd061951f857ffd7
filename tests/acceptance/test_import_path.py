"""Hostile inputs, class 15 (issue 67's import path): modules named like every dependency of commbench
(and commbench itself, and Python's site hooks) planted where the user types the command, or in a
received results folder resumed from inside it. A rank imports only what it was installed with, for
every launcher and backend: none of them runs (the contract: tests/hostile_contract.py, whose command
is started as the `commbench` script is, with the current folder off the parent's import path;
besides it, no planted module imported by any process)."""

import sys

import pytest

from hostile_contract import case, meets_contract
from hostile_fixtures import no_marker, params, resumable
from other_user import planted_modules
from commbench.errors import OK

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="Python 3.10 ignores PYTHONSAFEPATH: the current "
                                "folder is first on a rank's import path there (docs/explanation/trust.md)")
SMALL = "-n 2 -c all_reduce --sizes 8 --iters 5 --warmup 1"


def mk(name, argv, *steps, outputs=("R",), note="", cwd=""):
    return case(15, name, argv, *steps, planted_modules(cwd or "."), expect=(OK,), outputs=outputs,
                checks=(no_marker,), note=note, cwd=cwd)


CASES = [
    mk("mpi-through-mpirun", f"run {SMALL} --backend mpi --out R"),
    mk("gloo-through-the-local-launcher", f"run {SMALL} --backend gloo --launcher local --out R"),
    mk("gloo-through-torchrun", f"run {SMALL} --backend gloo --launcher torchrun --out R",
       note="torchrun's own process starts as python -m torch.distributed.run"),
    mk("gloo-through-mpirun", f"run {SMALL} --backend gloo --launcher mpirun --out R"),
    mk("workload", "workload moe_ep8 -n 2 --scale 0.001 --backend mpi --iters 5 --warmup 1 --out R"),
    mk("ab", "ab -n 2 -c all_reduce --sizes 8 --backend mpi --budget 5 --out R"),
    mk("resume-from-inside-a-received-folder", "run --resume .", *resumable("R"), cwd="R",
       outputs=("R/results.csv", "R/samples.parquet", "R/samples.csv", "R/run.json", "R/ranks.csv", "R/.lock",
                "R/.spec.json"),
       note="cd FOLDER && commbench run --resume .: the folder's own files are no code"),
]


@pytest.mark.parametrize("c", params(CASES, launching=True))
def test_import_path(c, tmp_path, job):
    meets_contract(c, tmp_path)
