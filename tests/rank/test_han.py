"""native_han (commbench/rank/han.py): where it cannot run, the reason, the same on every rank; across
emulated nodes it runs (tests/run/test_emulate_mpi.py)."""

import os
import subprocess
import sys

from commbench.binaries import find_binary
from commbench.errors import OK
from commbench.rank.han import HAN_COLLECTIVES, han_target
from conftest import ROOT, load_run, needs_mpirun

# Each rank: MPI's thread level before and after the duplicate (mpi4py starts MPI_THREAD_MULTIPLE), and an
# all-reduce of rank + 1 on the duplicate.
DUP = """
from mpi4py import MPI
from commbench.kernels import mpi_loop
before = MPI.Query_thread()
dup = mpi_loop.han_dup(MPI.COMM_WORLD)
print(before, MPI.Query_thread(), dup.allreduce(MPI.COMM_WORLD.Get_rank() + 1), dup.Get_size(), flush=True)
dup.Free()
"""


def test_other_backends_and_collectives_coll_han_lacks_are_refused():
    han = object()  # the communicator, as open_han gives it
    assert han_target(han, "mpi", "all_reduce") is han
    assert han_target(han, "gloo", "all_reduce") == "native_han is Open MPI's coll/han: the mpi backend only, not gloo"
    assert han_target(han, "mpi", "reduce_scatter") == ("Open MPI's coll/han has no reduce_scatter (it would run "
                                                        "coll/tuned's, as native)")
    assert han_target("why", "mpi", "all_gather") == "why"  # open_han's reason
    assert "reduce_scatter" not in HAN_COLLECTIVES and "all_reduce" in HAN_COLLECTIVES


@needs_mpirun
def test_on_one_node_it_is_skipped_and_native_runs(job, tmp_path):
    out = tmp_path / "run"
    job("run", "-n", 2, "--backend", "mpi", "-a", "native,native_han", "-c", "all_reduce,reduce_scatter",
        "--sizes", "1K", "--iters", 2, "-w", 0, "--out", out, "--quiet", check_rc=OK, timeout=300)
    rows, _, meta = load_run(out)
    assert set(rows.algorithm) == {"native"} and len(rows) == 4 and (rows.wrong == 0).all()
    reasons = {(s["collective"], s["reason"]) for s in meta["skipped"] if s["algorithm"] == "native_han"}
    assert reasons == {("all_reduce", "native_han is Open MPI's coll/han, which works across nodes: these ranks are on "
                                      "one node, where it leaves the calls to coll/tuned (native)"),
                       ("reduce_scatter", "Open MPI's coll/han has no reduce_scatter (it would run coll/tuned's, as "
                                          "native)")}
    assert len(meta["skipped"]) == 4


@needs_mpirun
def test_the_duplicate_leaves_mpis_thread_level_and_works(job):
    """MPI_T starts at MPI's own thread level: Open MPI takes MPI_T_init_thread's as the process's, and
    MPI_THREAD_SINGLE there would turn the pipelined algorithms' threads into races."""
    root = ["--allow-run-as-root", "--oversubscribe"] if os.geteuid() == 0 else []
    proc = subprocess.run([find_binary("mpirun"), *root, "-n", "2", sys.executable, "-c", DUP], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    lines = sorted(proc.stdout.split("\n")[:-1])
    assert lines == ["3 3 3 2", "3 3 3 2"], proc.stdout  # MPI_THREAD_MULTIPLE is 3 in Open MPI
