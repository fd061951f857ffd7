"""The peer algorithms on a real GPU (skipped without one): 2 and 4 processes share one GPU,
open each other's staging buffers by CUDA IPC and reduce them with commbench's kernels; exact
for every collective, dtype and op; the latency next to the reduction kernel's is a benchmark
(benchmarks/peer_latency.py)."""

import glob

import pytest

from conftest import commbench, load_run
from sweep_checks import check_sweep
from commbench.errors import OK

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("world", [2, 4])
def test_peer_algorithms_on_one_gpu(job, tmp_path, world):
    before = set(glob.glob("/dev/shm/commbench-*"))
    out = tmp_path / "run"
    commbench("run", "-n", world, "--backend", "gloo", "--device", "cuda", "-a", "peer_oneshot,peer_twoshot",
              "-c", "all_reduce,all_gather,reduce_scatter", "--sizes", "8,1028,1M,64M",
              "-d", "float32,bfloat16,float16,int32", "-o", "sum,max,avg", "--both", "--iters", 10,
              "--out", out, "--quiet", check_rc=OK)
    rows, samples, meta = load_run(out)
    check_sweep(rows, samples, meta, world, meta["planned_points"] - len(meta["skipped"]))
    assert (rows.device == "cuda").all()
    assert set(rows[rows.algorithm == "peer_oneshot"].collective) == {"all_reduce", "all_gather", "reduce_scatter"}
    assert set(rows[rows.algorithm == "peer_twoshot"].collective) == {"all_reduce"}
    assert meta["ranks"][0]["gpu"]
    assert set(glob.glob("/dev/shm/commbench-*")) == before


@pytest.mark.parametrize("world", [2, 4])
def test_peer_algorithms_waiting_on_the_gpu(job, tmp_path, world):
    """The _gpuflags variants: the barrier is a kernel spinning on the flag pages, mixed in one job
    with the host-barrier variants (the same flag words and epochs)."""
    out = tmp_path / "run"
    algos = "peer_oneshot,peer_oneshot_gpuflags,peer_twoshot_gpuflags"
    commbench("run", "-n", world, "--backend", "gloo", "--device", "cuda", "-a", algos,
              "-c", "all_reduce,all_gather,reduce_scatter", "--sizes", "8,1028,1M", "-d", "float32,bfloat16",
              "-o", "sum,avg", "--both", "--iters", 5, "--out", out, "--quiet", check_rc=OK)
    rows, samples, meta = load_run(out)
    check_sweep(rows, samples, meta, world, meta["planned_points"] - len(meta["skipped"]))
    assert set(rows.algorithm) == set(algos.split(","))
