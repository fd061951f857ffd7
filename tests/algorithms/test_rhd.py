"""rhd, recursive halving and doubling (commbench/algorithms/rhd.py), with threads as ranks:
exact results at every world size up to 8 (powers of two and folded ones) and uneven counts,
every op; what the ranks really send against messages(); cost() against its docstring."""

from collections import Counter

import numpy as np
import pytest
from algorithm_ranks import assert_exact, run, uneven_counts

from commbench.algorithms import ALGORITHMS
from commbench.algorithms.cost import Params, Shape
from commbench.algorithms.rhd import Fold, RecursiveHalvingDoubling, exchanges

RHD = RecursiveHalvingDoubling()
P = Params(alpha_intra=1e-6, beta_intra=1e-9, alpha_inter=1e-5, beta_inter=1e-8, gamma=1e-10)
OPS = [("sum", "int64"), ("prod", "int32"), ("min", "int32"), ("max", "float32"), ("avg", "float64")]


@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("op,dtype", OPS)
def test_all_reduce_exact(n, op, dtype):
    for count in uneven_counts(n):
        values, outputs, _, _ = run(RHD, "all_reduce", n, count, op, dtype, repeat=2)
        assert_exact("all_reduce", values, outputs, op, count)


@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("block", [1, 3])
def test_reduce_scatter_and_all_gather_exact(n, block):
    for op, dtype in OPS:
        values, outputs, _, _ = run(RHD, "reduce_scatter", n, block, op, dtype)
        assert_exact("reduce_scatter", values, outputs, op, block)
    values, outputs, _, _ = run(RHD, "all_gather", n, block, None, "int64", repeat=2)
    assert_exact("all_gather", values, outputs, None, block)


def test_every_rank_holds_the_same_bits_for_inexact_floats():
    """Folded ranks get the odd partner's result back: all 6 ranks agree bit for bit."""
    rng = np.random.default_rng(3)
    values = [rng.standard_normal(19).astype(np.float32) for _ in range(6)]
    _, outputs, _, _ = run(RHD, "all_reduce", 6, 19, "sum", values=values)
    assert all(o[0].tobytes() == outputs[0][0].tobytes() for o in outputs)
    np.testing.assert_allclose(outputs[0][0], np.sum(np.stack(values).astype(np.float64), axis=0), rtol=1e-5,
                               atol=1e-5)


# --- messages -------------------------------------------------------------------------------------
def test_messages_worked_by_hand_for_three_ranks():
    """n = 3: p = 2, rank 0 folds into rank 1; ranks 1 and 2 are virtual ranks 0 and 1.
    all-reduce of 10: the fold carries 10 up and 10 back; halving swaps halves of 5, doubling too.
    reduce-scatter of blocks of 2: rank 0's whole input (6) up, its block (2) back; rank 1 owns
    blocks 0-1 (4 elements), rank 2 block 2: each gives the other's range (2 and 4).
    all-gather of blocks of 2: rank 0's block up, the whole 6 back; doubling sends the ranges."""
    hand = {
        "all_reduce": (10, Counter({(0, 1): 10, (1, 0): 10, (1, 2): 5 + 5, (2, 1): 5 + 5})),
        "reduce_scatter": (2, Counter({(0, 1): 6, (1, 0): 2, (1, 2): 2, (2, 1): 4})),
        "all_gather": (2, Counter({(0, 1): 2, (1, 0): 6, (1, 2): 4, (2, 1): 2})),
    }
    for collective, (elems, sent) in hand.items():
        assert RHD.messages(collective, elems, [0, 0, 0]) == sent, collective
        _, _, _, world = run(RHD, collective, 3, elems, "sum")
        assert world.sent == sent, collective


def test_messages_power_of_two_all_reduce_by_hand():
    """n = 4, 8 elements: halving gives away 4 at distance 2, then 2 at distance 1; doubling
    sends 2 at distance 1, then 4 at distance 2, along the same pairs."""
    sent = RHD.messages("all_reduce", 8, [0, 0, 1, 1])
    assert sent == Counter({(0, 2): 8, (2, 0): 8, (1, 3): 8, (3, 1): 8, (0, 1): 4, (1, 0): 4, (2, 3): 4, (3, 2): 4})
    _, _, _, world = run(RHD, "all_reduce", 4, 8, "sum")
    assert world.sent == sent


