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

Each node's uplink carries G times less than a flat ring that crosses node boundaries at every
hop (round-robin placement), and the same amount as a topology-ordered ring, in fewer steps.

hierarchical_kernel (hierarchical_kernel.py) runs the same stages with the ring kernel inside each node.
"""

from __future__ import annotations

import math
from collections import Counter

from commbench.algorithms.base import SEGMENT_ELEMS, Algorithm, Context, bounds, pipeline, reduce_op, scratch_pair
from commbench.algorithms.ring import ring_all_gather, ring_messages, ring_reduce_scatter


def node_members(node_of_rank: list[int]) -> list[list[int]]:
    """The ranks of each node, nodes in index order, ranks ascending."""
    return [sorted(r for r, j in enumerate(node_of_rank) if j == node) for node in sorted(set(node_of_rank))]


MAX_CHUNKS = 8  # pipeline depth of the all-reduce (at most count // (G·seg) chunks: pipeline_chunks)


def chunk_weights(k: int) -> list[int]:
    """The relative sizes of the all-reduce's k chunks: from 4 chunks on, the first two and the last two
    a quarter and a half of the others', so the stages that fill the pipeline and drain it, which
    nothing overlaps, take less (2x2 emulated nodes, paired: docs, Emulated clusters)."""
    return [1] * k if k < 4 else [1, 2] + [4] * (k - 4) + [2, 1]


def pipeline_chunks(count: int, g: int, m: int, seg: int) -> list[int]:
    """Chunk boundaries of the pipelined all-reduce of count units (chunk_weights' sizes), none empty
    (a chunk that would be, with segments of a few elements, goes: one chunk fewer)."""
    weights = chunk_weights(max(1, min(MAX_CHUNKS, count // (g * seg))))
    edges, at, total = [0], 0, sum(weights)
    for w in weights:
        at += w
        if count * at // total > edges[-1]:
            edges.append(count * at // total)
    return edges if len(edges) > 1 else [0, count]


class Levels:
    """The two sub-communicators and the rank grid, built once per job (collective)."""

    def __init__(self, ctx: Context):
        comm, nodes = ctx.comm, ctx.node_of_rank
        self.members = node_members(nodes)
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


def cut(comm, views: list, parts: int) -> list[list]:
    """The elements of `views` (one after the other) in `parts` nearly equal blocks (bounds), each
    a list of views of them."""
    b, out, start = bounds(sum(len(v) for v in views), parts), [[] for _ in range(parts)], 0
    for v in views:
        for q in range(parts):
            lo, hi = max(b[q], start), min(b[q + 1], start + len(v))
            if hi > lo:
                out[q].append(comm.view(v, lo - start, hi - lo))
        start += len(v)
    return out


def inter_segment(ctx: Context, lv: Levels, itemsize: int) -> int:
    """Segments of the backend's ring between nodes (elements of itemsize bytes). Between two nodes a
    rank exchanges with one peer both ways over one connection, where a message the library sends
    only once the receiver has answered can wait behind the peer's (Communicator.unanswered_message_bytes):
    there a segment is at most the library's unanswered message (docs, Emulated clusters), up to
    base.MAX_SEGMENTS of them a block."""
    cap = ctx.comm.unanswered_message_bytes
    if lv.inter.size != 2 or cap is None:
        return ctx.segment_elems
    return max(1, min(ctx.segment_elems, cap // itemsize))


def inter_all_reduce(ctx: Context, lv: Levels, groups: list[list], op: str) -> None:
    """Across nodes, the ranks with this rank's local index all-reduce the views of `groups` with the
    backend's ring: reduce-scatter into M blocks, the average's one division, all-gather. Each group
    (a chunk's views) is cut into M blocks of its own; block j of every group makes the ring's block j."""
    m, seg = lv.inter.size, inter_segment(ctx, lv, groups[0][0].itemsize)
    pieces = [sum(blocks, []) for blocks in zip(*(cut(lv.inter, views, m) for views in groups))]
    longest = max(sum(len(v) for v in p) for p in pieces)
    ring_reduce_scatter(lv.inter, list(range(m)), pieces, reduce_op(op), seg,
                        scratch_pair(ctx, "hier-inter", longest + 1, groups[0][0]))
    for v in pieces[lv.node]:
        ctx.comm.reducer.finish(v, op, ctx.comm.size)
    ring_all_gather(lv.inter, list(range(m)), pieces, seg)


class Hierarchical(Algorithm):
    name = "hierarchical"
    description = "two levels: rings inside each node, rings across nodes (same local rank)"
    threads = True  # the pipelined all-reduce crosses the nodes in a thread of its own (base.pipeline)

    def cost(self, p, shape, collective, size_bytes, segment_bytes):
        """G ranks on each of M nodes, N bytes; α, β inside a node, α', β' between nodes:
          all-reduce    per chunk of N/K: a = intra reduce-scatter (G-1)·(α + N/(KG)·β) + (G-1)/G·N/K·γ,
                        b = inter all-reduce 2(M-1)·(α' + N/(KGM)·β'·L') + (M-1)/M·N/(KG)·γ,  c = intra all-gather;
                        pipelined over K chunks (pipeline_chunks' sizes), chunk k crossing while the
                        calling thread all-gathers k-1 and reduce-scatters k+1 (base.pipeline):
                        a₀ + max(a₁, b₀) + Σ k=2..K-1 max(c_k-2 + a_k, b_k-1) + max(c_K-2, b_K-1) + c_K-1
                        (a + b + c for one chunk)
          all-gather    inter (M-1)·(α' + N/n·β'·L') then intra (G-1)·(α + N/G·β);  reduce-scatter mirrors it + γ"""
        G, M, N = shape.per_node, shape.nodes, size_bytes
        load, lanes = math.ceil(G / shape.links_per_node), shape.contention(G)
        if collective != "all_reduce":
            inter = (M - 1) * p.step(M > 1, N / shape.n, load)
            intra = (G - 1) * p.step(False, N / G, lanes)
            red = (collective == "reduce_scatter") * ((G - 1) / G * N + (M - 1) / M * N / G) * p.gamma * lanes
            return inter + intra + red
        edges = pipeline_chunks(int(N), G, M, segment_bytes)  # the algorithm's own chunking (bytes as units)
        sizes = [hi - lo for lo, hi in zip(edges, edges[1:])]
        a = [(G - 1) * p.step(False, c / G, lanes) + (G - 1) / G * c * p.gamma * lanes for c in sizes]
        b = [2 * (M - 1) * p.step(M > 1, c / (G * M), load) + (M - 1) / M * c / G * p.gamma * lanes for c in sizes]
        ag = [(G - 1) * p.step(False, c / G, lanes) for c in sizes]
        K = len(sizes)
        if K == 1:
            return a[0] + b[0] + ag[0]
        middle = sum(max(ag[k - 2] + a[k], b[k - 1]) for k in range(2, K))
        return a[0] + max(a[1], b[0]) + middle + max(ag[K - 2], b[K - 1]) + ag[K - 1]

    def unsupported(self, ctx, collective):
        sizes = {ctx.node_of_rank.count(j) for j in set(ctx.node_of_rank)}
        if len(sizes) > 1:
            return f"{self.name} needs the same number of ranks on every node (found {sorted(sizes)})"
        return super().unsupported(ctx, collective)

    def messages(self, collective, elems, node_of_rank, segment_elems=SEGMENT_ELEMS):
        members = node_members(node_of_rank)
        m, g = len(members), len(members[0])
        intra = [members[j] for j in range(m)]
        inter = [[members[j][q] for j in range(m)] for q in range(g)]
        sent = Counter()
        if collective == "all_reduce":
            chunks = pipeline_chunks(elems, g, m, segment_elems)
            for k in range(len(chunks) - 1):
                b = bounds(chunks[k + 1] - chunks[k], g)
                for ranks in intra:  # reduce-scatter and all-gather of the G parts
                    sent += ring_messages(ranks, [b[q + 1] - b[q] for q in range(g)], True, True)
                for q, ranks in enumerate(inter):  # all-reduce of part q across nodes
                    c = bounds(b[q + 1] - b[q], m)
                    sent += ring_messages(ranks, [c[j + 1] - c[j] for j in range(m)], True, True)
            return sent
        gather = collective == "all_gather"
        for ranks in intra:  # blocks of M slots
            sent += ring_messages(ranks, [m * elems] * g, not gather, gather)
        for ranks in inter:  # blocks of one slot
            sent += ring_messages(ranks, [elems] * m, not gather, gather)
        return sent

    def all_reduce(self, ctx, buf, op):
        """Pipelined over chunks of the buffer: while chunk k crosses the nodes (in a thread of its
        own), chunk k-1 is all-gathered and then chunk k+1 reduce-scattered inside them (base.pipeline)."""
        lv, seg = levels(ctx), ctx.segment_elems
        g, m = lv.intra.size, lv.inter.size
        chunks = pipeline_chunks(len(buf), g, m, seg)
        parts_of = {}

        def intra_reduce_scatter(k):
            piece = lv.intra.view(buf, chunks[k], chunks[k + 1] - chunks[k])
            b = bounds(len(piece), g)
            parts_of[k] = [[lv.intra.view(piece, b[q], b[q + 1] - b[q])] for q in range(g)]
            ring_reduce_scatter(lv.intra, list(range(g)), parts_of[k], reduce_op(op), seg,
                                scratch_pair(ctx, "hier-intra", b[1] - b[0] + 1, buf))

        def across_nodes(k):
            inter_all_reduce(ctx, lv, [parts_of[k][lv.local]], op)

        def intra_all_gather(k):
            ring_all_gather(lv.intra, list(range(g)), parts_of.pop(k), seg)

        if len(chunks) == 2:
            for stage in (intra_reduce_scatter, across_nodes, intra_all_gather):
                stage(0)
        else:
            pipeline(intra_reduce_scatter, across_nodes, intra_all_gather, list(range(len(chunks) - 1)), ctx)

    def _slots(self, ctx, buf, block):
        lv = levels(ctx)
        return lambda node, local: ctx.comm.view(buf, lv.rank_of(node, local) * block, block)

    def all_gather(self, ctx, buf, block):
        lv, seg = levels(ctx), ctx.segment_elems
        slot = self._slots(ctx, buf, block)
        g, m = lv.intra.size, lv.inter.size
        ring_all_gather(lv.inter, list(range(m)), [[slot(j, lv.local)] for j in range(m)],
                        inter_segment(ctx, lv, buf.itemsize))
        ring_all_gather(lv.intra, list(range(g)), [[slot(j, q) for j in range(m)] for q in range(g)], seg)

    def reduce_scatter(self, ctx, buf, op, block):
        lv, seg = levels(ctx), ctx.segment_elems
        slot = self._slots(ctx, buf, block)
        g, m = lv.intra.size, lv.inter.size
        tmp = scratch_pair(ctx, "hier", block * max(g, m), buf)
        ring_reduce_scatter(lv.intra, list(range(g)), [[slot(j, q) for j in range(m)] for q in range(g)],
                            reduce_op(op), seg, tmp)
        ring_reduce_scatter(lv.inter, list(range(m)), [[slot(j, lv.local)] for j in range(m)],
                            reduce_op(op), inter_segment(ctx, lv, buf.itemsize), tmp)
        ctx.comm.reducer.finish(slot(lv.node, lv.local), op, ctx.comm.size)

