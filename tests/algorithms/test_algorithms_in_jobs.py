"""commbench's own algorithms in real jobs: every algorithm x every collective it supports x world
sizes 2, 3, 4, 5, 8 x dtypes x ops x both buffer modes, counts that do not divide by the world
size, tiny segments so pipelining runs on small buffers; exact against the known answer."""

import pytest

from commbench.algorithms import ALGORITHMS
from commbench.collectives import COLLECTIVES, default_collectives
from conftest import commbench, load_run, needs_mpirun
from sweep_checks import check_sweep
from commbench.errors import OK

# the algorithms that send messages (the peer-memory ones run on one node: test_peer.py)
OWN = [name for name, algorithm in ALGORITHMS.items() if algorithm.sends_messages]
ALGOS = ["native", *OWN]
# (-c not given: the three; the other six: tests/run/test_rooted_and_pairwise_jobs.py)
SUPPORTS = {"native": tuple(default_collectives())} | {name: tuple(c for c in ALGORITHMS[name].collectives
                                                                  if c in default_collectives()) for name in OWN}
RANKS_PER_NODE = {2: 1, 3: 1, 4: 2, 5: 5, 8: 2}  # uniform layouts: 2x1, 3x1, 2x2, 1x5, 4x2
KNOWN_SKIPS = ("has no reduce-scatter", "has no all-gather", "has no all-reduce", "less than one element per rank",
               "works in place only", "MPI has no bfloat16")


def _run(tmp_path, backend, world, dtypes, ops, extra=()):
    out = tmp_path / "run"
    commbench("run", "-n", world, "--backend", backend, "-a", ",".join(ALGOS), "--ranks-per-node",
              RANKS_PER_NODE[world], "--sizes", "12,4100", "--segment-bytes", 256, "-d", ",".join(dtypes),
              "-o", ",".join(ops), "--both", "--iters", 1, "-w", 0, "--out", out, "--quiet", *extra, check_rc=OK)
    return load_run(out)


# MPI at every world size; gloo (whose transfers the algorithms' steps use as MPI's) where it adds what MPI
# cannot: its own arithmetic (every dtype, bfloat16, and op) at 2 and 3 ranks, several nodes of 2 at 8
GLOO_WORLDS = (2, 3, 8)


@needs_mpirun
@pytest.mark.parametrize("backend,world", [pytest.param("mpi", 3, marks=pytest.mark.smoke), *[
    (b, w) for b in ("mpi", "gloo") for w in (2, 3, 4, 5, 8) if (b, w) != ("mpi", 3) and (b == "mpi" or w in GLOO_WORLDS)]])
def test_algorithms_exact(job, tmp_path, backend, world):
    if backend == "gloo":
        pytest.importorskip("torch")
    dtypes, ops = ["float32", "float64", "int32", "float16"] + (["bfloat16"] if backend == "gloo" else []), \
        ["sum", "max", "min", "prod"]
    if backend == "gloo" and world >= 4:
        # at 8 ranks (as slow as MPI's full matrix x 9 on 2 cores) the algorithms' structure over gloo's
        # transfers, on uneven blocks at every size
        dtypes, ops = ["float16", "float64"], ["sum", "max"]
    rows, samples, meta = _run(tmp_path, backend, world, dtypes, ops)
    check_sweep(rows, samples, meta, world, meta["planned_points"] - len(meta["skipped"]))
    for s in meta["skipped"]:
        assert any(k in s["reason"] for k in KNOWN_SKIPS), s
    measured = rows[rows.size_bytes > 100]  # 4100 B: every combination fits
    for algo, collectives in SUPPORTS.items():
        got = measured[measured.algorithm == algo]
        assert set(got.collective) == set(collectives), algo
        assert set(got.dtype) == (set(dtypes) if collectives else set()), algo
    uneven = measured[(measured.collective == "all_reduce") & (measured["count"] % world != 0)]
    assert set(uneven.algorithm) == {a for a in ALGOS if SUPPORTS[a]}  # 1025 float32 (512 float64) elements: uneven blocks
    assert (rows.nodes == world // RANKS_PER_NODE[world]).all()


@needs_mpirun
def test_avg_and_topology_ring_order(job, tmp_path):
    """MPI has no avg, but commbench's algorithms do: sum, then one division at the end."""
    rows, samples, meta = _run(tmp_path, "mpi", 4, ["float32", "float16"], ["avg"], ("--ring-order", "topology"))
    check_sweep(rows, samples, meta, 4, meta["planned_points"] - len(meta["skipped"]))
    reduced = rows[rows.collective != "all_gather"]  # all-gather has no op: native runs there
    # --ring-order topology (the older spelling) turns ring into ring_topology
    assert set(reduced.algorithm) == {a for a in ALGOS if SUPPORTS[a]} - {"native", "ring"} and set(reduced.op) == {"avg"}
    assert any("MPI has no avg reduction" in s["reason"] for s in meta["skipped"])
    assert meta["spec"]["ring_order"] == "topology"



@needs_mpirun
def test_values_growing_in_timed_loops_raise_no_warnings(job, tmp_path):
    """Fifty in-place float16 sums of 4 ranks overflow in the timed loop (by design: the check
    starts from a fresh fill); the ranks print no numpy warning about it, and the point is exact."""
    out = tmp_path / "run"
    proc = commbench("run", "-n", 4, "--backend", "mpi", "-a", "ring,hierarchical,peer_oneshot", "--ranks-per-node", 2,
                     "-c", "all_reduce", "-d", "float16", "--sizes", "4K", "--in-place", "--iters", 50,
                     "--out", out, "--quiet", check_rc=OK)
    rows, _, _ = load_run(out)
    assert len(rows) == 2 and (rows.wrong == 0).all()  # peer_oneshot: one node only, skipped
    assert "Warning" not in proc.stderr + proc.stdout, proc.stderr[-2000:]
