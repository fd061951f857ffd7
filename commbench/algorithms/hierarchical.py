"""Hierarchical (two-level) collectives: keep the bulk of the traffic inside nodes.

With G ranks on each of M nodes (from the launcher, the hostnames, or --ranks-per-node), every
rank belongs to an intra-node group (its node) and an inter-node group (the ranks with the same
local index on every node). Each level runs the ring algorithm.

* all-reduce: intra-node reduce-scatter into G parts -> all-reduce of part l across nodes among
  the ranks with local index l -> intra-node all-gather.
* all-gather: across nodes, ranks with local index l gather the blocks of every node's local
  rank l -> inside each node, the G collections are all-gathered.
* reduce-scatter: inside each node, local rank l receives (reduced over the node) the blocks of
  every node's local rank l -> across nodes, a reduce-scatter of those M blocks.

Cost for N bytes (α/β inside a node, α'/β' between nodes, G ranks per node, M nodes):
  all-reduce  2(G-1)α + 2(G-1)/G·Nβ  +  2(M-1)α' + 2(M-1)/M·(N/G)β'  (+ reductions (G-1)/G·Nγ + (M-1)/M·(N/G)γ)
  all-gather  (M-1)α' + (M-1)/M·(N/G)β'  +  (G-1)α + (G-1)/G·Nβ
  reduce-scatter mirrors all-gather (plus the reductions).
Each node's uplink carries G times less than a flat ring that crosses node boundaries at every
hop (round-robin placement), and the same amount as a topology-ordered ring, in fewer steps.
"""

from __future__ import annotations

from commbench.algorithms.base import Algorithm, Context, bounds, reduce_op
from commbench.algorithms.ring import ring_all_gather, ring_reduce_scatter, scratch_pair


class Levels:
    """The two sub-communicators and the rank grid, built once per job (collective)."""

    def __init__(self, ctx: Context):
        comm, nodes = ctx.comm, ctx.node_of_rank
        self.members = [sorted(r for r in range(comm.size) if nodes[r] == j) for j in sorted(set(nodes))]
        node = sorted(set(nodes)).index(nodes[comm.rank])
        self.node, self.local = node, self.members[node].index(comm.rank)
        self.intra = comm.split(color=node, key=comm.rank)
        self.inter = comm.split(color=self.local, key=node)

    def rank_of(self, node: int, local: int) -> int:
        return self.members[node][local]


def levels(ctx: Context) -> Levels:
    if "levels" not in ctx.cache:
        ctx.cache["levels"] = Levels(ctx)
    return ctx.cache["levels"]


class Hierarchical(Algorithm):
    name = "hierarchical"

    def unsupported(self, ctx, collective):
        sizes = {ctx.node_of_rank.count(j) for j in set(ctx.node_of_rank)}
        if len(sizes) > 1:
            return f"hierarchical needs the same number of ranks on every node (found {sorted(sizes)})"
        return super().unsupported(ctx, collective)

    def all_reduce(self, ctx, buf, op):
        lv, seg = levels(ctx), ctx.segment_elems
        g, m = lv.intra.size, lv.inter.size
        b = bounds(len(buf), g)
        parts = [[lv.intra.view(buf, b[q], b[q + 1] - b[q])] for q in range(g)]
        tmp = scratch_pair(ctx, "hier", b[1] - b[0] + 1, buf)
        ring_reduce_scatter(lv.intra, list(range(g)), parts, reduce_op(op), seg, tmp)
        part = parts[lv.local][0]
        c = bounds(len(part), m)
        pieces = [[lv.inter.view(part, c[q], c[q + 1] - c[q])] for q in range(m)]
        ring_reduce_scatter(lv.inter, list(range(m)), pieces, reduce_op(op), seg, tmp)
        ctx.comm.reducer.finish(pieces[lv.node][0], op, ctx.comm.size)
        ring_all_gather(lv.inter, list(range(m)), pieces, seg)
        ring_all_gather(lv.intra, list(range(g)), parts, seg)

    def _slots(self, ctx, buf, block):
        lv = levels(ctx)
        return lambda node, local: ctx.comm.view(buf, lv.rank_of(node, local) * block, block)

    def all_gather(self, ctx, buf, block):
        lv, seg = levels(ctx), ctx.segment_elems
        slot = self._slots(ctx, buf, block)
        g, m = lv.intra.size, lv.inter.size
        ring_all_gather(lv.inter, list(range(m)), [[slot(j, lv.local)] for j in range(m)], seg)
        ring_all_gather(lv.intra, list(range(g)), [[slot(j, q) for j in range(m)] for q in range(g)], seg)

    def reduce_scatter(self, ctx, buf, op, block):
        lv, seg = levels(ctx), ctx.segment_elems
        slot = self._slots(ctx, buf, block)
        g, m = lv.intra.size, lv.inter.size
        tmp = scratch_pair(ctx, "hier", block * max(g, m), buf)
        ring_reduce_scatter(lv.intra, list(range(g)), [[slot(j, q) for j in range(m)] for q in range(g)],
                            reduce_op(op), seg, tmp)
        ring_reduce_scatter(lv.inter, list(range(m)), [[slot(j, lv.local)] for j in range(m)],
                            reduce_op(op), seg, tmp)
        ctx.comm.reducer.finish(slot(lv.node, lv.local), op, ctx.comm.size)