@pytest.mark.parametrize("n", range(2, 9))
def test_messages_are_what_the_ranks_send(n):
    nodes = [r % 2 for r in range(n)]
    for collective, elems in (("all_reduce", 2 * n + 1), ("all_reduce", 1), ("all_gather", 3),
                              ("reduce_scatter", 2)):
        _, _, _, world = run(RHD, collective, n, elems, "sum", nodes=nodes)
        assert world.sent == RHD.messages(collective, elems, nodes), (collective, elems)


def test_exchanges_halving_gives_half_the_range_at_each_step():
    """p = 4 active ranks over 4 ranges of 1: at d = 2 each gives 2 ranges, at d = 1 one range."""
    fold = Fold(0, 4)
    sent = exchanges(fold, [0, 1, 2, 3, 4], True, False)
    assert sent == Counter({(0, 2): 2, (2, 0): 2, (1, 3): 2, (3, 1): 2, (0, 1): 1, (1, 0): 1, (2, 3): 1, (3, 2): 1})
    assert exchanges(fold, [0, 1, 2, 3, 4], False, True) == sent  # doubling: the same amounts back


# --- cost ---------------------------------------------------------------------------------------------
def test_cost_power_of_two_is_the_docstring_closed_form():
    """p = n = 4 on one node, unloaded: 2·log2 n·α + 2(n-1)/n·N·β + (n-1)/n·N·γ
    = 4·1e-6 + 1.5·4000·1e-9 + 0.75·4000·1e-10 = 1.03e-5."""
    assert RHD.cost(P, Shape(1, 4), "all_reduce", 4000, 1 << 20) == pytest.approx(1.03e-5, rel=1e-12)
    # the halving half: log2 n·α + (n-1)/n·N·β + (n-1)/n·N·γ; the doubling half has no γ
    assert RHD.cost(P, Shape(1, 4), "reduce_scatter", 4000, 1 << 20) == pytest.approx(2e-6 + 3e-6 + 3e-7, rel=1e-12)
    assert RHD.cost(P, Shape(1, 4), "all_gather", 4000, 1 << 20) == pytest.approx(2e-6 + 3e-6, rel=1e-12)


def test_cost_three_ranks_folds_by_hand():
    """n = 3 (p = 2), N = 3000 B, one node: one halving and one doubling step on N/2,
    2·(α + 1500·β) = 5e-6; (p-1)/p·N·γ = 1.5e-7; fold and unfold 2·(α + N·β) = 8e-6; N·γ = 3e-7."""
    assert RHD.cost(P, Shape(1, 3), "all_reduce", 3000, 1 << 20) == pytest.approx(5e-6 + 1.5e-7 + 8e-6 + 3e-7,
                                                                                rel=1e-12)
    # reduce-scatter: the fold carries N in, N/n back (α + 1000·β = 2e-6); one halving step
    assert RHD.cost(P, Shape(1, 3), "reduce_scatter", 3000, 1 << 20) == pytest.approx(
        2.5e-6 + 1.5e-7 + 4e-6 + 2e-6 + 3e-7, rel=1e-12)


def test_cost_two_nodes_first_step_crosses():
    """n = 4 on 2 nodes of 2, N = 4000: the d = 2 steps cross nodes, two messages per node on one
    link (α_inter + 2000·2·β_inter = 5e-5), the d = 1 steps stay inside (α + 1000·β = 2e-6)."""
    assert RHD.cost(P, Shape(2, 2), "all_reduce", 4000, 1 << 20) == pytest.approx(2 * 5e-5 + 2 * 2e-6 + 3e-7,
                                                                                rel=1e-12)


def test_runs_all_three_collectives():
    assert ALGORITHMS["rhd"].collectives == ("all_reduce", "all_gather", "reduce_scatter")
    assert not RHD.reads_source and RHD.modelled
