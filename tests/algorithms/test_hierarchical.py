"""hierarchical_kernel: the ring kernel inside each node, the backend's ring between nodes.

Bit for bit against MPI's own collectives in real mpirun jobs (every node layout of 4 and 6
ranks); a gloo job on 2x3 nodes through the CLI, shown by topo-compare and the report; the
reasons it is skipped; an emulated cluster (network namespaces, round-robin placement); and the
cost model, which fits its intra-node stages with the kernels and borrows the inter-node link
from the backend's step algorithms. tests/algorithms/test_algorithms_in_jobs.py, test_traffic.py and
test_nccl_semantics.py run it with every other algorithm that sends messages.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest

from commbench.algorithms import ALGORITHMS, Context
from commbench.analysis.model.costs import Params, Shape, time_s
from commbench.analysis.model.fit import INTER, fit, usable_rows
from commbench.analysis.model.model_file import to_json
from commbench.analysis.model.validate import held_out, summary
from commbench.analysis.model.predict import predict
from conftest import ROOT, commbench, load_run, needs_mpirun
from kernel_threads import needs_compiler
from sweep_checks import check_sweep
from commbench.errors import FAILED, OK

COLLECTIVES = {"all_reduce", "reduce_scatter", "all_gather"}


def _rows(out, algorithm="hierarchical_kernel"):
    rows, samples, meta = load_run(out)
    return rows[rows.algorithm == algorithm], rows, samples, meta


# --- bit for bit against the library, in real jobs ------------------------------------------------------------
@needs_compiler
@needs_mpirun
@pytest.mark.parametrize("world,layouts,results", [(4, 4, 8672), (6, 6, 19440)])
def test_bit_exact_against_mpi_in_every_layout(job, world, layouts, results):
    """One job per world size: 1xn, Mx(n/M) node by node and round-robin, nx1; 3 collectives x dtypes
    x ops (avg too: MPI's sum / n) x counts (1 element, a tail of count mod G, 8 chunks; the all-reduce's
    chunks pipelined and in order) x both buffer modes, two calls per binding, against MPI_Allreduce /
    MPI_Reduce_scatter_block / MPI_Allgather."""
    from commbench.run.launch import find_binary

    proc = subprocess.run([find_binary("mpirun"), "--allow-run-as-root", "--oversubscribe", "-n", str(world),
                           sys.executable, str(ROOT / "tests" / "scripts" / "hierarchical_kernel_vs_mpi.py")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == OK, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"compared {results} results in {layouts} layouts, 0 differ" in proc.stdout
    from commbench.backends.mpi import MPICommunicator

    cap = MPICommunicator.unanswered_message_bytes  # (inter_segment; None under an MPI other than Open MPI)
    largest = int(re.search(r"between two nodes: 2 layouts, the largest message (\d+) bytes", proc.stdout).group(1))
    assert largest == cap if cap else largest > 64 << 10, proc.stdout[-2000:]
    sizes = [1, world - 1]  # the last rank a node of its own
    assert f"uneven: hierarchical_kernel needs the same number of ranks on every node (found {sizes})" in proc.stdout


@needs_compiler
@needs_mpirun
def test_gloo_2x3_with_topo_compare_and_report(job, tmp_path):
    """gloo, 2 nodes of 3 ranks (odd G: parts and tails), bfloat16 and avg (which MPI has not), both
    buffer modes, exact; topo-compare and the report show it next to the flat ring."""
    pytest.importorskip("torch")
    out = tmp_path / "r"
    proc = commbench("run", "-n", 6, "--ranks-per-node", 3, "--backend", "gloo", "-a", "ring,hierarchical_kernel",
                     "--sizes", "4,4100", "--segment-bytes", 256, "-d", "bfloat16,float32", "-o", "avg", "--both",
                     "--iters", 2, "-w", 0, "--out", out, check_rc=OK, timeout=300)
    mine, rows, samples, meta = _rows(out)
    check_sweep(rows, samples, meta, 6, meta["planned_points"] - len(meta["skipped"]))
    assert all(s["reason"].endswith("less than one element per rank") for s in meta["skipped"])
    assert meta["node_of_rank"] == [0, 0, 0, 1, 1, 1]
    big = mine[mine.size_bytes > 100]
    assert set(big.collective) == COLLECTIVES and set(big.dtype) == {"bfloat16", "float32"}
    assert set(big.in_place) == {0, 1} and set(big[big.collective != "all_gather"].op) == {"avg"}
    assert ((mine["count"] % 3 != 0) & (mine.collective == "all_reduce")).any()  # 3 parts and a tail
    chunked = (mine.collective == "all_reduce") & (mine.size_bytes > 100)  # several chunks: beside gloo, pipelined
    assert set(mine[chunked].library_choice) == {"pipelined"} and mine[~chunked].library_choice.isna().all()
    assert "hierarchical_" in proc.stderr and "speedup over the flat ring" in proc.stderr  # the table after the run

    compared = commbench("topo-compare", out, "--csv", tmp_path / "c.csv", check_rc=OK)
    assert "hierarchical_" in compared.stderr and "(speedup over the flat ring)" in compared.stderr
    table = pd.read_csv(tmp_path / "c.csv")
    assert set(table.collective) == COLLECTIVES and len(table) == len(mine)
    speedup = table["time_us:ring"] / table["time_us:hierarchical_kernel"]
    assert (table["speedup:hierarchical_kernel"] == speedup).all() and speedup.gt(0).all()

    report = tmp_path / "report.html"
    commbench("report", out, "-o", report, check_rc=OK)
    assert "hierarchical_kernel vs ring" in report.read_text()  # the topology-aware speedup chart

    fitted = commbench("model", "fit", out, "-o", tmp_path / "model.json", check_rc=OK)  # ring: the gloo group
    kernel = fitted.stdout.split("gloo/kernel:")[1].splitlines()
    assert "(hierarchical_kernel)" in kernel[0]
    steps = fitted.stdout.split("gloo/kernel:")[0].splitlines()
    # the link between nodes (INTER): the backend's, borrowed where it is known
    lent = all("not determined" not in next(ln for ln in steps if ln.split() and ln.split()[0] == name) for name in INTER)
    for name in INTER:  # borrowed exactly when the gloo fit determined both; else the kernel group fits its own
        line = next(ln for ln in kernel if ln.split()[0] == name)
        assert line.endswith("(the gloo fit's)") == lent, fitted.stdout


@needs_compiler
@needs_mpirun
def test_beside_mpi_the_rows_say_how_the_chunks_ran(job, tmp_path):
    """MPI, 2 nodes of 2 ranks on this machine (4 ranks on its cores, however many): the all-reduce of
    several chunks pipelines them on the CPU, exact, and its rows say so."""
    out = tmp_path / "r"
    commbench("run", "-n", 4, "--ranks-per-node", 2, "--backend", "mpi", "-a", "hierarchical_kernel", "-c", "all_reduce",
              "--sizes", "4100", "--segment-bytes", 256, "--both", "--iters", 2, "-w", 0, "--out", out, check_rc=OK,
              timeout=300)
    mine, *_ = _rows(out)
    assert len(mine) == 2 and (mine.wrong == 0).all() and set(mine.library_choice) == {"pipelined"}


def test_the_all_reduce_pipelines_its_chunks_on_the_cpu_and_runs_them_in_order_on_a_gpu():
    """Beside MPI between two nodes too (the rule before inter_segment ran them in order where a host's
    ranks outnumbered its cores): the device alone decides, the same on every rank."""
    kernel = ALGORITHMS["hierarchical_kernel"]

    def decided(backend, device):
        return kernel.pipelined(Context(SimpleNamespace(backend=backend, device=device), [0, 0, 1, 1]))

    assert [decided("mpi", "cpu"), decided("gloo", "cpu"), decided("nccl", "cuda")] == [True, True, False]


def test_between_two_nodes_the_ring_s_segments_are_messages_the_library_sends_unanswered():
    """Two nodes: each rank exchanges with one peer both ways over one connection, so no segment outgrows
    the library's unanswered message (Communicator.unanswered_message_bytes); more nodes, or a library
    without one, keep the segment as given."""
    from commbench.algorithms.hierarchical import inter_segment

    def segment(nodes, cap, itemsize=4, segment_elems=1 << 18):
        ctx = Context(SimpleNamespace(unanswered_message_bytes=cap), [0], segment_elems=segment_elems)
        return inter_segment(ctx, SimpleNamespace(inter=SimpleNamespace(size=nodes)), itemsize)

    assert segment(2, 60 << 10) == 15360 and segment(2, 60 << 10, itemsize=8) == 7680
    assert segment(2, 60 << 10, segment_elems=64) == 64  # a smaller segment as given
    assert segment(2, 60 << 10, itemsize=1 << 17) == 1  # never empty
    assert segment(3, 60 << 10) == segment(2, None) == 1 << 18  # a connection carries one way; gloo




def test_the_all_reduce_s_chunks_ramp_up_and_down():
    """From 4 chunks the first two and the last two are a quarter and a half of the others (less time
    filling and draining the pipeline); fewer are equal; none is empty. hierarchical_kernel cuts the same
    chunks of the count's G-element groups: multiples of G."""
    from commbench.algorithms.hierarchical import pipeline_chunks

    def sizes(edges):
        return [hi - lo for lo, hi in zip(edges, edges[1:])]

    assert sizes(pipeline_chunks(22_000, 2, 2, 100)) == [1000, 2000, 4000, 4000, 4000, 4000, 2000, 1000]
    assert sizes(pipeline_chunks(10_000, 2, 2, 1000)) == [1000, 2000, 4000, 2000, 1000]  # 5 chunks
    assert sizes(pipeline_chunks(600, 2, 2, 100)) == [200, 200, 200] and pipeline_chunks(7, 2, 2, 100) == [0, 7]
    assert pipeline_chunks(0, 2, 2, 100) == [0, 0]
    assert sizes(pipeline_chunks(16, 2, 2, 1)) == [2, 3, 3, 2, 3, 2, 1]  # 1/22 of 16 is no element: 7 chunks
    for count in range(1, 200):
        assert min(sizes(pipeline_chunks(count, 2, 2, 1))) > 0
    kernel = ALGORITHMS["hierarchical_kernel"]
    for count, g, seg in ((3 * 22_000 + 2, 3, 100), (35, 2, 1), (5003, 3, 64)):
        edges = kernel.chunks(count, g, 2, seg)
        assert edges == [g * e for e in pipeline_chunks(count // g, 1, 2, seg)] and all(e % g == 0 for e in edges)
        assert min(sizes(edges)) > 0 and count - edges[-1] == count % g  # the tail goes with the last chunk
    assert sizes(kernel.chunks(3 * 22_000 + 2, 3, 2, 100)) == [3 * c for c in (1000, 2000, 4000, 4000, 4000, 4000,
                                                                              2000, 1000)]


def test_the_cost_of_the_pipelined_all_reduce_follows_its_chunks_through_the_stages():
    """Chunk k crosses while the calling thread all-gathers chunk k-1 and reduce-scatters chunk k+1
    (base.pipeline): where the crossing is the slowest stage, the first chunk's reduce-scatter and the last
    one's all-gather add to it (1/22 of the intra-node work each way); where the node's stages are the
    slowest, all of them and the crossing of none."""
    intra, inter, both = Params(0, 1e-9, 0, 0, 0), Params(0, 0, 0, 1e-8, 0), Params(0, 1e-9, 0, 1e-8, 0)

    def t(p, size=1 << 26):
        return time_s(p, "hierarchical", "all_reduce", Shape(2, 2), size)  # 8 chunks

    assert (t(both) - t(inter)) / t(intra) == pytest.approx(1 / 22)
    slow_node = Params(0, 1e-7, 0, 1e-8, 0)  # each chunk's node stages take longer than its crossing
    assert t(slow_node) == pytest.approx(t(Params(0, 1e-7, 0, 0, 0)))


# --- where it cannot run -----------------------------------------------------------------------------------------
@needs_mpirun
def test_without_a_compiler_it_is_skipped_with_the_reason(job, tmp_path):
    """(Nodes of unequal sizes: the reason is checked by the bit-exact jobs above.)"""
    env = {"CXX": "/nonexistent/c++", "COMMBENCH_CACHE": str(tmp_path / "cache")}
    proc = commbench("run", "-n", 2, "--ranks-per-node", 1, "--backend", "mpi", "-a", "ring,hierarchical_kernel",
                     "-c", "all_reduce", "--in-place", "--sizes", "8", "--iters", 1, "-w", 0, "--out", tmp_path / "r",
                     env=env, check_rc=FAILED, timeout=300)  # an asked-for algorithm that measured nothing
    mine, rows, _, meta = _rows(tmp_path / "r")
    assert mine.empty and list(rows.algorithm) == ["ring"] and (rows.wrong == 0).all()
    [skip] = meta["skipped"]
    assert skip["algorithm"] == "hierarchical_kernel", skip
    assert skip["reason"].startswith("hierarchical_kernel runs the ring kernel inside each node: "), skip
    assert "C++ compiler" in skip["reason"] and "CXX=/nonexistent/c++ is not a program" in skip["reason"]
    assert "\n" not in skip["reason"] and "Traceback" not in proc.stdout + proc.stderr
    assert skip["failed"] is True  # a failure of what was asked for, not a combination that cannot exist
    assert proc.stderr.splitlines()[-1].startswith("FAILED: hierarchical_kernel could not run (hierarchical_kernel runs")


# --- an emulated cluster -----------------------------------------------------------------------------------------
@needs_compiler
def test_emulated_nodes_placed_round_robin(tmp_path, netns):
    """Network namespaces as nodes (one /dev/shm: the kernel needs only that a node's ranks share
    memory), ranks placed round-robin, so a node's blocks are not consecutive (the scratch slab);
    the bytes crossing the emulated links are the analytical count."""
    pytest.importorskip("torch")
    from commbench.run import emulate

    before = set(emulate.namespaces())
    out = tmp_path / "r"
    commbench("run", "--backend", "gloo", "--emulate", "2x2", "--placement", "round-robin", "-a", "hierarchical_kernel",
              "--sizes", "64K", "--iters", 2, "-w", 0, "--both", "--out", out, "--quiet", check_rc=OK, timeout=300)
    assert not [ns for ns in emulate.namespaces() if ns not in before and ns.startswith("cb")]
    mine, rows, samples, meta = _rows(out)
    check_sweep(rows, samples, meta, 4, 6)
    assert meta["node_of_rank"] == [0, 1, 0, 1] and set(mine.collective) == COLLECTIVES
    ratio = mine.internode_bytes_measured / mine.internode_bytes_expected
    assert ratio.between(0.99, 1.1).all(), mine[["collective", "internode_bytes_measured", "internode_bytes_expected"]]


# --- the cost model ----------------------------------------------------------------------------------------------
STEPS = Params(2e-5, 5e-10, 8e-5, 8e-9, 3e-10)  # a library call per step
FLAGS = Params(2e-7, 2e-10, 8e-5, 8e-9, 1e-10)  # a flag hand-off per step; between nodes the same library


def _synthetic(params, algorithms, shapes, collectives=tuple(sorted(COLLECTIVES)), sizes=range(3, 27, 5)):
    rows = []
    for shape in shapes:
        for algorithm in algorithms:
            for collective in collectives:
                for size in (2**k for k in sizes):
                    t = time_s(params, algorithm, collective, shape, size)
                    if t is not None:
                        rows.append({"backend": "gloo", "algorithm": algorithm, "collective": collective,
                                     "size_bytes": size, "world_size": shape.n, "nodes": shape.nodes,
                                     "ranks_per_node": shape.per_node, "placement": "block", "wrong": 0,
                                     "time_us": t * 1e6})
    return pd.DataFrame(rows)


def test_cost_counts_a_kernel_call_per_node():
    """All-reduce: hierarchical's formula; reduce-scatter and all-gather: M kernel calls of G-1
    hand-offs each, then M-1 steps between nodes."""
    alpha = Params(1e-6, 0.0, 1e-5, 0.0, 0.0)
    for collective in ("reduce_scatter", "all_gather"):
        kernel = time_s(alpha, "hierarchical_kernel", collective, Shape(4, 3), 96)
        assert kernel == pytest.approx(4 * 2 * 1e-6 + 3 * 1e-5)
        assert time_s(alpha, "hierarchical", collective, Shape(4, 3), 96) == pytest.approx(2 * 1e-6 + 3 * 1e-5)
    for shape in (Shape(4, 2), Shape(2, 8, lanes=2)):
        for size in (8, 2**20, 2**26):
            assert time_s(STEPS, "hierarchical_kernel", "all_reduce", shape, size) == pytest.approx(
                time_s(STEPS, "hierarchical", "all_reduce", shape, size))


def test_the_model_fits_its_stages_with_the_kernels_and_the_link_with_the_steps(tmp_path):
    one_node, two_nodes = Shape(1, 4), Shape(2, 2)
    steps = _synthetic(STEPS, ["ring", "hierarchical"], [one_node, two_nodes])
    kernels = _synthetic(FLAGS, ["ring_kernel", "tree_kernel"], [one_node])
    mixed = _synthetic(FLAGS, ["hierarchical_kernel"], [two_nodes])
    fits = {f.group: f for f in fit(pd.concat([steps, kernels, mixed]))}
    kernel = fits["gloo/kernel"]
    assert kernel.algorithms == ["hierarchical_kernel", "ring_kernel", "tree_kernel"]
    assert kernel.borrowed == {"alpha_inter": "gloo", "beta_inter": "gloo"}  # one owner: the step group
    for name in ("alpha_inter", "beta_inter"):
        assert kernel.params[name] == fits["gloo"].params[name] == pytest.approx(STEPS.__dict__[name], rel=1e-3)
        assert kernel.rel_std[name] is None
    assert kernel.median_error < 1e-3 and kernel.p90_error < 1e-3  # its own α, β, γ explain the rest
    assert not fits["gloo"].borrowed

    # predicted at scale with the kernel group's parameters (the borrowed link included); the one-node kernels not
    params = {f.engine: f.to_params() for f in fits.values()}
    table = predict(params, Shape(8, 4), "all_reduce", [8, 2**24]).set_index(["algorithm", "size_bytes"]).time_us
    assert {"hierarchical", "hierarchical_kernel"} <= set(table.index.get_level_values(0))
    assert "ring_kernel" not in set(table.index.get_level_values(0))
    for size in (8, 2**24):
        truth = time_s(FLAGS, "hierarchical_kernel", "all_reduce", Shape(8, 4, lanes=kernel.lanes), size)
        assert table[("hierarchical_kernel", size)] == pytest.approx(truth * 1e6, rel=1e-2)
    assert table[("hierarchical_kernel", 8)] < table[("hierarchical", 8)]  # 2(G-1) hand-offs, not library calls

    # held out: a size left out of every group (the step group's link refitted without it too) is predicted
    few = dict(collectives=("all_reduce",), sizes=(3, 12, 18, 24))
    errors = held_out(usable_rows(pd.concat([_synthetic(STEPS, ["ring", "hierarchical"], [one_node, two_nodes], **few),
                                             _synthetic(FLAGS, ["ring_kernel"], [one_node], **few),
                                             _synthetic(FLAGS, ["hierarchical_kernel"], [two_nodes], **few)])),
                      "size_bytes")
    assert len(errors[errors.algorithm == "hierarchical_kernel"]) == 4
    assert summary(errors[errors.algorithm == "hierarchical_kernel"])["median_abs_error"] < 1e-2

    # no step points across nodes: the kernel group fits the link from hierarchical_kernel's own points
    alone = {f.group: f for f in fit(pd.concat([steps[steps.nodes == 1], kernels, mixed]))}
    assert alone["gloo"].params["beta_inter"] is None and not alone["gloo/kernel"].borrowed
    assert alone["gloo/kernel"].params["beta_inter"] == pytest.approx(FLAGS.beta_inter, rel=0.05)

    model = tmp_path / "model.json"
    model.write_text(json.dumps(to_json(list(fits.values()), ["x"])))
    proc = commbench("model", "predict", "--nodes", 4, "--ranks-per-node", 8, "--model", model, "-e", "1M", check_rc=OK)
    assert "hierarchical_kernel" in proc.stdout and "ring_kernel" not in proc.stdout

