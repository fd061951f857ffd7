"""The six collectives beside the three (issue 36: broadcast, reduce, all-to-all, gather, scatter,
send-recv) in real jobs: MPI at 2, 3, 4 and 8 ranks (timed by the C loop), gloo at 2, 3 and 4, every
dtype and op each defines, both buffer modes where the library has them, a root other than 0; every
point exact, sizes and bus factors as nccl-tests counts them, what a library lacks skipped with why."""

import pytest

from conftest import commbench, load_run, needs_mpirun
from sweep_checks import check_sweep
from commbench.errors import OK
from commbench.collectives import COLLECTIVES

SIX = ["broadcast", "reduce", "all_to_all", "gather", "scatter", "send_recv"]
MPI_DTYPES = ["float32", "float64", "float16", "int32", "int64", "int8", "uint8"]
GLOO_DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8"]
OPS = ["sum", "prod", "min", "max"]
SIZES = ["8", "1032", "65544"]  # 65544: divides by 8 bytes but not by the world's blocks at 3 ranks


def _run(tmp_path, world, backend, dtypes, ops, root, launcher=()):
    out = tmp_path / "run"
    commbench("run", "-n", world, "--backend", backend, *launcher, "-c", ",".join(SIX), "--root", root,
              "--sizes", ",".join(SIZES), "-d", ",".join(dtypes), "-o", ",".join(ops), "--both", "--iters", 2, "-w", 1,
              "--out", out, "--quiet", check_rc=OK)
    rows, samples, meta = load_run(out)
    check_sweep(rows, samples, meta, world, len(rows))
    assert set(rows.collective) == set(SIX) and (rows.wrong == 0).all()
    rooted = rows.collective.map(lambda c: COLLECTIVES[c].rooted)
    assert (rows.root[rooted] == root).all() and rows.root[~rooted].isna().all()
    for c in SIX:  # nccl-tests' sizes: a block of every rank's, whole elements
        mine = rows[rows.collective == c]
        per = mine.size_bytes // world
        if c in ("all_to_all", "gather", "scatter"):
            assert ((mine.size_bytes % world == 0) & (per > 0)).all()
    return rows, meta


@needs_mpirun
@pytest.mark.parametrize("world", [pytest.param(2, marks=pytest.mark.smoke), 3, 4, 8])
def test_mpi_exact_at_every_world_size(job, tmp_path, world):
    rows, meta = _run(tmp_path, world, "mpi", MPI_DTYPES, OPS, world - 1)
    assert set(rows.timer) == {"native"}  # MPI's call in the C loop, every one of them
    both = {c for c in SIX if c != "broadcast"}  # MPI_Bcast has one buffer: in place only
    assert {c for c in both if set(rows[rows.collective == c].in_place) == {0, 1}} == both
    assert set(rows[rows.collective == "broadcast"].in_place) == {1}
    reasons = {s["reason"] for s in meta["skipped"]}
    assert any("MPI.Bcast works in place only" in r for r in reasons)
    assert set(rows[rows.collective == "reduce"].op) == set(OPS)


@pytest.mark.parametrize("world", [pytest.param(2, marks=pytest.mark.smoke), 3, 4])
def test_gloo_exact_where_torch_has_them(job, tmp_path, world):
    rows, meta = _run(tmp_path, world, "gloo", GLOO_DTYPES, ["sum", "max"], 1, ("--launcher", "local"))
    reasons = " ".join(s["reason"] for s in meta["skipped"])
    assert "torch.distributed.gather takes separate input and output tensors" in reasons
    assert "torch.distributed.broadcast works in place only" in reasons
    assert "bfloat16" in set(rows.dtype)


@needs_mpirun
@pytest.mark.parametrize("backend,world", [pytest.param("mpi", 4, marks=pytest.mark.smoke), ("gloo", 3)])
def test_own_algorithms_exact_beside_the_library(job, tmp_path, backend, world):
    """tree and chain (broadcast, reduce from --root) and pairwise (all-to-all) next to native, both
    buffer modes (their out-of-place copy timed), segments smaller than the buffer."""
    out = tmp_path / "run"
    commbench("run", "-n", world, "--backend", backend, "-c", "broadcast,reduce,all_to_all", "--root", world - 1,
              "-a", "native,tree,chain,pairwise", "--segment-bytes", 256, "--sizes", "24,4104", "-d", "float32,int32",
              "-o", "sum,max", "--both", "--iters", 2, "-w", 1, "--out", out, "--quiet", check_rc=OK)
    rows, samples, meta = load_run(out)
    check_sweep(rows, samples, meta, world, len(rows))
    runs = {(a, c) for a, c in zip(rows.algorithm, rows.collective)}
    assert {("tree", "broadcast"), ("tree", "reduce"), ("chain", "broadcast"), ("chain", "reduce"),
            ("pairwise", "all_to_all")} <= runs
    own = rows[rows.algorithm != "native"]
    assert set(own.in_place) == {0, 1} and (rows.wrong == 0).all()
    assert any("chain has no all-to-all (it runs broadcast, reduce)" in s["reason"] for s in meta["skipped"])
