"""ring_kernel and tree_kernel in real jobs (mpirun and the commbench CLI): sweeps at 2, 3, 4 and 8
ranks, gloo, 64 MB, the kernels against MPI's own Allreduce, a rank killed inside a kernel, stale
/dev/shm segments, and no C++ compiler. In one process: tests/kernels/test_kernel_abi.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from commbench.kernels import abi as kernel_abi

from commbench.kernels import host as kernel_host
from conftest import ROOT, commbench, load_run, needs_mpirun
from kernel_threads import needs_compiler, segments_of
from sweep_checks import check_sweep, points_measured
from commbench.errors import FAILED, OK


# --- helpers ---------------------------------------------------------------------------------------------------
def _job_processes(out_dir) -> dict[int, int | None]:
    """Processes of the run writing to out_dir (workers, and a launcher whose command line carries
    a worker's): pid -> rank (OMPI_COMM_WORLD_RANK, None where not a rank)."""
    from commbench.folder.spec_file import decode_spec

    found = {}
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().decode().split("\0")
            if "commbench.rank.worker" not in args or "--spec" not in args[:-1]:
                continue
            if not decode_spec(args[args.index("--spec") + 1]).out_dir.startswith(str(out_dir)):
                continue
            env = dict(v.split("=", 1) for v in (proc / "environ").read_bytes().decode().split("\0") if "=" in v)
        except (OSError, ValueError):
            continue
        rank = env.get("OMPI_COMM_WORLD_RANK")
        found[int(proc.name)] = int(rank) if rank is not None else None
    return found


def _skipped(meta, algorithm):
    return [s for s in meta["skipped"] if s["algorithm"] == algorithm]


def _kernel_rows_exact(rows):
    kernel = rows[rows.algorithm.isin(["ring_kernel", "tree_kernel"])]
    assert len(kernel) and (kernel.wrong == 0).all(), kernel[kernel.wrong != 0]
    return kernel


# --- 2. real launches ------------------------------------------------------------------------------------------
SWEEPS = {  # world: (dtypes, ops, sizes, channels); MPI has no bfloat16 (gloo below runs it)
    2: ("float32,float64,float16,int32,int64,int8,uint8", "sum,prod,min,max", "8,12,1028,65548", None),
    3: ("float32,float16,int64,uint8", "sum,prod,min,max", "12,1028,200012", 3),
    4: ("float64,float16,int8", "sum,max", "8,1028,65548", 2),
    8: ("float32,int8", "sum,min", "64,2056", None),
}


@needs_compiler
@needs_mpirun
@pytest.mark.parametrize("world", [pytest.param(w, marks=pytest.mark.smoke) if w == 2 else w for w in sorted(SWEEPS)])
def test_real_sweep(job, tmp_path, world):
    """native, ring_kernel and tree_kernel through mpirun and the CLI: every collective, both buffer
    modes; the harness checks every result (wrong == 0); tree_kernel's reduce-scatter and
    all-gather are skipped with their reason."""
    dtypes, ops, sizes, channels = SWEEPS[world]
    out = tmp_path / "r"
    commbench("run", "-n", world, "--backend", "mpi", "-a", "native,ring_kernel,tree_kernel", "--sizes", sizes,
              "-d", dtypes, "-o", ops, "--both", "--iters", 3, "-w", 1, "--out", out, "--quiet",
              *(["--channels", channels] if channels else []), check_rc=OK, timeout=300)
    rows, samples, meta = load_run(out)
    per_algorithm = {"native": ("all_reduce", "reduce_scatter", "all_gather"),
                     "ring_kernel": ("all_reduce", "reduce_scatter", "all_gather"), "tree_kernel": ("all_reduce",)}
    nops = len(ops.split(","))
    expected = sum((nops if coll != "all_gather" else 1) * 2 * points_measured(coll, d, sizes.split(","), world)
                   for algo, colls in per_algorithm.items() for coll in colls for d in dtypes.split(","))
    check_sweep(rows, samples, meta, world, expected)
    kernel = _kernel_rows_exact(rows)
    assert set(zip(kernel.algorithm, kernel.collective)) == {
        ("ring_kernel", c) for c in per_algorithm["ring_kernel"]} | {("tree_kernel", "all_reduce")}
    assert set(kernel.in_place) == {0, 1} and set(kernel.dtype) == set(dtypes.split(","))
    # library_choice: the schedule each kernel point ran, as the bound call chose it (one-shot where small)
    message = [n if c == "all_reduce" else n // world for c, n in zip(kernel.collective, kernel.size_bytes)]
    want = [kernel_abi.schedule(a.removesuffix("_kernel"), c, "cpu", world, m, world)
            for a, c, m in zip(kernel.algorithm, kernel.collective, message)]
    assert kernel.library_choice.tolist() == want and "oneshot" in want
    assert rows[rows.algorithm == "native"].library_choice.isna().all()
    rounded = [s for s in meta["skipped"] if " B rounds to " in s["reason"]]  # (float64 8 and 12 B: one point)
    tree_skips = [s for s in _skipped(meta, "tree_kernel") if s not in rounded]
    assert {s["collective"] for s in tree_skips} == {"reduce_scatter", "all_gather"}
    for s in tree_skips:
        name = s["collective"].replace("_", "-")
        assert s["reason"] == f"tree_kernel has no {name} (it runs all-reduce)"
    assert all(s["reason"].endswith("less than one element per rank") for s in meta["skipped"]
               if s["algorithm"] != "tree_kernel" and s not in rounded)


@needs_compiler
@needs_mpirun
def test_gloo_ring_kernel_with_bfloat16(job, tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "r"
    commbench("run", "-n", 2, "--backend", "gloo", "-a", "ring_kernel", "--sizes", "8,1028", "-d", "bfloat16,float32",
              "-o", "sum,max", "--both", "--iters", 3, "-w", 1, "--out", out, "--quiet", check_rc=OK, timeout=300)
    rows, _, meta = load_run(out)
    kernel = _kernel_rows_exact(rows)
    assert len(kernel) == len(rows) == 2 * 2 * (2 + 2 + 1) * 2  # dtypes x sizes x (ops of AR, RS; AG) x modes
    assert set(kernel.dtype) == {"bfloat16", "float32"} and set(kernel.backend) == {"gloo"}
    assert meta["status"] == "completed" and not meta["skipped"]


@needs_compiler
@needs_mpirun
def test_64_megabyte_all_reduce(job, tmp_path):
    out = tmp_path / "r"
    commbench("run", "-n", 2, "--backend", "mpi", "-a", "ring_kernel,tree_kernel", "-c", "all_reduce",
              "--sizes", "64M", "--iters", 2, "-w", 1, "--out-of-place", "--out", out, "--quiet", check_rc=OK,
              timeout=300)
    rows, _, _ = load_run(out)
    kernel = _kernel_rows_exact(rows)
    assert sorted(kernel.algorithm) == ["ring_kernel", "tree_kernel"] and (kernel.size_bytes == 64 << 20).all()
    assert (kernel.iterations == 2).all()


@needs_compiler
@needs_mpirun
def test_kernels_match_mpi_allreduce_bit_for_bit(job):
    """One job: the kernels' all-reduce and MPI_Allreduce on the same random integers, compared."""
    from commbench.run.launch import find_binary

    proc = subprocess.run([find_binary("mpirun"), "--allow-run-as-root", "--oversubscribe", "-n", "4",
                           sys.executable, str(ROOT / "tests" / "scripts" / "kernels_vs_mpi.py")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == OK, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "compared 1536 results, 0 differ" in proc.stdout  # 2 algorithms x 6 dtypes x 4 ops x 4 counts x 2 x 4 ranks


# --- 5. a rank killed inside a kernel -------------------------------------------------------------------------
@needs_compiler
@needs_mpirun
def test_rank_killed_inside_the_kernel(job, tmp_path):
    out = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, "-m", "commbench", "run", "-n", "2", "--backend", "mpi",
                             "-a", "ring_kernel", "-c", "all_reduce", "--in-place", "--sizes", "8,16M",
                             "--iters", "100000", "-w", "1", "--batch", "1", "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, victim = time.monotonic() + 60, None
        while time.monotonic() < deadline:  # the 8-byte point done: the ranks are in the 16 MB one
            csv = out / "results.csv"
            if csv.exists() and len(csv.read_text().splitlines()) >= 2:
                victim = next((pid for pid, rank in _job_processes(out).items() if rank == 1), None)
                break
            time.sleep(0.05)
        assert victim is not None, "rank 1 never got to the 16 MB point"
        time.sleep(0.3)
        workers = _job_processes(out)
        assert sorted(r for r in workers.values() if r is not None) == [0, 1]
        assert not segments_of(workers)  # unlinked as soon as both ranks mapped it
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == FAILED, stderr[-3000:]
    lines = [ln for ln in (stdout + stderr).splitlines() if "was killed by SIGKILL" in ln]
    assert len(lines) == 1 and "rank 1 was killed by SIGKILL in all_reduce ring_kernel on mpi, float32 sum, in-place, " \
        "16777216 B" in lines[0], stderr[-3000:]
    assert "Traceback" not in stdout + stderr
    assert time.monotonic() - killed < 30
    end = time.monotonic() + 10
    while _job_processes(out) and time.monotonic() < end:
        time.sleep(0.1)
    assert _job_processes(out) == {}
    assert not segments_of(workers)
    rows, _, meta = load_run(out)
    assert list(rows.size_bytes) == [8] and (rows.wrong == 0).all()
    assert meta["status"] == "failed" and "SIGKILL" in meta["error"]


# --- 6. stale segments ---------------------------------------------------------------------------------------------
@needs_compiler
@needs_mpirun
def test_stale_segment_is_removed_and_a_live_ones_kept(job, tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = Path(kernel_host.SHM_DIR) / f"{kernel_host.SEGMENT_PREFIX}{dead.pid}-deadbeef0000"
    live = Path(kernel_host.SHM_DIR) / f"{kernel_host.SEGMENT_PREFIX}{os.getpid()}-deadbeef0001"
    for p in (stale, live):
        p.write_bytes(b"\0" * 4096)
    try:
        commbench("run", "-n", 2, "--backend", "mpi", "-a", "ring_kernel", "-c", "all_reduce", "--in-place",
                  "--sizes", "8", "--iters", 1, "-w", 0, "--out", tmp_path / "r", "--quiet", check_rc=OK, timeout=300)
        assert not stale.exists()
        assert live.exists()
    finally:
        for p in (stale, live):
            p.unlink(missing_ok=True)
    rows, _, _ = load_run(tmp_path / "r")
    _kernel_rows_exact(rows)


# --- 7. no compiler -------------------------------------------------------------------------------------------------
@needs_mpirun
@pytest.mark.parametrize("cxx,says", [
    ("/nonexistent/c++", "ring_kernel and tree_kernel need a C++ compiler for their host build "
                         "(CXX=/nonexistent/c++ is not a program)"),
    ("false", "the host build of cuda/collectives.cu failed (false exited 1, printing nothing)"),  # runs and fails
], ids=["missing", "failing"])
def test_without_a_compiler_the_points_are_skipped(job, tmp_path, cxx, says):
    cache = tmp_path / "cache"
    proc = commbench("run", "-n", 2, "--backend", "mpi", "-a", "native,ring_kernel,tree_kernel", "-c", "all_reduce",
                     "--in-place", "--sizes", "8", "--iters", 1, "-w", 0, "--out", tmp_path / "r", check_rc=FAILED,
                     timeout=300, env={"CXX": cxx, "COMMBENCH_CACHE": str(cache)})  # asked for, could not run: a failure
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("FAILED: ring_kernel could not run (")
    rows, _, meta = load_run(tmp_path / "r")
    assert list(rows.algorithm) == ["native"] and (rows.wrong == 0).all()
    skipped = _skipped(meta, "ring_kernel") + _skipped(meta, "tree_kernel")
    assert len(skipped) == 2
    for s in skipped:
        assert s["reason"].startswith(says) and "\n" not in s["reason"] and s["failed"] is True, s["reason"]
        assert f"skipped all_reduce · mpi · {s['algorithm']} · float32 · sum · in-place: {s['reason']}\n" in proc.stdout
    assert not list(cache.rglob("collectives-*.so"))  # (the MPI timing loop's mpi_loop-*.so has its own compiler)
