"""dbtree, NCCL's double binary tree (commbench/algorithms/dbtree.py), with threads as ranks:
exact results at every world size up to 8, odd and uneven counts, several segments per half,
every op; what the ranks really send against messages(); cost() against its docstring."""

from collections import Counter

import numpy as np
import pytest
from algorithm_ranks import assert_exact, run, uneven_counts

from commbench.algorithms.cost import Params, Shape
from commbench.algorithms.dbtree import DoubleBinaryTree
from commbench.trees import double_tree, inorder_tree

DBT = DoubleBinaryTree()
P = Params(alpha_intra=1e-6, beta_intra=1e-9, alpha_inter=1e-5, beta_inter=1e-8, gamma=1e-10)


@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("op,dtype", [("sum", "int64"), ("prod", "int32"), ("min", "float16"), ("max", "float32"),
                                      ("avg", "float64")])
def test_all_reduce_exact(n, op, dtype):
    for count in uneven_counts(n) + [2]:
        values, outputs, _, _ = run(DBT, "all_reduce", n, count, op, dtype, segment_elems=4, repeat=2)
        assert_exact("all_reduce", values, outputs, op, count)


def test_every_rank_holds_the_same_bits_for_inexact_floats():
    rng = np.random.default_rng(7)
    values = [rng.standard_normal(29).astype(np.float32) for _ in range(6)]
    _, outputs, _, _ = run(DBT, "all_reduce", 6, 29, "sum", values=values, segment_elems=5)
    assert all(o[0].tobytes() == outputs[0][0].tobytes() for o in outputs)
    np.testing.assert_allclose(outputs[0][0], np.sum(np.stack(values).astype(np.float64), axis=0), rtol=1e-5,
                               atol=1e-5)


# --- structure and messages ----------------------------------------------------------------------------
def test_trees_of_four_ranks_by_hand():
    """Tree A: 0 -> 2 -> {1, 3}; tree B, A shifted by one rank: 1 -> 3 -> {2, 0}."""
    parent, children = inorder_tree(4)
    assert parent == [None, 2, 0, 2] and children == [[2], [], [1, 3], []]
    (pa, _), (pb, cb) = double_tree(4)
    assert pa == parent
    assert pb == [3, None, 3, 1] and cb == [[], [3], [], [2, 0]]


def test_messages_worked_by_hand():
    """4 ranks, 10 elements: 5 go up and down each edge of A, the other 5 each edge of B; the
    edge between 2 and 3 is in both trees (2 -> 3's child in B, 3 -> 2's child in A)."""
    hand = Counter({(1, 2): 5, (2, 1): 5, (2, 0): 5, (0, 2): 5, (3, 2): 10, (2, 3): 10,
                    (3, 1): 5, (1, 3): 5, (0, 3): 5, (3, 0): 5})
    assert DBT.messages("all_reduce", 10, [0] * 4) == hand
    _, _, _, world = run(DBT, "all_reduce", 4, 10, "sum", segment_elems=2)
    assert world.sent == hand
    # halves of 5 in segments of 2: 3 messages per edge per direction per tree
    assert world.messages[(1, 2)] == 3 and world.messages[(3, 2)] == 6


@pytest.mark.parametrize("n", range(2, 9))
def test_messages_are_what_the_ranks_send(n):
    nodes = [r % 2 for r in range(n)]
    for count in (1, 2, 2 * n + 1, 21):
        _, _, _, world = run(DBT, "all_reduce", n, count, "sum", nodes=nodes, segment_elems=3)
        assert world.sent == DBT.messages("all_reduce", count, nodes, 3), count


def test_no_rank_sends_much_more_than_the_buffer():
    """The point of the two trees: each rank sends about N up and at most N down; 8 ranks, 64
    elements: at most 2·N per rank, where one binomial tree's root sends 3·N."""
    _, _, _, world = run(DBT, "all_reduce", 8, 64, "sum")
    per_rank = Counter()
    for (src, _), elems in world.sent.items():
        per_rank[src] += elems
    assert max(per_rank.values()) <= 2 * 64


# --- cost ---------------------------------------------------------------------------------------------
def test_cost_one_node_by_hand():
    """n = 4 (depth d = 2), N = 4000 B in segments of 1000: k = ⌈2000/1000⌉ = 2 segments per half;
    2(d+k-1) = 6 steps of α + N/2k·β = 1e-6 + 1000·1e-9 (8 lanes: the 6 edges' messages do not
    contend), plus N·γ = 4e-7."""
    assert DBT.cost(P, Shape(1, 4, lanes=8), "all_reduce", 4000, 1000) == pytest.approx(6 * 2e-6 + 4e-7, rel=1e-12)
    # one lane per rank: 6 messages on 4 lanes, L = 2 on the whole step
    assert DBT.cost(P, Shape(1, 4), "all_reduce", 4000, 1000) == pytest.approx(6 * 4e-6 + 4e-7, rel=1e-12)


def test_cost_two_nodes_by_hand():
    """n = 4 on 2 nodes of 2, N = 4000, segments of 1000: four of the six edges cross, two
    leaving each node at once on one link, L = 2: α_inter + 1000·2·β_inter = 3e-5 a step."""
    assert DBT.cost(P, Shape(2, 2), "all_reduce", 4000, 1000) == pytest.approx(6 * 3e-5 + 4e-7, rel=1e-12)


def test_cost_one_segment_is_the_tree_depth():
    """N/2 fits one segment: k = 1, 2·d steps (d = ⌈log2 8⌉ = 3)."""
    assert DBT.cost(P, Shape(1, 8, lanes=64), "all_reduce", 800, 1 << 20) == pytest.approx(
        6 * (1e-6 + 400 * 1e-9) + 800 * 1e-10, rel=1e-12)


def test_runs_all_reduce_only():
    assert DBT.collectives == ("all_reduce",) and DBT.modelled
