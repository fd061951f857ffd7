"""Ring: the bandwidth-optimal algorithm.

The n ranks form a ring: `ring` in rank order, `ring_topology` node by node (each node's ranks
adjacent, so the ring crosses each node boundary once, whatever the placement). The data is
cut into n blocks; every step each rank sends one block to its right neighbour and receives one
from its left, in segments, so that a segment is reduced and forwarded while the next arrives.

* reduce-scatter: n-1 steps; at step s position p sends block p-s-1 and receives block p-s-2,
  adding its own contribution; afterwards position p holds block p fully reduced.
* all-gather: n-1 steps; at step s position p forwards block p-s and receives block p-s-1.
* all-reduce: reduce-scatter then all-gather on the same n blocks.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from commbench.algorithms.base import (SEGMENT_ELEMS, Algorithm, bounds, reduce_op, ring_order, scratch_pair, segments,
                                       wait_all)

if TYPE_CHECKING:
    from commbench.backends.communicators import Communicator


def ring_reduce_scatter(comm: Communicator, order: list[int], blocks: list[list], op: str, seg: int,
                        tmp: list, sources: list[list] | None = None) -> None:
    """blocks[q]: the views making up block q (block q ends at ring position q, reduced).
    sources[q]: where this rank's own contribution to block q is read (default: blocks[q]).
    tmp: two scratch buffers, each at least as long as the largest block.
    Step s, segment k is one exchange (send segment k right, receive segment k from the left),
    every rank issuing them in the same order; segment k of step s is sent once segment k of
    step s-1 is reduced, while the later segments of step s-1 are still on their way."""
    n, red = len(order), comm.reducer
    if n == 1:  # nothing to send: the block is this rank's own contribution (read from sources, out of place)
        for dst, src in zip(blocks[0], (sources or blocks)[0], strict=True):
            if src is not dst:
                red.copy(dst, src)
        return
    pos = order.index(comm.rank)
    left, right = order[pos - 1], order[(pos + 1) % n]
    sources = sources or blocks
    arrived: list = []  # step s-1's (block segment, own contribution, scratch, request) per segment
    sent_only: list = []  # exchanges without a receive, waited at the end
    outgoing = segments(comm, sources[(pos - 1) % n], seg)
    for step in range(n - 1):
        q = (pos - step - 2) % n  # received and reduced this step; sent the next
        incoming = list(zip(segments(comm, blocks[q], seg), segments(comm, sources[q], seg), strict=True))
        scratch, off, current = tmp[step % 2], 0, []
        for k in range(max(len(outgoing), len(incoming))):
            if k < len(arrived):  # this segment of last step's block is the one sent now
                _reduce_arrived(red, arrived[k], op)
            sends = [(outgoing[k], right, (step % 2) * 4096 + k)] if k < len(outgoing) else []
            recvs = []
            if k < len(incoming):
                s, o = incoming[k]
                t = comm.view(scratch, off, len(s))
                off += len(s)
                recvs = [(t, left, (step % 2) * 4096 + k)]
            req = comm.exchange(sends, recvs)
            if recvs:
                current.append((s, o, t, req))
            else:
                sent_only.append(req)
        arrived, outgoing = current, [s for s, _ in incoming]  # the block just received goes out next
    for item in arrived:
        _reduce_arrived(red, item, op)
    wait_all(sent_only)


def _reduce_arrived(red, item, op: str) -> None:
    s, o, t, req = item
    req.wait()
    red.reduce(s, t, op, other=o)


def ring_all_gather(comm: Communicator, order: list[int], blocks: list[list], seg: int) -> None:
    """blocks[q]: the views of block q, which position q holds at the start; all end filled.
    Step s, segment k is one exchange, as in ring_reduce_scatter."""
    n = len(order)
    if n == 1:
        return
    pos = order.index(comm.rank)
    left, right = order[pos - 1], order[(pos + 1) % n]
    arrived: list = []  # step s-1's exchanges that received segment k (forwarded at step s)
    sent_only: list = []  # exchanges without a receive, waited at the end
    outgoing = segments(comm, blocks[pos], seg)
    for step in range(n - 1):
        incoming = segments(comm, blocks[(pos - step - 1) % n], seg)
        current = []
        for k in range(max(len(outgoing), len(incoming))):
            if k < len(arrived):
                arrived[k].wait()
            tag = (step % 2) * 4096 + k
            req = comm.exchange([(outgoing[k], right, tag)] if k < len(outgoing) else [],
                                [(incoming[k], left, tag)] if k < len(incoming) else [])
            (current if k < len(incoming) else sent_only).append(req)
        arrived, outgoing = current, incoming  # the block just received goes out next
    wait_all(sent_only + arrived)


def ring_messages(order: list[int], sizes: list[int], reduce_scatter: bool, all_gather: bool) -> Counter:
    """Elements each position sends to the next: block q has sizes[q] elements and ends at
    position q. Reduce-scatter sends every block but its own, all-gather every block but the
    next position's."""
    n, total, sent = len(order), sum(sizes), Counter()
    for p in range(n if n > 1 else 0):
        edge = (order[p], order[(p + 1) % n])
        sent[edge] += (total - sizes[p]) * reduce_scatter + (total - sizes[(p + 1) % n]) * all_gather
    return sent


