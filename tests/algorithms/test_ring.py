"""ring and ring_topology (commbench/algorithms/ring.py) with threads as ranks: exact results
at several world sizes and uneven counts, every op, segmented steps, out of place through src=;
what the ranks really send against messages(); cost() against its docstring's formula."""

from collections import Counter

import numpy as np
import pytest
from algorithm_ranks import assert_exact, run, uneven_counts
from nccl_semantics import World

from commbench.algorithms import ALGORITHMS, Context
from commbench.algorithms.cost import Params, Shape
from commbench.algorithms.ring import Ring, TopologyRing, ring_messages

RING, TOPO = Ring(), TopologyRing()
P = Params(alpha_intra=1e-6, beta_intra=1e-9, alpha_inter=1e-5, beta_inter=1e-8, gamma=1e-10)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("op,dtype", [("sum", "int64"), ("prod", "int32"), ("min", "int64"), ("max", "float32"),
                                      ("avg", "float64"), ("sum", "float32")])
def test_all_reduce_exact(n, op, dtype):
    for count in uneven_counts(n):
        values, outputs, _, _ = run(RING, "all_reduce", n, count, op, dtype, segment_elems=3, repeat=2)
        assert_exact("all_reduce", values, outputs, op, count)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("block", [1, 5])
def test_reduce_scatter_and_all_gather_exact(n, block):
    for op, dtype in (("sum", "int64"), ("max", "int32"), ("avg", "float64")):
        values, outputs, _, _ = run(RING, "reduce_scatter", n, block, op, dtype, segment_elems=2)
        assert_exact("reduce_scatter", values, outputs, op, block)
    values, outputs, _, _ = run(RING, "all_gather", n, block, None, "float32", segment_elems=2, repeat=2)
    assert_exact("all_gather", values, outputs, None, block)


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter"])
def test_src_is_read_not_written_and_the_buffer_need_not_hold_the_input(n, collective):
    """reads_source: the output is exact although the buffer starts as garbage, and the source
    is left as it was."""
    assert RING.reads_source
    count = 2 * n + 1 if collective == "all_reduce" else 3
    values, outputs, sources, _ = run(RING, collective, n, count, "sum", segment_elems=2, src=True)
    assert_exact(collective, values, outputs, "sum", count)
    for r in range(n):
        assert np.array_equal(sources[r][0], values[r])


@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter"])
def test_src_at_world_size_one(collective):
    """At world size 1 nothing is sent: out of place, the output is the source (was never written)."""
    values, outputs, _, _ = run(RING, collective, 1, 4, "sum", src=True)
    assert_exact(collective, values, outputs, "sum", 4)


def test_bind_out_of_place_at_world_size_two_writes_the_output():
    """The harness' path (Algorithm.bind): out of place the output starts as sentinels."""
    def rank(comm):
        ctx = Context(comm, [0, 0])
        send = np.arange(1, 8, dtype=np.int64) * (comm.rank + 1)
        recv = np.full(7, -7, dtype=np.int64)
        fn, out = RING.bind(ctx, "all_reduce", send, recv, "sum", False, 7, 7)
        fn()
        return out.copy(), send.copy()

    for r, (out, send) in enumerate(World(2).run(rank)):
        assert out.tolist() == [3 * i for i in range(1, 8)]  # 1·i + 2·i
        assert send.tolist() == [(r + 1) * i for i in range(1, 8)]  # the input is left as it was


def test_every_rank_holds_the_same_bits_for_inexact_floats():
    """Each block is reduced once and then copied around: all ranks agree bit for bit, and the
    result is the sum to within float32 rounding."""
    rng = np.random.default_rng(5)
    values = [rng.standard_normal(23).astype(np.float32) for _ in range(5)]
    _, outputs, _, _ = run(RING, "all_reduce", 5, 23, "sum", values=values, segment_elems=4)
    first = outputs[0][0]
    assert all(o[0].tobytes() == first.tobytes() for o in outputs)
    np.testing.assert_allclose(first, np.sum(np.stack(values).astype(np.float64), axis=0), rtol=1e-5, atol=1e-5)


# --- messages -------------------------------------------------------------------------------------
def test_messages_worked_by_hand():
    """3 ranks, 10 elements: blocks of 3, 3, 4. Position p sends every block but its own in the
    reduce-scatter and every block but p+1's in the all-gather: 7+7, 7+6, 6+7."""
    hand = Counter({(0, 1): 14, (1, 2): 13, (2, 0): 13})
    assert RING.messages("all_reduce", 10, [0, 0, 0]) == hand
    _, _, _, world = run(RING, "all_reduce", 3, 10, "sum")
    assert world.sent == hand
    assert ring_messages([0, 1, 2], [3, 3, 4], True, False) == Counter({(0, 1): 7, (1, 2): 7, (2, 0): 6})


