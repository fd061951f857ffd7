"""Hockney (α-β) cost of commbench's algorithms with a reduction term γ, for two link classes.

A message of m bytes over a link of class c costs α_c + m·β_c; reducing m bytes costs m·γ.
Class `intra` joins ranks of one node, `inter` ranks of different nodes. Messages of one step
share what they cross, which multiplies their cost by a load L (written β·L below):
  inter  ⌈messages leaving the node / links per node⌉ on the bytes (1 link per node on the emulated cluster,
         one NIC per GPU on a rail-optimised GPU cluster);
  intra  ⌈messages inside the node / lanes⌉ on the whole message, α + m·β (a CPU rank's α is
         mostly its own CPU time, which waits for a core like the copy does), and reductions
         ⌈ranks reducing on the node / lanes⌉; lanes = how many copies or reductions a node runs
         at full speed at once (its cores for CPU ranks that outnumber them, G with NVSwitch: no
         contention).
Memory: a call whose buffers on one node (ranks × footprint) exceed the cache C streams the
fraction 1 - C/W of its bytes from memory, at (1 + mem_factor) times β_intra and γ.
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
from dataclasses import dataclass, replace

from commbench.rank.algorithms.base import ring_order
from commbench.rank.algorithms.dbtree import double_tree
from commbench.rank.algorithms.hierarchical import pipeline_chunks
from commbench.rank.algorithms.rhd import Fold

MODELLED = ("ring", "ring_topology", "tree", "dbtree", "rhd", "hierarchical")


@dataclass(frozen=True)
class Params:
    """Seconds per message (α) and per byte (β) for each link class; γ seconds per reduced byte."""

    alpha_intra: float
    beta_intra: float
    alpha_inter: float
    beta_inter: float
    gamma: float
    mem_factor: float = 0.0  # extra β_intra and γ, relative, on bytes a node's cache cannot hold
    cache_bytes: float = 0.0

    def in_memory(self, working_set: float) -> "Params":
        """The parameters for a call touching `working_set` bytes on a node: the fraction
        1 - C/W of its bytes that no longer fits the cache C streams from memory, which costs
        copies (β_intra) and reductions (γ) mem_factor more. Links between nodes are not
        memory-bound and keep their β."""
        miss = max(0.0, 1.0 - self.cache_bytes / working_set) if working_set > 0 else 0.0
        slow = 1.0 + self.mem_factor * miss
        return replace(self, beta_intra=self.beta_intra * slow, gamma=self.gamma * slow)

    @classmethod
    def from_values(cls, values: dict) -> "Params":
        """From a name -> value mapping; a missing or None parameter costs nothing."""
        return cls(**{f: values.get(f) or 0.0 for f in cls.__dataclass_fields__})

    def step(self, inter: bool, nbytes: float, load: int = 1) -> float:
        if inter:
            return self.alpha_inter + nbytes * load * self.beta_inter
        return (self.alpha_intra + nbytes * self.beta_intra) * load  # a busy node's CPU time, α too


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


def footprint(collective: str, size_bytes: float, n: int, in_place: bool) -> float:
    """Bytes of the harness' buffers one rank touches per call (N as in nccl-tests: the
    all-reduce buffer, the gathered output, the reduce-scatter input)."""
    if collective == "all_reduce":
        return size_bytes * (1 if in_place else 2)
    return size_bytes + (0 if in_place else size_bytes / n)


def time_s(p: Params, algorithm: str, collective: str, shape: Shape, size_bytes: float,
           segment_bytes: int = 1 << 20, in_place: bool = True) -> float | None:
    """Modelled seconds of one call; None where the algorithm has no such collective."""
    fn = _COSTS.get((algorithm, collective))
    if fn is None or shape.n < 1:
        return None
    if shape.n == 1:
        return 0.0
    p = p.in_memory(shape.per_node * footprint(collective, size_bytes, shape.n, in_place))
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
