"""The NCCL path on a real GPU (skipped without one): a sweep end to end, exact, CUDA-timed."""

import pytest

from conftest import commbench, load_run
from sweep_checks import check_sweep
from commbench.errors import FAILED, OK

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("launcher", ["local", "torchrun"])
def test_nccl_sweep_exact(job, tmp_path, launcher):
    out = tmp_path / "run"
    commbench("run", "-n", 1, "--backend", "nccl", "--device", "cuda", "--launcher", launcher,
              "--sizes", "8,1028,1M,64M", "-d", "float32,bfloat16,float16,int8", "-o", "sum,prod,min,max,avg",
              "--both", "--iters", 20, "--out", out, "--quiet", check_rc=OK)
    rows, samples, meta = load_run(out)
    check_sweep(rows, samples, meta, 1, meta["planned_points"] - len(meta["skipped"]))
    assert (rows.device == "cuda").all()
    assert meta["versions"]["nccl"] and meta["ranks"][0]["gpu"]


def test_nccl_several_ranks_share_one_gpu(job, tmp_path):
    """NCCL refuses two ranks on one device; the run must say so in one line, not hang."""
    proc = commbench("run", "-n", 2, "--backend", "nccl", "--device", "cuda", "--sizes", "1K", "--iters", 2,
                     "--timeout", 60, "--out", tmp_path / "r")
    assert proc.returncode in (OK, FAILED)
    if proc.returncode == FAILED:
        assert "commbench: failed" in proc.stderr


def test_nccl_tuning_records_the_library_choice(job, tmp_path):
    """--nccl-tuning on every GPU here: with two or more ranks every row names ALGO/PROTO pairs;
    with one, NCCL is expected to copy without choosing (an empty column), but a choice it does
    log must still parse."""
    import glob
    import re

    import torch

    before = set(glob.glob("/tmp/commbench-nccl-*"))
    n = min(torch.cuda.device_count(), 8)
    out = tmp_path / "run"
    commbench("run", "-n", n, "--backend", "nccl", "--device", "cuda", "--nccl-tuning", "--sizes", "8,64K,16M",
              "--in-place", "--iters", 10, "--out", out, "--quiet", check_rc=OK)
    rows, _, meta = load_run(out)
    assert meta["rank0_environment"]["NCCL_DEBUG_SUBSYS"].endswith("TUNING")
    choices = rows.library_choice.fillna("")
    pairs = r"[A-Z_]+/[A-Z0-9]+(, [A-Z_]+/[A-Z0-9]+)*"
    assert all(re.fullmatch(pairs, c) or (n == 1 and c == "") for c in choices), choices
    assert set(glob.glob("/tmp/commbench-nccl-*")) == before  # rank 0's log is gone


def test_nccl_is_timed_as_a_cuda_graph_unless_no_graph(job, tmp_path):
    """--graph (the default): NCCL's calls captured once and replayed, the rows say cuda-graph,
    and a captured call is much cheaper per call than an eager one at 8 B (no Python or torch
    launch path between the calls); --no-graph and --timer python time eager calls between CUDA
    events. Where this torch cannot capture, the row says cuda-events and the run says why."""
    rows = {}
    for name, flags in {"graph": [], "no-graph": ["--no-graph"], "python": ["--timer", "python"]}.items():
        out = tmp_path / name
        proc = commbench("run", "-n", 1, "--backend", "nccl", "--device", "cuda", "--sizes", "8,64M", "--in-place",
                         "-c", "all_reduce,all_gather,reduce_scatter", "--iters", 200, "--out", out, *flags, check_rc=OK)
        rows[name] = load_run(out)[0]
        if name == "graph" and set(rows[name].timer) != {"cuda-graph"}:
            assert "could not capture" in proc.stdout + proc.stderr
    assert set(rows["no-graph"].timer) == set(rows["python"].timer) == {"cuda-events"}
    graph, eager = (rows[k].set_index(["collective", "size_bytes"]).time_us for k in ("graph", "no-graph"))
    if set(rows["graph"].timer) == {"cuda-graph"}:
        assert (graph.xs(8, level=1) < eager.xs(8, level=1)).all(), (graph, eager)


@pytest.mark.parametrize("registration", ["local", "window"])
def test_nccl_registered_buffers_are_exact_and_recorded(job, tmp_path, registration):
    """--registration (nccl-tests' -R 1 and 2): the buffers registered with NCCL (a registered memory
    pool; a symmetric window), every point exact and its row saying how they were registered."""
    out = tmp_path / "run"
    commbench("run", "-n", 1, "--backend", "nccl", "--device", "cuda", "--registration", registration,
              "-c", "all_reduce,all_gather,reduce_scatter", "--sizes", "8,1M,16M", "--both", "--iters", 10,
              "--out", out, "--quiet", check_rc=OK)
    rows, samples, meta = load_run(out)
    check_sweep(rows, samples, meta, 1, meta["planned_points"] - len(meta["skipped"]))
    assert (rows.registration == registration).all() and meta["spec"]["registration"] == registration