@pytest.mark.parametrize("algorithm", [RING, TOPO], ids=lambda a: a.name)
@pytest.mark.parametrize("n,nodes", [(2, [0, 1]), (4, [0, 1, 0, 1]), (5, [0, 0, 1, 1, 1]), (6, [2, 0, 1, 2, 0, 1])])
def test_messages_are_what_the_ranks_send(algorithm, n, nodes):
    for collective, elems in (("all_reduce", 2 * n + 3), ("all_reduce", n - 1), ("all_gather", 4),
                              ("reduce_scatter", 3)):
        _, _, _, world = run(algorithm, collective, n, elems, "sum", nodes=nodes, segment_elems=2)
        assert world.sent == algorithm.messages(collective, elems, nodes, 2), (collective, elems)


def test_topology_ring_leaves_each_node_once():
    """Ranks 0, 2 on node 0 and 1, 3 on node 1: the topology ring is 0 -> 2 -> 1 -> 3 -> 0 (two
    crossings), the rank-order ring crosses on every edge."""
    nodes = [0, 1, 0, 1]
    _, _, _, world = run(TOPO, "all_gather", 4, 2, None, nodes=nodes)
    assert set(world.sent) == {(0, 2), (2, 1), (1, 3), (3, 0)}
    assert set(world.sent.values()) == {2 * 3}  # n-1 blocks of 2 on every edge
    _, _, _, world = run(RING, "all_gather", 4, 2, None, nodes=nodes)
    assert set(world.sent) == {(0, 1), (1, 2), (2, 3), (3, 0)}


def test_a_step_sends_its_block_in_segments():
    """All-gather of blocks of 10 in segments of 4 on 3 ranks: 2 steps of 3 messages per edge."""
    _, _, _, world = run(RING, "all_gather", 3, 10, None, segment_elems=4)
    assert world.messages == Counter({(0, 1): 6, (1, 2): 6, (2, 0): 6})
    assert world.sent == Counter({(0, 1): 20, (1, 2): 20, (2, 0): 20})


# --- cost ---------------------------------------------------------------------------------------------
def test_cost_two_nodes_worked_by_hand():
    """n = 4 on 2 nodes of 2 (block placement), N = 4000 B: the ring crosses from node 0 to node 1
    on one edge each way, L = 1. Each step: max(α_inter + N/n·β_inter, α_intra + N/n·β_intra) =
    max(1e-5 + 1000·1e-8, 1e-6 + 1000·1e-9) = 2e-5; the reduction (n-1)/n·N·γ = 3e-7."""
    shape = Shape(2, 2)
    assert RING.cost(P, shape, "all_reduce", 4000, 1 << 20) == pytest.approx(6 * 2e-5 + 3e-7, rel=1e-12)
    assert RING.cost(P, shape, "reduce_scatter", 4000, 1 << 20) == pytest.approx(3 * 2e-5 + 3e-7, rel=1e-12)
    assert RING.cost(P, shape, "all_gather", 4000, 1 << 20) == pytest.approx(3 * 2e-5, rel=1e-12)


def test_cost_round_robin_loads_the_rank_ring_not_the_topology_ring():
    """Round-robin placement (nodes 0, 1, 0, 1): every edge of the rank-order ring crosses, two
    messages leave each node per step over one link (L = 2: 1e-5 + 1000·2·1e-8 = 3e-5); the
    topology ring crosses twice, one message per node (2e-5)."""
    shape = Shape(2, 2, placement="round-robin")
    assert RING.cost(P, shape, "all_reduce", 4000, 1 << 20) == pytest.approx(6 * 3e-5 + 3e-7, rel=1e-12)
    assert TOPO.cost(P, shape, "all_reduce", 4000, 1 << 20) == pytest.approx(6 * 2e-5 + 3e-7, rel=1e-12)


def test_cost_one_node_with_fewer_lanes_than_ranks():
    """One node of 4 ranks, 2 lanes: 4 copies at once load each step L = 2, (α + N/n·β)·L =
    (1e-6 + 1e-6)·2, and the 4 reductions L = 2: (n-1)/n·N·γ·2 = 6e-7."""
    shape = Shape(1, 4, lanes=2)
    assert RING.cost(P, shape, "all_reduce", 4000, 1 << 20) == pytest.approx(6 * 4e-6 + 6e-7, rel=1e-12)


def test_registry_and_collectives():
    assert ALGORITHMS["ring"].collectives == ALGORITHMS["ring_topology"].collectives == (
        "all_reduce", "all_gather", "reduce_scatter")
    assert TOPO.order == "topology" and RING.order == "rank" and not TOPO.predicted

