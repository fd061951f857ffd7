import numpy as np
import pytest

from commbench.rank.collectives import COLLECTIVES
from commbench.dtypes import DTYPES
from commbench.rank.patterns import Pattern


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
