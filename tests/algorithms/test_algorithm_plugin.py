"""A new algorithm is one file plus one registry line: a toy all-reduce defined here alone
(every rank sends its whole buffer to every other rank, then adds what arrived), with its
traffic and its cost, and a plugin module holding the registry line (COMMBENCH_PLUGINS). With no
other file touched, `commbench run` measures it, `commbench model predict` predicts it and
`commbench run --help` names it.

The ranks import this module (through the plugin), so its top imports rank code only."""

import os
from collections import Counter

import pytest

from commbench import plugins
from commbench.binaries import find_binary
from commbench.algorithms import ALGORITHMS, Algorithm
from commbench.algorithms.base import reduce_op, scratch_pair
from commbench.errors import OK

NAME = "toy_gather_all"
TESTS = os.path.dirname(os.path.abspath(__file__))
PLUGIN = "from commbench.algorithms import register\nfrom test_algorithm_plugin import GatherAll\n\nregister(GatherAll())\n"


class GatherAll(Algorithm):
    name = NAME
    description = "toy: every rank sends its buffer to every other and adds what arrives"

    def all_reduce(self, ctx, buf, op):
        comm, red, n = ctx.comm, ctx.reducer, ctx.comm.size
        mine, tmp = (comm.view(b, 0, len(buf)) for b in scratch_pair(ctx, NAME, len(buf), buf))
        red.copy(mine, buf)
        for d in range(1, n):  # step d: to the rank d to the right, from the rank d to the left
            comm.sendrecv(mine, (comm.rank + d) % n, tmp, (comm.rank - d) % n, tag=9)
            red.reduce(buf, tmp, reduce_op(op))
        red.finish(buf, op, n)

    def messages(self, collective, elems, node_of_rank, segment_elems=1 << 18):
        n = len(node_of_rank)
        return Counter({(r, q): elems for r in range(n) for q in range(n) if q != r})

    def cost(self, p, shape, collective, size_bytes, segment_bytes):
        """n ranks, N bytes:  all-reduce  Σ_{d=1..n-1} (α + N·β·L_d) + (n-1)·N·γ"""
        node_of, n = shape.node_of(), shape.n
        steps = sum(shape.step_time(p, [(r, (r + d) % n) for r in range(n)], node_of, size_bytes) for d in range(1, n))
        return steps + (n - 1) * size_bytes * p.gamma * shape.reduce_load(range(n))


def _commbench(tmp_path, *args):
    """The CLI with the plugin module (the registry line) on COMMBENCH_PLUGINS."""
    from conftest import commbench

    (tmp_path / "toy_plugin.py").write_text(PLUGIN)
    env = {plugins.PLUGINS_ENV: "toy_plugin",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), TESTS] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    return commbench(*args, env=env, check_rc=OK)


def test_metadata_and_cost_come_from_the_class(monkeypatch):
    from commbench.analysis.model.costs import Params, Shape, modelled, time_s
    from commbench.analysis.model.predict import predicted

    monkeypatch.setitem(ALGORITHMS, NAME, GatherAll())
    toy = ALGORITHMS[NAME]
    assert toy.collectives == ("all_reduce",) and toy.modelled
    assert NAME in modelled() and NAME in predicted()
    alpha, beta = Params(1e-6, 0.0, 1e-5, 0.0, 0.0), Params(0.0, 1e-9, 0.0, 1e-8, 0.0)
    assert time_s(alpha, NAME, "all_reduce", Shape(1, 4), 8) == pytest.approx(3 * 1e-6)  # n-1 steps
    assert time_s(beta, NAME, "all_reduce", Shape(1, 4), 2**20) == pytest.approx(3 * 2**20 * 1e-9)
    assert time_s(alpha, NAME, "all_gather", Shape(1, 4), 8) is None  # no such method: not supported
    assert not ALGORITHMS["peer_oneshot"].modelled and "peer_oneshot" not in modelled()
    assert "ring_topology" in modelled() and "ring_topology" not in predicted()


@pytest.mark.skipif(find_binary("mpirun") is None and not os.environ.get("CI"), reason="mpirun is not installed")
def test_run_measures_the_plugin_algorithm(job, tmp_path):
    import pandas as pd

    out = tmp_path / "run"
    _commbench(tmp_path, "run", "-a", NAME, "--backend", "mpi", "-n", 3, "-c", "all_reduce", "--sizes", "12,4100",
               "-d", "float32,int32", "--iters", 2, "-w", 0, "--out", out, "--quiet")
    rows = pd.read_csv(out / "results.csv")
    assert set(rows.algorithm) == {NAME} and len(rows) == 2 * 2 * 2 and set(rows.in_place) == {0, 1}
    assert (rows.wrong == 0).all() and (rows.time_us > 0).all()


def test_model_predicts_the_plugin_algorithm(tmp_path):
    import pandas as pd

    proc = _commbench(tmp_path, "model", "predict", "--nodes", 2, "--ranks-per-node", 2, "--intra", "450,2",
                      "--inter", "50,5", "-e", "1M", "--out", tmp_path / "p")
    assert NAME in proc.stdout.splitlines()[2]  # a column of the table
    rows = pd.read_csv(tmp_path / "p" / "results.csv")
    toy = rows[rows.algorithm == NAME].set_index("size_bytes")
    assert len(toy) > 0 and (toy.internode_bytes_expected > 0).all()  # its messages() cross the nodes
    # 2x2, α' = 5 µs between nodes: each of the 3 steps has messages between nodes
    assert toy.time_us.iloc[0] == pytest.approx(3 * 5, rel=0.01)


def test_help_names_the_plugin_algorithm(job, tmp_path):
    assert NAME in _commbench(tmp_path, "run", "--help").stdout
