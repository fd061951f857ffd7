"""What every algorithm's `cost()` is written with: Hockney (α-β) costs with a reduction term
γ, for two link classes. Each algorithm's formula is beside its `cost()`; the model
(commbench.analysis.model) fits the parameters and asks the algorithms.

A message of m bytes over a link of class c costs α_c + m·β_c; reducing m bytes costs m·γ.
Class `intra` joins ranks of one node, `inter` ranks of different nodes. Messages of one step
share what they cross, which multiplies their cost by a load L (written β·L in the formulas):
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace


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
    """Bytes of the harness' buffers one rank touches per call, as the collective counts them
    (Collective.footprint: N as in nccl-tests); a collective this commbench does not know is
    refused (ValueError), never taken for another."""
    from commbench.collectives import COLLECTIVES

    if collective not in COLLECTIVES:
        raise ValueError(f"the cost model knows no collective {collective!r} (it knows {', '.join(COLLECTIVES)})")
    return COLLECTIVES[collective].footprint(size_bytes, n, in_place)
