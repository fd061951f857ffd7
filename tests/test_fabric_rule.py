"""`commbench check`'s schedule and verdict (commbench.fabric_rule), on drawn numbers."""

import itertools

import numpy as np
import pytest

from commbench import fabric_rule
from commbench.fabric_rule import SLOW, decided, judge, schedule, tournament


@pytest.mark.parametrize("nodes", [2, 3, 4, 5, 8, 9, 16])
def test_the_tournament_meets_every_pair_once_in_disjoint_rounds(nodes):
    rounds = tournament(nodes)
    assert len(rounds) == (nodes - 1 if nodes % 2 == 0 else nodes)
    pairs = [p for r in rounds for p in r]
    assert sorted(pairs) == list(itertools.combinations(range(nodes), 2))
    for r in rounds:
        busy = [n for p in r for n in p]
        assert len(busy) == len(set(busy)) and len(r) == nodes // 2


def test_the_sampled_schedule_gives_each_node_that_many_distinct_peers():
    rounds = schedule(64, 5)
    assert len(rounds) == 5
    peers = {n: {b if a == n else a for r in rounds for a, b in r if n in (a, b)} for n in range(64)}
    assert all(len(p) == 5 for p in peers.values())
    assert schedule(8, 7) == tournament(8) and schedule(8, None) == tournament(8)


def _links(nodes, rng, slow_node=None, slow_link=None, reps=3, noise=0.03):
    out = {}
    for a, b in itertools.combinations(range(nodes), 2):
        rate = 1.0 * (0.6 if slow_node in (a, b) else 1.0) * (0.6 if slow_link == (a, b) else 1.0)
        out[(a, b)] = [rate * (1 + noise * rng.standard_normal(3)) for _ in range(reps)]
    return out


def _flags(findings):
    return sorted((f.what, f.nodes) for f in findings if f.verdict != "ok")


@pytest.mark.parametrize("nodes", [3, 4, 8])
def test_a_node_whose_link_is_slow_is_named_and_nothing_else(nodes):
    rng = np.random.default_rng(nodes)
    for k in range(nodes):
        findings = judge(_links(nodes, rng, slow_node=k))
        assert _flags(findings) == [("node", (k,))]
        slow = next(f for f in findings if f.nodes == (k,))
        # 3 nodes: the others' medians are (0.6 + 1) / 2, the cluster's too; 4 or more: 1
        assert slow.measured / slow.expected == pytest.approx(0.75 if nodes == 3 else 0.6, abs=0.05)
        assert slow.unit == "GB/s" and f"{slow.measured / slow.expected:.0%} of the cluster's median" in slow.why


def test_a_slow_path_between_two_healthy_nodes_is_a_link_and_a_healthy_cluster_flags_nothing():
    rng = np.random.default_rng(1)
    assert _flags(judge(_links(8, rng, slow_link=(2, 6)))) == [("link", (2, 6))]
    assert _flags(judge(_links(8, rng))) == []
    assert _flags(judge(_links(2, rng, slow_node=0))) == []  # two nodes: one link, nothing to tell apart


def test_a_node_whose_own_all_reduce_is_slow_is_named_in_microseconds():
    rng = np.random.default_rng(2)
    intra = {n: [100 * (1.5 if n == 3 else 1) * (1 + 0.02 * rng.standard_normal(20))] for n in range(4)}
    findings = judge(_links(4, rng), intra)
    assert _flags(findings) == [("node", (3,))]
    slow = next(f for f in findings if f.verdict == "slow")
    assert slow.unit == "us" and slow.measured > slow.expected / SLOW


def test_decided_needs_the_minimum_repetitions_and_agreeing_halves():
    rng = np.random.default_rng(3)
    assert not decided(_links(4, rng, slow_node=1, reps=fabric_rule.MIN_REPS - 1))
    assert decided(_links(4, rng, slow_node=1, reps=4))
    # a node at the bar: its even and odd repetitions disagree
    links = _links(4, rng, reps=4, noise=0.0)
    for pair in links:
        if 0 in pair:
            links[pair] = [np.full(3, SLOW * (0.9 if i % 2 else 1.1)) for i in range(4)]
    assert not decided(links)


def _paths(node_sizes, rng, slow_rank=None, slow_path=None, reps=3):
    node_of, paths, rank = {}, {}, 0
    for n, g in enumerate(node_sizes):
        ranks = list(range(rank, rank + g))
        node_of.update({r: n for r in ranks})
        for a, b in itertools.combinations(ranks, 2):
            rate = (0.5 if slow_rank in (a, b) else 1.0) * (0.5 if slow_path == (a, b) else 1.0)
            paths[(a, b)] = [rate * (1 + 0.02 * rng.standard_normal(3)) for _ in range(reps)]
        rank += g
    return paths, node_of


def test_inside_nodes_a_slow_rank_and_a_weak_path_are_told_apart():
    rng = np.random.default_rng(4)
    links = _links(3, rng)
    paths, node_of = _paths([4, 4, 4], rng, slow_rank=5)
    flags = [(f.what, f.nodes, f.ranks) for f in judge(links, None, paths, node_of) if f.verdict != "ok"]
    assert flags == [("rank", (1,), (5,))]
    paths, node_of = _paths([4, 4, 4], rng, slow_path=(8, 10))
    flags = [(f.what, f.nodes, f.ranks) for f in judge(links, None, paths, node_of) if f.verdict != "ok"]
    assert flags == [("link", (2, 2), (8, 10))]
    # nodes of two ranks: one path each, which cannot tell its rank from its partner: the path is named
    paths, node_of = _paths([2, 2, 2], rng, slow_rank=2)
    flags = [(f.what, f.nodes, f.ranks) for f in judge(links, None, paths, node_of) if f.verdict != "ok"]
    assert flags == [("link", (1, 1), (2, 3))]
    assert decided(links, None, *_paths([3, 3, 3], rng, slow_rank=4, reps=4))


def test_floors_add_an_absolute_bar_to_every_kind():
    from commbench.fabric_rule import with_floors

    rng = np.random.default_rng(5)
    links = _links(3, rng)  # about 1 GB/s each
    intra = {n: [np.full(5, 100.0)] for n in range(3)}
    paths, node_of = _paths([3, 3, 3], rng)
    plain = judge(links, intra, paths, node_of)
    assert _flags(with_floors(plain, {"link_gbps": 0.5, "path_gbps": 0.5, "node_all_reduce_us": 200})) == []
    flags = _flags(with_floors(plain, {"link_gbps": 2.0}))
    assert flags == sorted([("node", (n,)) for n in range(3)] + [("link", p) for p in [(0, 1), (0, 2), (1, 2)]])
    slow = [f for f in with_floors(plain, {"node_all_reduce_us": 50}) if f.verdict == "slow"]
    assert len(slow) == 3 and all(f.unit == "us" and f.expected == 50 and "past the floor 50 us" in f.why for f in slow)
    assert {f.ranks for f in with_floors(plain, {"path_gbps": 5}) if f.verdict == "slow"} >= {(0,), (0, 1)}
