"""The C timing loop of native MPI points (commbench/kernels/mpi_loop.c, commbench.kernels.mpi_loop):
built by the MPI's mpicc, it calls what mpi4py calls (byte for byte), every native MPI row says
`timer native`, run.json records each loop's floor, and where it cannot be built (no mpicc, a
failing one) the Python loop times the points and the run says why in one line.
"""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT, commbench, load_run, needs_mpirun
from commbench.errors import BAD_INPUT, OK
from commbench.collectives import COLLECTIVES

TINY = ["-c", "all_reduce,all_gather,reduce_scatter", "-b", "8", "-e", "512", "-f", "8", "--iters", "20", "-w", "2"]


def _mpirun(n: int, script: str) -> subprocess.CompletedProcess:
    from commbench.binaries import find_binary

    return subprocess.run([find_binary("mpirun"), "--allow-run-as-root", "--oversubscribe", "-n", str(n),
                           sys.executable, str(ROOT / "tests" / "scripts" / script)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


@needs_mpirun
def test_the_c_loop_calls_what_mpi4py_calls(job):
    """3 ranks: every collective x MPI dtype x op x buffer mode x 4 sizes, one call through the C
    loop and one through mpi4py, outputs compared byte for byte."""
    proc = _mpirun(3, "mpi_loop_vs_mpi4py.py")
    assert proc.returncode == OK, proc.stdout[-3000:] + proc.stderr[-3000:]
    # ten collectives: 2790 = each one's dtypes x ops x 2 buffer modes x 4 sizes, less the
    # combinations MPI refuses or that are empty (all_to_allv: out of place, 8 and 36 B below 16 B a block),
    # on each of the 3 ranks (a count that changes means a case was added or silently dropped)
    assert "compared 2790 results, 0 differ, timer native" in proc.stdout, proc.stdout
    assert f"collectives {','.join(sorted(COLLECTIVES))}" in proc.stdout, proc.stdout


@needs_mpirun
def test_native_rows_are_timed_in_c_and_run_json_has_the_floors(job, tmp_path):
    out = tmp_path / "r"
    commbench("run", "-n", "2", "--backend", "mpi", *TINY, "--out", out, check_rc=OK)
    rows, _, meta = load_run(out)
    assert len(rows) == 18 and set(rows["timer"]) == {"native"} and (rows["wrong"] == 0).all()
    floor = meta["harness_floor_us"]
    assert set(floor) == {"python", "native"} and 0 < floor["native"] < floor["python"] < 5, floor
    assert meta["versions"]["mpi_thread_level"] == "funneled"  # no algorithm calls MPI from several threads
    assert "\x00" not in meta["versions"]["mpi_library"]


@needs_mpirun
def test_hierarchical_asks_mpi_for_several_threads(job, tmp_path):
    """Its pipelined all-reduce calls MPI from a thread per level: MPI_THREAD_MULTIPLE."""
    out = tmp_path / "r"
    commbench("run", "-n", "2", "--backend", "mpi", "-a", "hierarchical", "--ranks-per-node", "1",
              "-c", "all_reduce", "--sizes", "4M", "--iters", "3", "--out", out, check_rc=OK)
    rows, _, meta = load_run(out)
    assert meta["versions"]["mpi_thread_level"] == "multiple" and set(rows["timer"]) == {"python"}


@needs_mpirun
def test_timer_python_forces_the_python_loop(job, tmp_path):
    out = tmp_path / "r"
    proc = commbench("run", "-n", "2", "--backend", "mpi", *TINY, "--timer", "python", "--out", out, check_rc=OK)
    assert "warning" not in proc.stdout + proc.stderr
    assert set(load_run(out)[0]["timer"]) == {"python"}


@needs_mpirun
def test_a_failing_mpicc_leaves_the_python_loop_and_one_line(job, tmp_path):
    out = tmp_path / "r"
    proc = commbench("run", "-n", "2", "--backend", "mpi", *TINY, "--out", out, check_rc=OK,
                     env={"MPICC": "false", "COMMBENCH_CACHE": str(tmp_path / "cache")})
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "C timing loop" in ln]
    assert lines == ["warning: the C timing loop (mpicc mpi_loop.c) failed (false exited 1, printing nothing): "
                     "native MPI points are timed by the Python loop (timer column: python)"], proc.stderr
    rows = load_run(out)[0]
    assert set(rows["timer"]) == {"python"} and (rows["wrong"] == 0).all()
    assert "native" not in load_run(out)[2]["harness_floor_us"]


def test_an_unknown_timer_is_one_line_and_exit_2(job):
    proc = commbench("run", "--timer", "fast", "-n", "2")
    assert proc.returncode == BAD_INPUT and "Traceback" not in proc.stderr
    assert "unknown timer 'fast' (accepted: auto, python)" in proc.stderr
