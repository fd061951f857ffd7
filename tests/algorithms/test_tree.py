"""tree, the binomial reduce + broadcast (commbench/algorithms/tree.py), with threads as ranks:
exact results at every world size up to 8 and uneven counts, every op; what the ranks really send
against messages(); cost() against its docstring's formula; what it refuses."""

from collections import Counter

import numpy as np
import pytest
from algorithm_ranks import assert_exact, run, uneven_counts
from nccl_semantics import World

from commbench.algorithms import Context
from commbench.algorithms.cost import Params, Shape
from commbench.algorithms.tree import Tree, binomial_children, binomial_parent

TREE = Tree()
P = Params(alpha_intra=1e-6, beta_intra=1e-9, alpha_inter=1e-5, beta_inter=1e-8, gamma=1e-10)


@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("op,dtype", [("sum", "int64"), ("prod", "int32"), ("min", "float64"), ("max", "int8"),
                                      ("avg", "float64"), ("sum", "float32")])
def test_all_reduce_exact(n, op, dtype):
    for count in uneven_counts(n):
        values, outputs, _, _ = run(TREE, "all_reduce", n, count, op, dtype, repeat=2)
        assert_exact("all_reduce", values, outputs, op, count)


def test_out_of_place_through_bind_copies_the_input_first():
    """tree does not read src=: Algorithm.bind copies the input into the output, then reduces
    there; the input stays as it was."""
    assert not TREE.reads_source

    def rank(comm):
        ctx = Context(comm, [0] * 3)
        send = np.array([1.0, 2.0, 3.0]) * (comm.rank + 1)
        recv = np.full(3, -7.0)
        fn, out = TREE.bind(ctx, "all_reduce", send, recv, "max", False, 3, 3)
        fn()
        return out.tolist(), send.tolist()

    for r, (out, send) in enumerate(World(3).run(rank)):
        assert out == [3.0, 6.0, 9.0] and send == [1.0 * (r + 1), 2.0 * (r + 1), 3.0 * (r + 1)]


def test_the_root_holds_the_bits_everyone_gets():
    rng = np.random.default_rng(11)
    values = [rng.standard_normal(13).astype(np.float32) for _ in range(7)]
    _, outputs, _, _ = run(TREE, "all_reduce", 7, 13, "sum", values=values)
    assert all(o[0].tobytes() == outputs[0][0].tobytes() for o in outputs)
    np.testing.assert_allclose(outputs[0][0], np.sum(np.stack(values).astype(np.float64), axis=0), rtol=1e-5,
                               atol=1e-5)


# --- structure and messages ----------------------------------------------------------------------------
def test_binomial_edges_for_five_ranks_by_hand():
    """Rank r's parent is r minus its lowest set bit; rank 0's children are 1, 2, 4."""
    assert [binomial_parent(r) for r in range(5)] == [None, 0, 0, 2, 0]
    assert [binomial_children(r, 5) for r in range(5)] == [[1, 2, 4], [], [3], [], []]
    assert [binomial_children(r, 8) for r in range(8)] == [[1, 2, 4], [], [3], [], [5, 6], [], [7], []]


def test_messages_worked_by_hand():
    """The whole buffer goes up each edge and comes back down it."""
    hand = Counter({(1, 0): 4, (0, 1): 4, (2, 0): 4, (0, 2): 4, (3, 2): 4, (2, 3): 4, (4, 0): 4, (0, 4): 4})
    assert TREE.messages("all_reduce", 4, [0] * 5) == hand
    _, _, _, world = run(TREE, "all_reduce", 5, 4, "sum")
    assert world.sent == hand
    assert world.messages == Counter(dict.fromkeys(hand, 1))  # one message each way per edge


@pytest.mark.parametrize("n", range(2, 9))
def test_messages_are_what_the_ranks_send(n):
    nodes = [r // 2 for r in range(n)]
    for count in (1, 2 * n + 1):
        _, _, _, world = run(TREE, "all_reduce", n, count, "sum", nodes=nodes)
        assert world.sent == TREE.messages("all_reduce", count, nodes)
        assert sum(world.sent.values()) == 2 * (n - 1) * count


# --- cost and refusals ----------------------------------------------------------------------------------
def test_cost_one_node_by_hand():
    """n = 4, N = 1000 B, one node: levels d = 1 (two pairs) and d = 2 (one pair), each
    2·(α + N·β) = 4e-6 plus one reduction N·γ = 1e-7."""
    assert TREE.cost(P, Shape(1, 4), "all_reduce", 1000, 1 << 20) == pytest.approx(2 * (4e-6 + 1e-7), rel=1e-12)


def test_cost_two_nodes_by_hand():
    """n = 4 on 2 nodes of 2, N = 1000 B: level 1 stays inside the nodes, 2·(α_intra + N·β_intra)
    = 4e-6; level 2 (2 -> 0) crosses, 2·(α_inter + N·β_inter) = 4e-5; ⌈log2 n⌉·N·γ = 2e-7."""
    assert TREE.cost(P, Shape(2, 2), "all_reduce", 1000, 1 << 20) == pytest.approx(4e-6 + 4e-5 + 2e-7, rel=1e-12)


def test_refuses_what_it_does_not_run():
    ctx = Context(World(2).comm(0), [0, 0])
    assert TREE.collectives == ("all_reduce", "broadcast", "reduce")
    assert TREE.unsupported(ctx, "all_gather") == "tree has no all-gather (it runs all-reduce, broadcast, reduce)"
    assert TREE.unsupported(ctx, "reduce_scatter") == "tree has no reduce-scatter (it runs all-reduce, broadcast, reduce)"
    assert TREE.unsupported(ctx, "all_reduce") is None
