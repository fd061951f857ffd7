"""The α-β-γ parameters and the machine shape every cost() is written with
(commbench/algorithms/cost.py): a message's cost per link class and load, the cache model,
contention, one step's slowest class, and the buffers' footprint; values worked by hand."""

import pytest

from commbench.algorithms.cost import Params, Shape, footprint

P = Params(alpha_intra=1e-6, beta_intra=1e-9, alpha_inter=1e-5, beta_inter=1e-8, gamma=1e-10,
           mem_factor=2.0, cache_bytes=1000.0)


def test_step_inter_loads_the_bytes_intra_loads_the_whole_message():
    """inter: α + m·L·β; intra: (α + m·β)·L, a busy node's CPU time, α too."""
    assert P.step(True, 1000, 1) == pytest.approx(1e-5 + 1e-5, rel=1e-12)
    assert P.step(True, 1000, 3) == pytest.approx(1e-5 + 3e-5, rel=1e-12)
    assert P.step(False, 1000, 1) == pytest.approx(2e-6, rel=1e-12)
    assert P.step(False, 1000, 3) == pytest.approx(6e-6, rel=1e-12)


def test_in_memory_streams_the_fraction_beyond_the_cache():
    """W = 4C: 1 - C/W = 3/4 of the bytes miss; 1 + 2·3/4 = 2.5 times β_intra and γ; the links
    between nodes and every α keep their values."""
    slow = P.in_memory(4000.0)
    assert slow.beta_intra == pytest.approx(2.5e-9, rel=1e-12) and slow.gamma == pytest.approx(2.5e-10, rel=1e-12)
    assert (slow.alpha_intra, slow.alpha_inter, slow.beta_inter) == (1e-6, 1e-5, 1e-8)
    assert (slow.mem_factor, slow.cache_bytes) == (2.0, 1000.0)
    for fits in (1000.0, 10.0, 0.0):  # within the cache, or nothing touched: unchanged
        assert P.in_memory(fits) == P


def test_in_memory_without_a_cache_streams_everything():
    p = Params(1e-6, 1e-9, 1e-5, 1e-8, 1e-10, mem_factor=0.5)
    assert p.in_memory(1.0).beta_intra == pytest.approx(1.5e-9, rel=1e-12)


def test_from_values_counts_missing_parameters_as_free():
    p = Params.from_values({"alpha_intra": 2e-6, "beta_inter": None, "gamma": 3e-11, "unknown": 5.0})
    assert p == Params(2e-6, 0.0, 0.0, 0.0, 3e-11, 0.0, 0.0)


def test_shape_ranks_and_placements():
    assert Shape(3, 2).n == 6
    assert Shape(3, 2).node_of() == [0, 0, 1, 1, 2, 2]
    assert Shape(3, 2, placement="round-robin").node_of() == [0, 1, 2, 0, 1, 2]


def test_contention_is_copies_over_lanes_at_least_one():
    assert [Shape(1, 4).contention(c) for c in (0, 1, 4, 5, 8, 9)] == [1, 1, 1, 2, 2, 3]  # lanes: one per rank
    assert [Shape(1, 4, lanes=3).contention(c) for c in (1, 3, 4, 7)] == [1, 1, 2, 3]


def test_step_time_is_the_slowest_class():
    """2 nodes of 2. Pairs (0,2) and (1,3) both leave node 0 (one link: L = 2), (2,3) stays in
    node 1: max(α_inter + m·2·β_inter, α_intra + m·β_intra)."""
    shape, node_of = Shape(2, 2), [0, 0, 1, 1]
    t = shape.step_time(P, [(0, 2), (1, 3), (2, 3)], node_of, 500)
    assert t == pytest.approx(1e-5 + 500 * 2 * 1e-8, rel=1e-12)
    two_links = Shape(2, 2, links_per_node=2)
    assert two_links.step_time(P, [(0, 2), (1, 3)], node_of, 500) == pytest.approx(1e-5 + 500 * 1e-8, rel=1e-12)
    # only inside: three copies on a node of 2 lanes, L = 2
    inside = shape.step_time(P, [(0, 1), (1, 0), (0, 1)], [0, 0, 1, 1], 1000)
    assert inside == pytest.approx((1e-6 + 1000 * 1e-9) * 2, rel=1e-12)
    # an intra step that is slower than the inter one wins
    slow_intra = Params(1e-3, 0.0, 1e-6, 0.0, 0.0)
    assert shape.step_time(slow_intra, [(0, 2), (2, 3)], node_of, 1) == pytest.approx(1e-3, rel=1e-12)
    assert shape.step_time(P, [], node_of, 1000) == 0.0


def test_reduce_load_counts_the_busiest_node():
    shape = Shape(2, 2, lanes=1)
    assert shape.reduce_load([0, 1, 2]) == 2  # node 0 reduces twice on one lane
    assert shape.reduce_load([0, 2]) == 1
    assert shape.reduce_load([]) == 1
    assert Shape(2, 4).reduce_load(range(8)) == 1


@pytest.mark.parametrize("n", [2, 4])
def test_footprint(n):
    assert footprint("all_reduce", 1000, n, True) == 1000
    assert footprint("all_reduce", 1000, n, False) == 2000
    for collective in ("all_gather", "reduce_scatter"):  # N, and one rank's block beside it out of place
        assert footprint(collective, 1000, n, True) == 1000
        assert footprint(collective, 1000, n, False) == pytest.approx(1000 + 1000 / n)
