"""Real mpirun jobs: 2, 3 and 4 ranks, every collective, many dtypes and ops, both buffer modes,
counts that do not divide by the world size; results exact and formulas right."""

import pytest

from conftest import commbench, load_run, needs_mpirun
from sweep_checks import check_sweep, points_measured
from commbench.errors import OK

DTYPES = ["float32", "float64", "float16", "int32", "int64", "int8", "uint8"]
OPS = ["sum", "prod", "min", "max"]
SIZES = ["8", "12", "1028", "65548"]


@needs_mpirun
@pytest.mark.parametrize("world", [pytest.param(2, marks=pytest.mark.smoke), 3, 4])
def test_mpi_sweep_exact(job, tmp_path, world):
    out = tmp_path / "run"
    commbench("run", "-n", world, "--backend", "mpi", "--launcher", "mpirun", "--sizes", ",".join(SIZES),
              "-d", ",".join(DTYPES), "-o", ",".join(OPS), "--both", "--iters", 3, "-w", 1,
              "--out", out, "--quiet", check_rc=OK)
    rows, samples, meta = load_run(out)
    # points too small for one element per rank are skipped, and sizes that round to one measured
    # already (8 and 12 B of float32 all-gather over 2 ranks), the rest are measured
    measured = sum(nops * 2 * points_measured(coll, d, SIZES, world)
                   for coll, nops in (("all_reduce", 4), ("all_gather", 1), ("reduce_scatter", 4)) for d in DTYPES)
    check_sweep(rows, samples, meta, world, measured)
    assert set(rows.collective) == {"all_reduce", "all_gather", "reduce_scatter"}
    assert set(rows.in_place) == {0, 1} and set(rows.dtype) == set(DTYPES)
    assert "Open MPI" in meta["versions"]["mpi_library"]
    assert all(s["reason"].endswith("less than one element per rank") or " B rounds to " in s["reason"]
               for s in meta["skipped"])
    assert len(rows.drop_duplicates(["collective", "dtype", "op", "in_place", "size_bytes"])) == len(rows)


@needs_mpirun
def test_mpi_bfloat16_and_avg_are_skipped_with_reason(job, tmp_path):
    proc = commbench("run", "-n", 2, "--backend", "mpi", "--sizes", "1K", "-c", "all_reduce", "-d",
                     "float32,bfloat16", "-o", "sum,avg", "--in-place", "--iters", 2, "--out", tmp_path / "r",
                     check_rc=OK)
    assert "MPI has no bfloat16 datatype" in proc.stdout
    assert "MPI has no avg reduction" in proc.stdout
    rows, _, meta = load_run(tmp_path / "r")
    assert len(rows) == 1 and len(meta["skipped"]) == 3


@needs_mpirun
def test_adaptive_iterations_and_json_rows(job, tmp_path):
    # 16 MB: a call of ~1 ms, well clear of --max-iters within --min-time (4 MB's ~0.27 ms gave 183 calls, and
    # the capped 8 B point 180 in whole batches)
    proc = commbench("run", "-n", 2, "--sizes", "8,16M", "-c", "all_reduce", "--in-place", "--min-time", 0.05,
                     "--max-iters", 200, "--json", "--out", tmp_path / "r", check_rc=OK)
    import json

    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["size_bytes"] for r in rows] == [8, 16 << 20]
    small, large = rows
    assert 200 - small["batch"] < small["iterations"] <= 200  # capped by --max-iters, in whole batches
    assert small["batch"] > 1 and large["batch"] == 1  # short calls are timed in batches
    assert 5 <= large["iterations"] < small["iterations"]  # large messages get a bounded time
    assert "commbench" in proc.stderr  # the human view goes to stderr with --json
