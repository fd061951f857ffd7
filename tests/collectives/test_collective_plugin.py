"""A collective defined here alone (all-to-all) runs natively through the normal run path: the
CLI in a subprocess, with COMMBENCH_PLUGINS naming a module that registers it, on MPI and on
gloo. Nothing in the package knows about all-to-all; its spec says everything.

This module is imported by the ranks (through the plugin module), so it imports no conftest at
its top: that would pull the whole run machinery in while the registry is still loading."""

import os

import numpy as np
import pytest

from commbench.binaries import find_binary
from commbench.dtypes import DTYPES
from commbench.collectives import COLLECTIVES
from commbench.collectives.base import Collective, Counts, NativeCall
from commbench.collectives.patterns import Pattern, tile
from commbench.errors import BAD_INPUT, OK

TESTS = os.path.dirname(os.path.abspath(__file__))
PLUGIN = "from commbench.collectives import register\nfrom test_collective_plugin import AllToAll\n\nregister(AllToAll())\n"


class AllToAll(Collective):
    """Rank r sends block j of its buffer to rank j, so its output's block i comes from rank i.
    size = one rank's buffer (nccl-tests alltoall)."""

    name = "all_to_all"
    reduces = False
    native = {"mpi": NativeCall("Alltoall", "send_recv"),
              # gloo exchanges blocks of one tensor racily in place (wrong results): out of place only
              "torch": NativeCall("all_to_all_single", "output_input", in_place=False)}
    nccl_tests_name = "alltoall"

    def bus_factor(self, world):
        return (world - 1) / world

    def counts(self, size_bytes, itemsize, world):
        n = size_bytes // itemsize // world * world
        return Counts(n, n, n * itemsize)

    def expected(self, pattern, rank, counts, start, length):
        block = counts.in_count // pattern.world
        idx = np.arange(start, start + length)
        src = idx // block
        out = np.empty(length)
        for s in np.unique(src):
            sel = src == s
            out[sel] = tile(pattern.values(int(s)), rank * block + int(idx[sel][0] % block), int(sel.sum()))
        return out


def test_expected_is_the_exchange_of_blocks():
    coll, world = AllToAll(), 3
    p = Pattern(None, DTYPES["int32"], world)
    counts = coll.counts(3 * 4 * 1500 + 7, 4, world)  # rounded down to whole blocks
    assert (counts.in_count, counts.out_count, counts.size_bytes) == (4500, 4500, 18000)
    inputs = [tile(p.values(r), 0, counts.in_count).reshape(world, -1) for r in range(world)]
    for r in range(world):
        exchanged = np.concatenate([inputs[src][r] for src in range(world)])
        assert np.array_equal(coll.expected(p, r, counts, 0, counts.out_count), exchanged)
        assert np.array_equal(coll.expected(p, r, counts, 1400, 200), exchanged[1400:1600])
    assert coll.bus_factor(4) == pytest.approx(0.75)


def test_the_names_other_tools_use_come_from_the_registry(monkeypatch):
    from commbench.analysis.importers.nccl_tests import _nccl_tests_collective
    from commbench.rank import nccl_log
    from commbench.machine import traffic
    from commbench.collectives import lookup

    monkeypatch.setitem(COLLECTIVES, "all_to_all", AllToAll())
    assert lookup("all_to_all").name == "all_to_all"
    assert _nccl_tests_collective("# ./build/alltoall_perf -b 8") == "all_to_all"
    assert _nccl_tests_collective("# ./build/all_gather_perf -b 8") == "all_gather"
    line = "h:1:1 [0] NCCL INFO AllReduce: 1024 Bytes -> Algo RING proto LL"
    assert nccl_log.choice([line], "all_to_all", 1024) == ""  # NCCL logs no all-to-all of its own
    assert traffic.block_elems("all_to_all", Counts(6, 6, 24)) == 6


def _run(tmp_path, backend, *extra):
    from conftest import commbench, load_run

    (tmp_path / "alltoall_plugin.py").write_text(PLUGIN)
    env = {"COMMBENCH_PLUGINS": "alltoall_plugin",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), TESTS] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    out = tmp_path / "run"
    commbench("run", "-c", "all_to_all", "--backend", backend, "-n", 2, "--sizes", "8,1028,65548,1M",
              "-d", "float32,int8", "--both", "--iters", 3, "-w", 1, "--out", out, "--quiet", *extra,
              env=env, check_rc=OK)
    return load_run(out)


def _check_rows(rows, meta, modes):
    assert set(rows.collective) == {"all_to_all"}
    assert set(rows.in_place) == modes
    assert len(rows) == 4 * 2 * len(modes)  # sizes x dtypes x modes
    assert (rows.wrong == 0).all()
    assert rows.bus_factor.tolist() == pytest.approx([0.5] * len(rows))  # (n-1)/n, as nccl-tests alltoall
    assert (rows.size_bytes % (2 * rows.dtype.map({"float32": 4, "int8": 1})) == 0).all()  # whole blocks
    assert set(rows.op) == {"none"}
    assert meta["wrong_total"] == 0


@pytest.mark.skipif(find_binary("mpirun") is None and not os.environ.get("CI"), reason="mpirun is not installed")
def test_all_to_all_plugin_on_mpi(job, tmp_path):
    rows, _, meta = _run(tmp_path, "mpi")
    _check_rows(rows, meta, {0, 1})  # MPI_Alltoall takes MPI_IN_PLACE
    assert meta["skipped"] == []


def test_all_to_all_plugin_on_gloo(job, tmp_path):
    pytest.importorskip("torch")
    rows, _, meta = _run(tmp_path, "gloo")
    _check_rows(rows, meta, {0})
    reasons = {s["reason"] for s in meta["skipped"]}
    assert reasons == {"torch.distributed.all_to_all_single gives wrong results in place (no in-place form to measure; "
                       "out-of-place points measure it)"}
    assert len(meta["skipped"]) == 4 * 2 and all(s["in_place"] for s in meta["skipped"])


def test_a_plugin_that_cannot_be_imported_is_one_line_exit_2(job):
    from conftest import commbench

    proc = commbench("run", "-n", 2, "--sizes", "8", env={"COMMBENCH_PLUGINS": "no_such_plugin_module"})
    assert proc.returncode == BAD_INPUT and proc.stderr.strip().splitlines() == [
        "commbench: error: COMMBENCH_PLUGINS: cannot import 'no_such_plugin_module' "
        "(ModuleNotFoundError: No module named 'no_such_plugin_module')"], proc.stderr
