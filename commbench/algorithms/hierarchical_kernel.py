"""hierarchical_kernel: hierarchical's three stages (hierarchical.py) with the ring kernel
(cuda/collectives.cu, as ring_kernel) inside each node and the backend's point-to-point ring between
nodes: an intra-node step is a flag hand-off through the node's shared memory instead of a library call.
"""

from __future__ import annotations

import math
from collections import Counter

from commbench.algorithms.base import SEGMENT_ELEMS, bounds, pipeline, reduce_op, scratch_pair
from commbench.algorithms.hierarchical import (Hierarchical, inter_all_reduce, inter_segment, levels,
                                               node_members, pipeline_chunks)
from commbench.algorithms.kernel import ring_on, unavailable
from commbench.algorithms.ring import ring_all_gather, ring_messages, ring_reduce_scatter

PIPELINED, IN_ORDER = "pipelined", "in order"  # how hierarchical_kernel ran an all-reduce of chunks (library_choice)


class HierarchicalKernel(Hierarchical):
    """hierarchical's stages with the ring kernel inside each node (on the node's sub-communicator:
    kernel.RingOn) and the backend's ring between nodes. The kernel works on contiguous buffers
    with equal blocks per rank, so the stages cut the data as it needs (see each collective)."""

    name = "hierarchical_kernel"
    description = "hierarchical with the ring kernel inside each node, the backend's ring between nodes"
    reads_source = True
    engine = "kernel"  # its intra-node steps are the kernel's flag hand-offs (α', β' between nodes: fit.py)

    def cost(self, p, shape, collective, size_bytes, segment_bytes):
        """hierarchical's formula with the kernels' parameters (the model fits α, β, γ inside a node
        with ring_kernel and tree_kernel, and takes α', β' between nodes from the backend's step
        algorithms, whose point-to-point ring this is: commbench/analysis/model/fit.py):
          all-reduce      as hierarchical (the count mod G elements that do not divide into G parts
                          add one small kernel all-reduce inside the node: not modelled)
          all-gather      inter (M-1)·(α' + N/n·β'·L') then M kernel calls of (G-1)·(α + N/n·β)
          reduce-scatter  M kernel calls of (G-1)·(α + N/n·β) + γ, then inter (M-1)·(α' + N/n·β'·L') + γ
        (one kernel call per node's G blocks: M(G-1) flag hand-offs where hierarchical has G-1 ring
        steps). Where the all-reduce runs its chunks in order (see pipelined: on a GPU) it costs a + b + c
        of the whole buffer: not modelled (its rows' library_choice says so, and the fit leaves them out)."""
        if collective == "all_reduce":
            return super().cost(p, shape, collective, size_bytes, segment_bytes)
        G, M, N = shape.per_node, shape.nodes, size_bytes
        load, lanes = math.ceil(G / shape.links_per_node), shape.contention(G)
        inter = (M - 1) * p.step(M > 1, N / shape.n, load)
        intra = M * (G - 1) * p.step(False, N / shape.n, lanes)
        red = (collective == "reduce_scatter") * ((G - 1) / G * N + (M - 1) / M * N / G) * p.gamma * lanes
        return inter + intra + red

    def unsupported(self, ctx, collective):
        reason = super().unsupported(ctx, collective)
        if reason:
            return reason
        why = unavailable(self.name, ctx, max(ctx.node_of_rank.count(j) for j in set(ctx.node_of_rank)))
        return None if why is None else type(why)(f"{self.name} runs the ring kernel inside each node: {why}")

    def ring(self, ctx):
        """The ring kernel on the node's sub-communicator, built once per job, collectively (the
        all-reduce's two intra stages take turns in one thread: base.pipeline)."""
        return ring_on(ctx, levels(ctx).intra, "node-kernels:intra")

    def bind(self, ctx, collective, send, recv, op, in_place, in_count, out_count):
        self.ring(ctx).node.set_timeout(ctx.timeout_s)  # built here, not in the first timed call
        fn, out = super().bind(ctx, collective, send, recv, op, in_place, in_count, out_count)
        if collective == "all_reduce":
            lv = levels(ctx)
            if len(self.chunks(in_count, lv.intra.size, lv.inter.size, ctx.segment_elems)) > 2:
                fn.schedule = PIPELINED if self.pipelined(ctx) else IN_ORDER  # the row's library_choice
        return fn, out

    def chunks(self, count: int, g: int, m: int, seg: int) -> list[int]:
        """Chunk boundaries of the all-reduce: hierarchical's chunks (their number, their sizes) of the
        count's G-element groups ((count // G) // seg == count // (G·seg)), so multiples of G; the count
        mod G elements after the last, the tail, go with the last chunk."""
        return [g * e for e in pipeline_chunks(count // g, 1, m, seg)]

    def pipelined(self, ctx) -> bool:
        """Whether the all-reduce's chunks go through its stages pipelined (base.pipeline: on the
        CPU), or the whole buffer through each stage in turn (all_reduce_in_order: on a GPU, where the
        rank's stream orders the stages). Beside MPI between two nodes the pipeline pays too since the
        messages across them are cut to what Open MPI sends unanswered (inter_segment; paired figures:
        docs, Emulated clusters)."""
        return ctx.comm.device == "cpu"

    def messages(self, collective, elems, node_of_rank, segment_elems=SEGMENT_ELEMS):
        """As hierarchical's, on the all-reduce's own chunks; the intra-node ones are the kernel's ring
        (through the node's memory), the inter-node ones the backend's."""
        if collective != "all_reduce":
            return super().messages(collective, elems, node_of_rank, segment_elems)
        members = node_members(node_of_rank)
        m, g = len(members), len(members[0])
        edges = self.chunks(elems, g, m, segment_elems)
        tail = elems - edges[-1]
        sent = Counter()
        for k in range(len(edges) - 1):
            c = (edges[k + 1] - edges[k]) // g
            across = c + (tail if k == len(edges) - 2 else 0)
            for ranks in members:  # reduce-scatter and all-gather of the G parts (the tail: an all-reduce)
                sent += ring_messages(ranks, [c] * g, True, True)
                if across > c:
                    b = bounds(tail, g)
                    sent += ring_messages(ranks, [b[q + 1] - b[q] for q in range(g)], True, True)
            b = bounds(across, m)
            sizes = [b[j + 1] - b[j] for j in range(m)]
            for q in range(g):  # all-reduce of part q (and the tail) across nodes
                sent += ring_messages([members[j][q] for j in range(m)], sizes, True, True)
        return sent

    def all_reduce(self, ctx, buf, op, src=None):
        """Chunk by chunk, the chunk being G equal parts (the tail, the count mod G elements left
        over, goes with the last chunk):
          1. inside the node, the ring kernel reduce-scatters the chunk: local rank l gets part l
             reduced over the node (the tail: the kernel all-reduces it, every rank keeps it);
          2. across nodes, the ranks with local index l all-reduce part l (and the tail) with the
             backend's ring (inter_all_reduce, as hierarchical);
          3. inside the node, the ring kernel all-gathers the chunk's parts.
        Pipelined as hierarchical (step 3 of chunk k-1, then step 1 of chunk k+1, while chunk k crosses
        the nodes: base.pipeline) on the CPU (pipelined), else all_reduce_in_order."""
        lv, src = levels(ctx), buf if src is None else src
        edges = self.chunks(len(buf), lv.intra.size, lv.inter.size, ctx.segment_elems)
        if len(edges) == 2 or not self.pipelined(ctx):
            return self.all_reduce_in_order(ctx, buf, op, src, edges)
        intra, view = self.ring(ctx), ctx.comm.view
        g, l = lv.intra.size, lv.local
        last, tail = len(edges) - 2, len(buf) - edges[-1]

        def part(k):  # this rank's part of chunk k, and the chunk's part size
            c = (edges[k + 1] - edges[k]) // g
            return view(buf, edges[k] + l * c, c), c

        def intra_reduce_scatter(k):
            mine, c = part(k)
            if c:
                intra.reduce_scatter(view(src, edges[k], g * c), mine, op, c)
            if k == last and tail:
                intra.all_reduce(view(src, edges[-1], tail), view(buf, edges[-1], tail), op, tail)

        def across_nodes(k):
            mine, c = part(k)
            with_tail = [view(buf, edges[-1], tail)] if k == last and tail else []
            inter_all_reduce(ctx, lv, [([mine] if c else []) + with_tail], op)

        def intra_all_gather(k):
            mine, c = part(k)
            if c:
                intra.all_gather(mine, view(buf, edges[k], g * c), c)

        pipeline(intra_reduce_scatter, across_nodes, intra_all_gather, list(range(last + 1)), ctx)

    def all_reduce_in_order(self, ctx, buf, op, src, edges: list[int]) -> None:
        """The same chunks, the whole buffer through each stage in turn: local rank l's part is the l-th
        of G equal parts of the chunks together (its piece of each chunk after the one before), so
          1. one kernel reduce-scatter (the tail: one kernel all-reduce),
          2. one all-reduce across nodes of every chunk's piece, each chunk's piece (and the tail, with
             the last) cut into M blocks as the pipeline cuts it, so the same messages cross the nodes,
          3. one kernel all-gather."""
        lv, intra, view = levels(ctx), self.ring(ctx), ctx.comm.view
        g, c, tail = lv.intra.size, edges[-1] // lv.intra.size, len(buf) - edges[-1]
        mine = view(buf, lv.local * c, c)
        if c:
            intra.reduce_scatter(view(src, 0, g * c), mine, op, c)
        if tail:
            intra.all_reduce(view(src, edges[-1], tail), view(buf, edges[-1], tail), op, tail)
        groups, at = [], 0
        for k in range(len(edges) - 1):
            piece = (edges[k + 1] - edges[k]) // g
            groups.append([view(mine, at, piece)] if piece else [])
            at += piece
        groups[-1] += [view(buf, edges[-1], tail)] if tail else []
        inter_all_reduce(ctx, lv, [views for views in groups if views], op)
        if c:
            intra.all_gather(mine, view(buf, 0, g * c), c)

    def _slab(self, ctx, buf, block: int, node: int):
        """Node `node`'s G blocks (of local ranks 0..G-1) as one contiguous view of buf where they
        are consecutive (ranks placed node by node), else None."""
        ranks = levels(ctx).members[node]
        if ranks != list(range(ranks[0], ranks[0] + len(ranks))):
            return None
        return ctx.comm.view(buf, ranks[0] * block, len(ranks) * block)

    def reduce_scatter(self, ctx, buf, op, block, src=None):
        """1. inside the node, for each node j, the ring kernel reduce-scatters node j's G blocks:
              local rank l gets block (j, l) reduced over its own node (M kernel calls);
           2. across nodes, the ranks with local index l reduce-scatter their M blocks (j, l) with
              the backend's ring (as hierarchical): node j's rank gets block (j, l), reduced;
           3. avg's one division.
        Where a node's blocks are not consecutive (ranks placed round-robin), they are first
        gathered into a scratch slab."""
        lv, intra, comm = levels(ctx), self.ring(ctx), ctx.comm
        g, m, l = lv.intra.size, lv.inter.size, lv.local
        src = buf if src is None else src
        slot = self._slots(ctx, buf, block)
        for j in range(m):
            slab = self._slab(ctx, src, block, j)
            if slab is None:
                slab = comm.view(scratch_pair(ctx, "hier-slab", g * block, buf)[0], 0, g * block)
                for q in range(g):
                    comm.reducer.copy(comm.view(slab, q * block, block),
                                      comm.view(src, lv.rank_of(j, q) * block, block))
            intra.reduce_scatter(slab, slot(j, l), op, block)
        ring_reduce_scatter(lv.inter, list(range(m)), [[slot(j, l)] for j in range(m)], reduce_op(op),
                            inter_segment(ctx, lv, buf.itemsize), scratch_pair(ctx, "hier", block, buf))
        comm.reducer.finish(slot(lv.node, l), op, comm.size)

    def all_gather(self, ctx, buf, block):
        """1. across nodes, the ranks with local index l all-gather the blocks (j, l) of every node
              j with the backend's ring (as hierarchical);
           2. inside the node, for each node j, the ring kernel all-gathers node j's G blocks
              (M kernel calls; a scratch slab where a node's blocks are not consecutive)."""
        lv, intra, comm = levels(ctx), self.ring(ctx), ctx.comm
        g, m, l = lv.intra.size, lv.inter.size, lv.local
        slot = self._slots(ctx, buf, block)
        ring_all_gather(lv.inter, list(range(m)), [[slot(j, l)] for j in range(m)],
                        inter_segment(ctx, lv, buf.itemsize))
        for j in range(m):
            slab = self._slab(ctx, buf, block, j)
            if slab is not None:
                intra.all_gather(slot(j, l), slab, block)
                continue
            slab = scratch_pair(ctx, "hier-slab", g * block, buf)[0]
            mine = comm.view(slab, l * block, block)
            comm.reducer.copy(mine, slot(j, l))
            intra.all_gather(mine, comm.view(slab, 0, g * block), block)
            for q in range(g):
                if q != l:
                    comm.reducer.copy(slot(j, q), comm.view(slab, q * block, block))
