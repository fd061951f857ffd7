"""The peer-memory algorithms (peer_oneshot, peer_twoshot) in real jobs on the CPU: ranks map
each other's /dev/shm staging slots; exact results for every collective, dtype, op and buffer
mode, uneven blocks, several sizes in one job (the slots grow), no shared-memory file left."""

import glob

import pytest

from commbench.algorithms import ALGORITHMS
from commbench.algorithms.peer import MIN_SLOT_BYTES
from commbench.kernels.peermem import unsupported
from conftest import commbench, load_run, needs_mpirun
from sweep_checks import check_sweep
from commbench.errors import OK

PEER = "peer_oneshot,peer_twoshot"
GPU_FLAGS = ("peer_oneshot_gpuflags", "peer_twoshot_gpuflags")  # in every job: skipped on the CPU
# uneven blocks for 2, 3 and 4 ranks; the last is just past the first slot size, so the slots grow
SIZES = f"12,4100,{MIN_SLOT_BYTES + 12}"


def _leftovers():
    return set(glob.glob("/dev/shm/commbench-*"))


@pytest.fixture(scope="module")
def peer_job(tmp_path_factory, job):
    """peer_job(backend, world): one sweep per job, run once for the tests that read it:
    (rows, samples, meta, dtypes, shared-memory files left behind)."""
    jobs = {}

    def run(backend, world):
        if (backend, world) not in jobs:
            dtypes = ["float32", "int32", "float16"] + (["bfloat16"] if backend == "gloo" else [])
            out, before = tmp_path_factory.mktemp(f"{backend}{world}") / "run", _leftovers()
            commbench("run", "-n", world, "--backend", backend, "-a", ",".join([PEER, *GPU_FLAGS]),
                      "-c", "all_reduce,all_gather,reduce_scatter", "--sizes", SIZES, "-d", ",".join(dtypes),
                      "-o", "sum,max,prod,avg", "--both", "--iters", 3, "-w", 1, "--out", out, "--quiet", check_rc=OK)
            jobs[backend, world] = (*load_run(out), dtypes, _leftovers() - before)
        return jobs[backend, world]

    return run


@needs_mpirun
@pytest.mark.parametrize("backend,world", [("mpi", 2), ("mpi", 3), ("mpi", 4), ("gloo", 3)])
def test_peer_algorithms_exact(job, peer_job, backend, world):
    if backend == "gloo":
        pytest.importorskip("torch")
    rows, samples, meta, dtypes, left = peer_job(backend, world)
    check_sweep(rows, samples, meta, world, meta["planned_points"] - len(meta["skipped"]))
    by_algo = rows.groupby("algorithm").collective.unique()
    assert set(by_algo["peer_oneshot"]) == {"all_reduce", "all_gather", "reduce_scatter"}
    assert set(by_algo["peer_twoshot"]) == {"all_reduce"}
    assert set(rows.in_place) == {0, 1} and set(rows.dtype) == set(dtypes)
    assert {"avg", "prod"} <= set(rows.op)
    uneven = rows[(rows.collective == "all_reduce") & (rows["count"] % world != 0)]
    assert set(uneven.algorithm) == {"peer_oneshot", "peer_twoshot"}  # blocks of unequal length
    assert (rows.size_bytes > MIN_SLOT_BYTES).any()  # the slots grew past their first size
    for s in meta["skipped"]:
        if s["algorithm"] in GPU_FLAGS:
            continue  # test_gpu_flag_variants_need_cuda
        assert any(k in s["reason"] for k in ("(it runs all-reduce)", "less than one element", "no avg",
                                              "avg of integers")), s
    assert left == set()


@needs_mpirun
def test_peer_algorithms_refuse_more_than_one_node(job, tmp_path):
    out = tmp_path / "run"
    proc = commbench("run", "-n", 4, "--backend", "mpi", "-a", "peer_oneshot,ring", "--ranks-per-node", 2,
                     "-c", "all_reduce", "--sizes", "4K", "--out", out, "--quiet", check_rc=OK)
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
def test_gpu_flag_variants_need_cuda(peer_job):
    """No point of the GPU-flag variants runs on the CPU: each is skipped, with that reason where
    the backend itself accepts the point (not for avg of integers); the other variants ran."""
    rows, _, meta, _, _ = peer_job("mpi", 2)
    assert set(rows.algorithm) == {"peer_oneshot", "peer_twoshot"} and (rows.wrong == 0).all()
    flags = [s for s in meta["skipped"] if s["algorithm"] in GPU_FLAGS]
    assert len(flags) == meta["planned_points"] // 2  # half the plan: two of the four algorithms
    assert {s["algorithm"] for s in flags} == set(GPU_FLAGS)
    accepted = [s for s in flags if not (s["op"] == "avg" and s["dtype"] == "int32")]
    assert all("runs with --device cuda" in s["reason"] for s in accepted), accepted
