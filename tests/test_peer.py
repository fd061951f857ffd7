"""The peer-memory algorithms (peer_oneshot, peer_twoshot) in real jobs on the CPU: ranks map
each other's /dev/shm staging slots; exact results for every collective, dtype, op and buffer
mode, uneven blocks, several sizes in one job (the slots grow), no shared-memory file left."""

import glob

import pytest

from commbench.rank.algorithms import ALGORITHMS
from commbench.rank.peermem import unsupported
from conftest import commbench, load_run, needs_mpirun
from sweep_checks import check_sweep

PEER = "peer_oneshot,peer_twoshot"


def _leftovers():
    return set(glob.glob("/dev/shm/commbench-*"))


def _run(tmp_path, backend, world, dtypes, ops, extra=()):
    out = tmp_path / "run"
    commbench("run", "-n", world, "--backend", backend, "-a", PEER, "-c", "all_reduce,all_gather,reduce_scatter",
              "--sizes", f"12,4100,{3 << 20}", "-d", ",".join(dtypes), "-o", ",".join(ops), "--both", "--iters", 3,
              "-w", 1, "--out", out, "--quiet", *extra, check_rc=0)
    return load_run(out)


@needs_mpirun
@pytest.mark.parametrize("backend,world", [("mpi", 2), ("mpi", 3), ("mpi", 4), ("gloo", 3)])
def test_peer_algorithms_exact(tmp_path, backend, world):
    if backend == "gloo":
        pytest.importorskip("torch")
    before = _leftovers()
    dtypes = ["float32", "int32", "float16"] + (["bfloat16"] if backend == "gloo" else [])
    rows, samples, meta = _run(tmp_path, backend, world, dtypes, ["sum", "max", "prod", "avg"])
    check_sweep(rows, samples, meta, world, meta["planned_points"] - len(meta["skipped"]))
    by_algo = rows.groupby("algorithm").collective.unique()
    assert set(by_algo["peer_oneshot"]) == {"all_reduce", "all_gather", "reduce_scatter"}
    assert set(by_algo["peer_twoshot"]) == {"all_reduce"}
    assert set(rows.in_place) == {0, 1} and set(rows.dtype) == set(dtypes)
    assert {"avg", "prod"} <= set(rows.op)
    uneven = rows[(rows.collective == "all_reduce") & (rows["count"] % world != 0)]
    assert set(uneven.algorithm) == {"peer_oneshot", "peer_twoshot"}  # blocks of unequal length
    assert (rows.size_bytes >= 3 << 20).any()  # the slots grew past their first size
    for s in meta["skipped"]:
        assert any(k in s["reason"] for k in ("all-reduce algorithm", "less than one element", "no avg",
                                              "avg of integers")), s
    assert _leftovers() == before


@needs_mpirun
def test_peer_algorithms_refuse_more_than_one_node(tmp_path):
    out = tmp_path / "run"
    proc = commbench("run", "-n", 4, "--backend", "mpi", "-a", "peer_oneshot,ring", "--ranks-per-node", 2,
                     "-c", "all_reduce", "--sizes", "4K", "--out", out, "--quiet", check_rc=0)
    rows, _, meta = load_run(out)
    assert set(rows.algorithm) == {"ring"}
    assert any("every rank must be on one node" in s["reason"] for s in meta["skipped"]), proc.stdout


def test_peer_messages_and_reasons():
    one, two = ALGORITHMS["peer_oneshot"], ALGORITHMS["peer_twoshot"]
    sent = one.messages("all_reduce", 10, [0, 0, 0])
    assert len(sent) == 6 and set(sent.values()) == {10}  # every rank reads every peer's whole buffer
    sent = two.messages("all_reduce", 10, [0, 0, 0])  # blocks 3, 3, 4: own block from each, then theirs
    assert sent[(0, 1)] == 3 + 3 and sent[(2, 0)] == 3 + 4 and sum(sent.values()) == 2 * 2 * 10
    assert unsupported([0, 0, 1]) and unsupported([0, 0]) is None


@needs_mpirun
def test_gpu_flag_variants_need_cuda(tmp_path):
    out = tmp_path / "run"
    commbench("run", "-n", 2, "--backend", "mpi", "-a", "peer_oneshot,peer_oneshot_gpuflags,peer_twoshot_gpuflags",
              "-c", "all_reduce", "--sizes", "4K", "--iters", 3, "--out", out, "--quiet", check_rc=0)
    rows, _, meta = load_run(out)
    assert set(rows.algorithm) == {"peer_oneshot"} and (rows.wrong == 0).all()
    reasons = {s["algorithm"]: s["reason"] for s in meta["skipped"]}
    assert set(reasons) == {"peer_oneshot_gpuflags", "peer_twoshot_gpuflags"}
    assert all("runs with --device cuda" in r for r in reasons.values()), reasons
