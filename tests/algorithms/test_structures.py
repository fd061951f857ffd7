"""The communication structures of the own algorithms, checked for every world size up to 64."""

import re
import pytest

from commbench.algorithms.base import bounds
from commbench.trees import double_tree
from commbench.algorithms.rhd import Fold
from commbench.algorithms.tree import binomial_children, binomial_parent


def _check_tree(parent, children, n):
    roots = [r for r in range(n) if parent[r] is None]
    assert len(roots) == 1
    for r in range(n):
        for c in children[r]:
            assert parent[c] == r
        assert len(children[r]) <= (2 if parent[r] is not None else 2)
    depth = 0
    for r in range(n):  # every rank reaches the root
        seen, x = 0, r
        while parent[x] is not None:
            x, seen = parent[x], seen + 1
            assert seen <= n
        depth = max(depth, seen)
    return roots[0], depth


@pytest.mark.parametrize("n", range(1, 65))
def test_double_binary_tree(n):
    (pa, ca), (pb, cb) = double_tree(n)
    ra, da = _check_tree(pa, ca, n)
    rb, db = _check_tree(pb, cb, n)
    assert da <= max(1, (n - 1).bit_length()) and db <= max(1, (n - 1).bit_length())
    if n > 2:
        assert ra != rb
        # complementary: at most one rank is an inner node of both trees
        both_inner = [r for r in range(n) if ca[r] and cb[r]]
        assert len(both_inner) <= 1, both_inner


@pytest.mark.parametrize("n", range(1, 65))
def test_binomial_tree(n):
    parent = [binomial_parent(r) for r in range(n)]
    children = [binomial_children(r, n) for r in range(n)]
    assert all(parent[c] == r for r in range(n) for c in children[r])
    assert sorted(c for kids in children for c in kids) == list(range(1, n))
    assert len(children[0]) == (n - 1).bit_length()


@pytest.mark.parametrize("n", range(1, 65))
def test_fold_leaves_a_power_of_two(n):
    folds = [Fold(r, n) for r in range(n)]
    active = [f for f in folds if f.active]
    assert len(active) == folds[0].p and folds[0].p & (folds[0].p - 1) == 0
    assert sorted(f.v for f in active) == list(range(folds[0].p))
    assert all(folds[0].real(f.v) == f.rank for f in active)
    blocks = [folds[0].first_block(v) for v in range(folds[0].p)] + [n]
    assert blocks == sorted(blocks) and blocks[0] == 0  # contiguous ranges of blocks


def test_bounds_uneven():
    assert bounds(10, 4) == [0, 2, 5, 7, 10]
    assert bounds(3, 5) == [0, 0, 1, 1, 2, 3]


def test_metadata_derives_from_the_class():
    from commbench.algorithms import ALGORITHMS

    assert ALGORITHMS["dbtree"].collectives == ("all_reduce",)
    assert ALGORITHMS["tree"].collectives == ("all_reduce", "broadcast", "reduce")  # the binomial tree's halves too
    assert ALGORITHMS["chain"].collectives == ("broadcast", "reduce") and ALGORITHMS["pairwise"].collectives == ("all_to_all", "all_to_allv")
    assert ALGORITHMS["ring_kernel"].collectives == ("all_reduce", "all_gather", "reduce_scatter")  # its kernels' only
    assert set(ALGORITHMS["ring"].collectives) == {"all_reduce", "all_gather", "reduce_scatter"}
    assert ALGORITHMS["ring"].modelled and not ALGORITHMS["peer_twoshot"].modelled  # peer: no cost()
    assert not ALGORITHMS["ring_topology"].predicted and ALGORITHMS["ring_topology"].modelled
    assert all(a.description and "\n" not in a.description for a in ALGORITHMS.values())


def test_every_cost_formula_is_beside_its_cost():
    """Each modelled algorithm writes its formula once, in its cost() docstring, for every
    collective it runs; the model gives a time exactly where the algorithm runs the collective."""
    from commbench.analysis.model.costs import Params, Shape, modelled, time_s
    from commbench.algorithms import ALGORITHMS
    from commbench.collectives import COLLECTIVES

    p = Params(1e-6, 1e-10, 1e-5, 1e-9, 1e-11)
    assert modelled() == [name for name, a in ALGORITHMS.items() if a.modelled] and "ring" in modelled()
    for name in modelled():
        algorithm = ALGORITHMS[name]
        for collective in COLLECTIVES:
            runs = collective in algorithm.collectives and not COLLECTIVES[collective].takes_traffic  # (no uneven model)
            named = re.search(rf"(?<![\w-]){collective.replace('_', '-')}(?![\w-])", type(algorithm).cost.__doc__)
            assert bool(named) == runs, (name, collective)  # (reduce: a word of its own, not all-reduce's)
            t = time_s(p, name, collective, Shape(2, 3), 1 << 20)
            assert (t is not None and t > 0) if runs else t is None, (name, collective)


def test_every_module_of_the_package_is_a_registered_algorithm_by_name():
    """Issue 64: the algorithms are found as the collectives are, one of each class with a name of its
    own (kernel.py's _Kernel and peer.py's shared base have none), in the order of their names."""
    from commbench import algorithms

    found = [a.name for a in algorithms.package_algorithms()]
    assert found == sorted(found) == list(algorithms.ALGORITHMS)[:len(found)]
    assert {"ring", "tree", "dbtree", "rhd", "hierarchical", "hierarchical_kernel", "ring_kernel", "tree_kernel",
            "peer_oneshot", "peer_twoshot", "chain", "pairwise", "ring_topology"} <= set(found)
    assert all(type(algorithms.ALGORITHMS[a.name]) is type(a) for a in algorithms.package_algorithms())


def test_a_new_module_is_a_new_algorithm_with_nothing_else_edited(tmp_path, monkeypatch):
    """Adding an algorithm inside the package is its module alone: a module on the package's path is found,
    and a class it imports (Ring, for its subclass) is not registered twice."""
    import sys

    from commbench import algorithms

    (tmp_path / "ring_again.py").write_text(
        "from commbench.algorithms.ring import Ring\n\n\nclass RingAgain(Ring):\n    name = 'ring_again'\n")
    monkeypatch.setattr(algorithms, "__path__", [*algorithms.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "commbench.algorithms.ring_again", raising=False)
    try:
        names = [a.name for a in algorithms.package_algorithms()]
    finally:  # the module and the package's attribute for it: gone with the test
        sys.modules.pop("commbench.algorithms.ring_again", None)
        vars(algorithms).pop("ring_again", None)
    assert names.count("ring") == 1 and "ring_again" in names
