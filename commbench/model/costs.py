"""Hockney (α-β) cost of commbench's algorithms with a reduction term γ, for two link classes.

A message of m bytes over a link of class c costs α_c + m·β_c; reducing m bytes costs m·γ.
Class `intra` joins ranks of one node, `inter` ranks of different nodes. Messages of one step
share what they cross, so the bytes are multiplied by a load:
  inter  ⌈messages leaving the node / links per node⌉ (1 link per node on the emulated cluster,
         one NIC per GPU on a rail-optimised GPU cluster);
  intra  ⌈messages inside the node / lanes⌉, and reductions ⌈ranks reducing on the node / lanes⌉,
         lanes = how many copies or reductions a node runs at full speed at once (its cores for
         CPU ranks that outnumber them, G with NVSwitch: no contention).
A ring step, a tree level or a halving step lasts as long as its slowest class.

Flat algorithms, n ranks, N bytes (Thakur, Rabenseifner & Gropp, "Optimization of collective
communication operations in MPICH", IJHPCA 2005; the NCCL double tree for dbtree):
  ring          all-reduce      2(n-1)·(α + N/n·β·L) + (n-1)/n·N·γ
                reduce-scatter   (n-1)·(α + N/n·β·L) + (n-1)/n·N·γ      all-gather: no γ
  tree          all-reduce      Σ_levels 2·(α + N·β·L_level) + ⌈log2 n⌉·N·γ      (binomial reduce + broadcast)
  dbtree        all-reduce      2(d+k-1)·(α + N/2k·β·L) + N·γ     d = ⌈log2 n⌉, k = ⌈N/2 / segment⌉ pipelined
                                                                    segments per tree, both trees at once
  rhd           all-reduce      Σ_halving (α + N·d/p·β·L) + Σ_doubling (same) + (p-1)/p·N·γ
                                 + 2·(α + N·β) + N·γ when n is not a power of two p (fold, unfold)
                reduce-scatter / all-gather: the halving / the doubling half (N = the whole buffer)
Two-level composition (hierarchical), G ranks on each of M nodes:
  all-reduce    per chunk of N/K: a = intra reduce-scatter (G-1)·(α + N/(KG)·β) + (G-1)/G·N/K·γ,
                b = inter all-reduce 2(M-1)·(α' + N/(KGM)·β'·L') + (M-1)/M·N/(KG)·γ,  c = intra all-gather;
                pipelined over K chunks, the two intra stages sharing the node: a + b + c + (K-1)·max(a + c, b)
  all-gather    inter (M-1)·(α' + N/n·β'·L') then intra (G-1)·(α + N/G·β);  reduce-scatter mirrors it + γ
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from commbench.algorithms.base import ring_order
from commbench.algorithms.dbtree import double_tree
from commbench.algorithms.hierarchical import pipeline_chunks
from commbench.algorithms.rhd import Fold

MODELLED = ("ring", "ring_topology", "tree", "dbtree", "rhd", "hierarchical")


@dataclass(frozen=True)
class Params:
    """Seconds per message (α) and per byte (β) for each link class; γ seconds per reduced byte."""

    alpha_intra: float
    beta_intra: float
    alpha_inter: float
    beta_inter: float
    gamma: float

    @classmethod
    def from_values(cls, values: dict) -> "Params":
        """From a name -> value mapping; a missing or None parameter costs nothing."""
        return cls(**{f: values.get(f) or 0.0 for f in cls.__dataclass_fields__})

    def step(self, inter: bool, nbytes: float, load: int = 1) -> float:
        if inter:
            return self.alpha_inter + nbytes * load * self.beta_inter
        return self.alpha_intra + nbytes * load * self.beta_intra


@dataclass(frozen=True)
class Shape:
    """M nodes of G ranks; placement of ranks on nodes; inter-node links and intra-node lanes."""

    nodes: int
    per_node: int
    placement: str = "block"
    links_per_node: int = 1
    lanes: int | None = None  # None: one per rank (no intra-node contention)

    @property
    def n(self) -> int:
        return self.nodes * self.per_node

    def node_of(self) -> list[int]:
        if self.placement == "round-robin":
            return [r % self.nodes for r in range(self.n)]
        return [r // self.per_node for r in range(self.n)]

    def contention(self, count: int) -> int:
        """Load of `count` concurrent copies or reductions on one node."""
        return max(1, math.ceil(count / (self.lanes or self.per_node)))

    def step_time(self, p: Params, pairs, node_of, nbytes: float) -> float:
        """One step in which every (src, dst) pair sends nbytes at once: its slowest class."""
        out: dict[int, int] = {}
        inside: dict[int, int] = {}
        for src, dst in pairs:
            bucket = out if node_of[src] != node_of[dst] else inside
            bucket[node_of[src]] = bucket.get(node_of[src], 0) + 1
        t = 0.0
        if out:
            t = p.step(True, nbytes, math.ceil(max(out.values()) / self.links_per_node))
        if inside:
            t = max(t, p.step(False, nbytes, self.contention(max(inside.values()))))
        return t

    def reduce_load(self, ranks) -> int:
        """Load of reductions running at once on these ranks."""
        per: dict[int, int] = {}
        node_of = self.node_of()
        for r in ranks:
            per[node_of[r]] = per.get(node_of[r], 0) + 1
        return self.contention(max(per.values(), default=1))


def time_s(p: Params, algorithm: str, collective: str, shape: Shape, size_bytes: float,
           segment_bytes: int = 1 << 20) -> float | None:
    """Modelled seconds of one call; None where the algorithm has no such collective."""
    fn = _COSTS.get((algorithm, collective))
    if fn is None or shape.n < 1:
        return None
    if shape.n == 1:
        return 0.0
    return fn(p, shape, float(size_bytes), segment_bytes)


def _ring(order_name, reduce_scatter, all_gather):
    def cost(p, shape, N, seg):
        node_of, n = shape.node_of(), shape.n
        order = ring_order(node_of, order_name)
        step = shape.step_time(p, [(order[i], order[(i + 1) % n]) for i in range(n)], node_of, N / n)
        steps = (n - 1) * (reduce_scatter + all_gather)
        return steps * step + reduce_scatter * (n - 1) / n * N * p.gamma * shape.reduce_load(range(n))
    return cost


def _tree(p, shape, N, seg):
    node_of, n = shape.node_of(), shape.n
    total, d = 0.0, 1
    while d < n:  # level d: ranks r = d mod 2d send to r - d (and receive back on the way down)
        pairs = [(r, r - d) for r in range(d, n, 2 * d)]
        total += 2 * shape.step_time(p, pairs, node_of, N) + N * p.gamma * shape.reduce_load([q for _, q in pairs])
        d *= 2
    return total


def _dbtree(p, shape, N, seg):
    """Every step a rank sends one segment up (then down) each tree, k segments per half."""
    node_of, n = shape.node_of(), shape.n
    depth = math.ceil(math.log2(n))
    k = max(1, math.ceil(N / 2 / seg))
    edges = [(r, parent[r]) for parent, _ in double_tree(n) for r in range(n) if parent[r] is not None]
    step = shape.step_time(p, edges, node_of, N / (2 * k))  # both trees' segments at once
    return 2 * (depth + k - 1) * step + N * p.gamma * shape.reduce_load(range(n))


def _rhd(halving, doubling):
    def cost(p, shape, N, seg):
        node_of, n = shape.node_of(), shape.n
        fold = Fold(0, n)
        active = [fold.real(v) for v in range(fold.p)]
        total, d = 0.0, fold.p // 2
        while d >= 1:  # the same partners in halving (d = p/2 .. 1) and doubling (1 .. p/2)
            pairs = [(fold.real(v), fold.real(v ^ d)) for v in range(fold.p)]
            total += (halving + doubling) * shape.step_time(p, pairs, node_of, N * d / fold.p)
            d //= 2
        total += halving * (fold.p - 1) / fold.p * N * p.gamma * shape.reduce_load(active)
        if fold.m:  # fold in (all-gather: one block) and out (reduce-scatter: one block)
            pairs = [(2 * i, 2 * i + 1) for i in range(fold.m)]
            total += shape.step_time(p, pairs, node_of, N if halving else N / n)
            total += shape.step_time(p, pairs, node_of, N if doubling else N / n)
            total += halving * N * p.gamma * shape.reduce_load([q for _, q in pairs])
        return total
    return cost


def _hier_all_reduce(p, shape, N, seg):
    G, M = shape.per_node, shape.nodes
    K = len(pipeline_chunks(int(N), G, M, seg)) - 1  # the algorithm's own chunking (bytes as units)
    c = N / K
    load, lanes = math.ceil(G / shape.links_per_node), shape.contention(G)
    a = (G - 1) * p.step(False, c / G, lanes) + (G - 1) / G * c * p.gamma * lanes
    b = 2 * (M - 1) * p.step(M > 1, c / (G * M), load) + (M - 1) / M * c / G * p.gamma * lanes
    ag = (G - 1) * p.step(False, c / G, lanes)
    return a + b + ag + (K - 1) * max(a + ag, b)  # both intra stages share the node's lanes


def _hier_two_step(reduce):
    def cost(p, shape, N, seg):
        G, M = shape.per_node, shape.nodes
        load, lanes = math.ceil(G / shape.links_per_node), shape.contention(G)
        inter = (M - 1) * p.step(M > 1, N / shape.n, load)
        intra = (G - 1) * p.step(False, N / G, lanes)
        red = reduce * ((G - 1) / G * N + (M - 1) / M * N / G) * p.gamma * lanes
        return inter + intra + red
    return cost


_COSTS = {
    ("ring", "all_reduce"): _ring("rank", True, True),
    ("ring", "reduce_scatter"): _ring("rank", True, False),
    ("ring", "all_gather"): _ring("rank", False, True),
    ("ring_topology", "all_reduce"): _ring("topology", True, True),
    ("ring_topology", "reduce_scatter"): _ring("topology", True, False),
    ("ring_topology", "all_gather"): _ring("topology", False, True),
    ("tree", "all_reduce"): _tree,
    ("dbtree", "all_reduce"): _dbtree,
    ("rhd", "all_reduce"): _rhd(True, True),
    ("rhd", "reduce_scatter"): _rhd(True, False),
    ("rhd", "all_gather"): _rhd(False, True),
    ("hierarchical", "all_reduce"): _hier_all_reduce,
    ("hierarchical", "all_gather"): _hier_two_step(False),
    ("hierarchical", "reduce_scatter"): _hier_two_step(True),
}
