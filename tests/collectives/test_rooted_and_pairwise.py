"""The six collectives of issue 36 as facts (their files under commbench/collectives/): sizes and
bus factors as nccl-tests counts them, each rank's exact output computed here independently from
every rank's input, the root's place, footprints, names; the cost model refuses a collective it does
not know. Real jobs: tests/run/test_rooted_and_pairwise_jobs.py."""

from dataclasses import replace

import numpy as np
import pytest

from commbench.dtypes import DTYPES
from commbench.algorithms.cost import footprint
from commbench.collectives import COLLECTIVES, default_collectives
from commbench.collectives.patterns import Pattern
from commbench.spec import collective_aliases

F32 = DTYPES["float32"]


def _inputs(pattern, counts, world):
    """Every rank's input buffer, as the harness fills it."""
    return [np.resize(pattern.values(r), counts.in_count) for r in range(world)]


def _whole(coll, pattern, rank, counts):
    return coll.expected(pattern, rank, counts, 0, counts.out_count)


@pytest.mark.parametrize("world", [2, 3, 8])
def test_bus_factors_and_sizes_are_nccl_tests(world):
    factor = {"broadcast": 1, "reduce": 1, "send_recv": 1, "all_to_all": (world - 1) / world,
              "gather": (world - 1) / world, "scatter": (world - 1) / world}
    for name, f in factor.items():
        assert COLLECTIVES[name].bus_factor(world) == pytest.approx(f), name
    size = 4 * world * 1000 + 4  # not a whole number of blocks: rounded down as nccl-tests does
    b = COLLECTIVES["broadcast"].counts(size, 4, world)
    assert (b.in_count, b.out_count, b.size_bytes) == (size // 4, size // 4, size)
    a = COLLECTIVES["all_to_all"].counts(size, 4, world)  # one rank's whole input: n blocks
    assert (a.in_count, a.out_count, a.size_bytes) == (world * 1000, world * 1000, world * 4000)
    g = COLLECTIVES["gather"].counts(size, 4, world)  # the gathered output
    assert (g.in_count, g.out_count) == (1000, world * 1000)
    s = COLLECTIVES["scatter"].counts(size, 4, world)  # the root's whole input
    assert (s.in_count, s.out_count) == (world * 1000, 1000)


@pytest.mark.parametrize("root", [0, 2])
def test_broadcast_and_scatter_take_the_roots_data(root):
    world, p = 4, Pattern(None, F32, 4)
    b = replace(COLLECTIVES["broadcast"].counts(4 * 3000, 4, world), root=root)
    inputs = _inputs(p, b, world)
    for r in range(world):
        assert np.array_equal(_whole(COLLECTIVES["broadcast"], p, r, b), inputs[root])
    s = replace(COLLECTIVES["scatter"].counts(4 * 4 * 700, 4, world), root=root)
    root_input = _inputs(p, s, world)[root]
    for r in range(world):
        assert np.array_equal(_whole(COLLECTIVES["scatter"], p, r, s), root_input[r * 700:(r + 1) * 700])


@pytest.mark.parametrize("op", ["sum", "prod", "min", "max", "avg"])
def test_reduce_is_the_reduction_on_the_root_and_unchecked_elsewhere(op):
    world, root, coll = 3, 1, COLLECTIVES["reduce"]
    p = Pattern(op, F32, world)
    counts = replace(coll.counts(4 * 2500, 4, world), root=root)
    inputs = np.stack(_inputs(p, counts, world))
    reduce = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max, "avg": np.mean}[op]
    assert np.allclose(_whole(coll, p, root, counts), reduce(inputs, axis=0), rtol=0, atol=1e-12)
    for r in (0, 2):
        assert np.isnan(_whole(coll, p, r, counts)).all()  # not the root: undefined, not checked


def test_gather_is_every_block_on_the_root():
    world, root, coll = 3, 2, COLLECTIVES["gather"]
    p = Pattern(None, F32, world)
    counts = replace(coll.counts(4 * 3 * 800, 4, world), root=root)
    inputs = _inputs(p, counts, world)
    assert np.array_equal(_whole(coll, p, root, counts), np.concatenate(inputs))
    assert np.isnan(_whole(coll, p, 0, counts)).all()


@pytest.mark.parametrize("world", [2, 3, 5])
def test_all_to_all_block_q_of_rank_r_is_block_r_of_rank_q(world):
    coll, p = COLLECTIVES["all_to_all"], Pattern(None, F32, world)
    per = 1100  # past PERIOD: blocks start at other offsets of each rank's pattern
    counts = coll.counts(4 * per * world, 4, world)
    inputs = _inputs(p, counts, world)
    for r in range(world):
        expected = np.concatenate([inputs[q][r * per:(r + 1) * per] for q in range(world)])
        assert np.array_equal(_whole(coll, p, r, counts), expected)
        assert np.array_equal(coll.expected(p, r, counts, per - 7, 20), expected[per - 7:per + 13])  # a window


def test_send_recv_receives_the_left_neighbours_buffer():
    world, coll = 4, COLLECTIVES["send_recv"]
    p = Pattern(None, F32, world)
    counts = coll.counts(4 * 1500, 4, world)
    inputs = _inputs(p, counts, world)
    for r in range(world):
        assert np.array_equal(_whole(coll, p, r, counts), inputs[(r - 1) % world])


def test_rooted_and_default_and_names():
    assert {n for n, c in COLLECTIVES.items() if c.rooted} == {"broadcast", "reduce", "gather", "scatter"}
    assert default_collectives() == ["all_reduce", "all_gather", "reduce_scatter"]  # -c not given: the three
    aliases = collective_aliases()
    for alias, name in (("bcast", "broadcast"), ("osu_bcast", "broadcast"), ("alltoall", "all_to_all"),
                        ("alltoall_perf", "all_to_all"), ("sendrecv_perf", "send_recv"), ("Reduce", "reduce")):
        assert aliases[alias] == name
    assert all(COLLECTIVES[n].description for n in COLLECTIVES)  # the docs' generated table says what each means


@pytest.mark.parametrize("name", list(COLLECTIVES))
def test_each_collective_owns_its_footprint(name):
    """The cost model's working set is the collective's own (input + output; one buffer in place),
    never another's taken for it."""
    coll, n, size = COLLECTIVES[name], 4, 4096.0
    if coll.takes_traffic:  # its size is the busiest rank's send or receive: both buffers of that size
        assert footprint(name, size, n, False) == 2 * size
        return
    c = coll.counts(4096 * 64, 1, n)
    ratio_in, ratio_out = c.in_count / (4096 * 64), c.out_count / (4096 * 64)
    assert footprint(name, size, n, False) == pytest.approx(size * (ratio_in + ratio_out))
    assert footprint(name, size, n, True) == pytest.approx(size * max(ratio_in, ratio_out))


def test_the_cost_model_refuses_a_collective_it_does_not_know():
    with pytest.raises(ValueError, match="the cost model knows no collective 'alltoallv'"):
        footprint("alltoallv", 1024, 4, False)