class Ring(Algorithm):
    name = "ring"
    description = "ring in rank order: bandwidth-optimal, 2(n-1) steps"
    order = "rank"
    reads_source = True

    def cost(self, p, shape, collective, size_bytes, segment_bytes):
        """n ranks, N bytes, L the load of the step's busiest link (commbench.algorithms.cost):
          all-reduce      2(n-1)·(α + N/n·β·L) + (n-1)/n·N·γ     2(n-1)/n·N bytes sent per rank
          reduce-scatter   (n-1)·(α + N/n·β·L) + (n-1)/n·N·γ     N = one rank's input
          all-gather       (n-1)·(α + N/n·β·L)                   N = the gathered output
        (Thakur, Rabenseifner & Gropp 2005). The ⌈block/segment⌉ messages of a step overlap: one α."""
        node_of, n, N = shape.node_of(), shape.n, size_bytes
        reduce_scatter, all_gather = collective != "all_gather", collective != "reduce_scatter"
        order = ring_order(node_of, self.order)
        step = shape.step_time(p, [(order[i], order[(i + 1) % n]) for i in range(n)], node_of, N / n)
        steps = (n - 1) * (reduce_scatter + all_gather)
        return steps * step + reduce_scatter * (n - 1) / n * N * p.gamma * shape.reduce_load(range(n))

    def messages(self, collective, elems, node_of_rank, segment_elems=SEGMENT_ELEMS):
        order, n = ring_order(node_of_rank, self.order), len(node_of_rank)
        if collective == "all_reduce":
            b = bounds(elems, n)
            return ring_messages(order, [b[q + 1] - b[q] for q in range(n)], True, True)
        return ring_messages(order, [elems] * n, collective == "reduce_scatter", collective == "all_gather")

    def all_reduce(self, ctx, buf, op, src=None):
        comm, order = ctx.comm, ctx.ring(self.order)
        n = len(order)
        b = bounds(len(buf), n)
        blocks = [[comm.view(buf, b[q], b[q + 1] - b[q])] for q in range(n)]
        sources = None if src is None else [[comm.view(src, b[q], b[q + 1] - b[q])] for q in range(n)]
        pos = order.index(comm.rank)
        tmp = scratch_pair(ctx, "ring", b[1] - b[0] + 1, buf)
        ring_reduce_scatter(comm, order, blocks, reduce_op(op), ctx.segment_elems, tmp, sources)
        comm.reducer.finish(blocks[pos][0], op, n)
        ring_all_gather(comm, order, blocks, ctx.segment_elems)

    def all_gather(self, ctx, buf, block):
        comm, order = ctx.comm, ctx.ring(self.order)
        blocks = [[comm.view(buf, r * block, block)] for r in order]  # position q holds rank order[q]'s block
        ring_all_gather(comm, order, blocks, ctx.segment_elems)

    def reduce_scatter(self, ctx, buf, op, block, src=None):
        comm, order = ctx.comm, ctx.ring(self.order)
        blocks = [[comm.view(buf, r * block, block)] for r in order]
        sources = None if src is None else [[comm.view(src, r * block, block)] for r in order]
        tmp = scratch_pair(ctx, "ring", block, buf)
        ring_reduce_scatter(comm, order, blocks, reduce_op(op), ctx.segment_elems, tmp, sources)
        comm.reducer.finish(blocks[order.index(comm.rank)][0], op, len(order))


class TopologyRing(Ring):
    """The same ring with each node's ranks adjacent in the ring."""

    name = "ring_topology"
    description = "ring with each node's ranks adjacent: leaves each node once"
    order = "topology"
    predicted = False  # model predict places ranks by block, where it is the rank-order ring
