import numpy as np
import pytest

from commbench.dtypes import DTYPES
from commbench.collectives import COLLECTIVES
from commbench.collectives.patterns import Pattern


@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
def test_bus_factors_are_nccl_tests(world):
    assert COLLECTIVES["all_reduce"].bus_factor(world) == pytest.approx(2 * (world - 1) / world)
    assert COLLECTIVES["all_gather"].bus_factor(world) == pytest.approx((world - 1) / world)
    assert COLLECTIVES["reduce_scatter"].bus_factor(world) == pytest.approx((world - 1) / world)


def test_size_semantics():
    ar = COLLECTIVES["all_reduce"].counts(1000, 4, 3)
    assert (ar.in_count, ar.out_count, ar.size_bytes) == (250, 250, 1000)
    ag = COLLECTIVES["all_gather"].counts(1000, 4, 3)  # size = gathered output, rounded down
    assert (ag.in_count, ag.out_count, ag.size_bytes) == (83, 249, 996)
    rs = COLLECTIVES["reduce_scatter"].counts(1000, 4, 3)  # size = one rank's input
    assert (rs.in_count, rs.out_count, rs.size_bytes) == (249, 83, 996)
    assert COLLECTIVES["all_gather"].counts(8, 4, 4).size_bytes == 0
    for c in (ar, ag, rs):
        assert c.count * 4 == c.size_bytes


def test_all_gather_expected_is_rank_blocks():
    coll, world = COLLECTIVES["all_gather"], 3
    p = Pattern(None, DTYPES["int32"], world)
    counts = coll.counts(3 * 4 * 1500, 4, world)
    whole = coll.expected(p, 0, counts, 0, counts.out_count)
    for r in range(world):
        block = whole[r * 1500:(r + 1) * 1500]
        assert np.array_equal(block, np.resize(p.values(r), 1500))
    # any window equals the same slice of the whole
    assert np.array_equal(coll.expected(p, 2, counts, 1400, 200), whole[1400:1600])


def test_reduce_scatter_expected_is_block_of_reduction():
    coll, world = COLLECTIVES["reduce_scatter"], 4
    p = Pattern("sum", DTYPES["float32"], world)
    counts = coll.counts(4 * 4 * 3000, 4, world)
    full = np.resize(p.reduced, counts.in_count)
    for r in range(world):
        assert np.array_equal(coll.expected(p, r, counts, 0, 3000), full[r * 3000:(r + 1) * 3000])


@pytest.mark.parametrize("name", [n for n, c in COLLECTIVES.items() if not c.takes_traffic])  # (osu_alltoallv: even)
def test_an_osu_size_is_the_message_osu_times(name):
    """OSU's Size: what each rank sends (all-gather, gather), sends each rank (all-to-all: one block),
    receives (scatter), or the buffer (the others)."""
    coll = COLLECTIVES[name]
    for world, osu in ((2, 4096), (3, 1200), (4, 16)):  # whole elements per rank and block
        counts = coll.counts(coll.size_of_osu(osu, world), 4, world)
        message = {"all_to_all": counts.in_count // world, "scatter": counts.out_count}.get(name, counts.in_count)
        assert message * 4 == osu, (name, world, counts)


@pytest.mark.parametrize("library,module", [("mpi", "commbench.backends.mpi"),
                                            ("torch", "commbench.backends.torch_dist")])
def test_every_declared_native_call_exists_in_its_backend(library, module):
    pytest.importorskip("mpi4py" if library == "mpi" else "torch")
    import importlib

    backend = importlib.import_module(module)
    target = __import__("mpi4py.MPI").MPI.COMM_WORLD if library == "mpi" else __import__("torch.distributed").distributed
    for coll in COLLECTIVES.values():
        call = coll.native[library]
        assert call.convention in backend.CONVENTIONS, (coll.name, call)
        assert call.resolve(target) is not None, (coll.name, call)


def test_names_other_tools_use_are_unique():
    for attr in ("nccl_function", "nccl_tests_name", "osu_title"):
        values = [getattr(c, attr) for c in COLLECTIVES.values() if getattr(c, attr)]
        assert len(values) == len(set(values)), attr  # (not every tool has every collective)
    assert all(c.nccl_tests_name for c in COLLECTIVES.values())  # nccl-tests has all nine


def test_message_elems_is_one_ranks_block():
    counts = {name: c.counts(4 * 12 * 100, 4, 4) for name, c in COLLECTIVES.items()}
    assert {name: COLLECTIVES[name].message_elems(c) for name, c in counts.items()} == {
        "all_reduce": 1200, "all_gather": 300, "reduce_scatter": 300, "broadcast": 1200, "reduce": 1200,
        "all_to_all": 1200, "all_to_allv": 1200, "gather": 300, "scatter": 300, "send_recv": 1200}


def test_every_module_of_the_package_is_a_registered_collective_in_the_default_sweeps_order():
    from commbench import collectives

    found = collectives.package_collectives()
    assert [c.name for c in found] == list(COLLECTIVES)[:len(found)] == [
        "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_allv", "broadcast", "gather", "reduce",
        "scatter", "send_recv"]
    assert collectives.default_collectives() == ["all_reduce", "all_gather", "reduce_scatter"]
    assert all(type(COLLECTIVES[c.name]) is type(c) for c in found)  # one instance each, base.py's mixins none


def test_a_new_module_is_a_new_collective_with_nothing_else_edited(tmp_path, monkeypatch):
    """Adding a collective inside the package is its module alone: a module on the package's path is
    found, and a class it imports (here AllReduce, for its subclass) is not registered twice."""
    import sys

    from commbench import collectives

    (tmp_path / "all_reduce_again.py").write_text(
        "from commbench.collectives.all_reduce import AllReduce\n\n\n"
        "class AllReduceAgain(AllReduce):\n    name = 'all_reduce_again'\n    default_sweep = 0\n")
    monkeypatch.setattr(collectives, "__path__", [*collectives.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "commbench.collectives.all_reduce_again", raising=False)
    names = [c.name for c in collectives.package_collectives()]
    assert names.count("all_reduce") == 1 and names.index("all_reduce_again") == 3
    sys.modules.pop("commbench.collectives.all_reduce_again", None)
