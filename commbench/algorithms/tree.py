"""Binomial tree all-reduce: a binomial-tree reduce to rank 0, then a binomial-tree broadcast;
and the two halves alone, from or to any root: broadcast and reduce.

Rank r's parent is r minus its lowest set bit; its children are r + 2^k for every 2^k below
that bit (all powers of two below n for rank 0); rooted at another rank, the same tree over the
ranks counted from the root ((r - root) mod n). Reduce: receive from each child in increasing
distance, add, send the sum to the parent. Broadcast: the same edges in reverse order.
Latency-optimal in steps, not in bandwidth: the whole buffer crosses every edge (twice for
all-reduce).
"""

from __future__ import annotations

from collections import Counter

from commbench.algorithms.base import SEGMENT_ELEMS, Algorithm, reduce_op, scratch_pair


def binomial_children(rank: int, n: int) -> list[int]:
    low = rank & -rank if rank else 1 << max(n - 1, 1).bit_length()
    return [rank + d for d in (1 << k for k in range(low.bit_length() - 1)) if rank + d < n]


def binomial_parent(rank: int) -> int | None:
    return rank - (rank & -rank) if rank else None


class Tree(Algorithm):
    name = "tree"
    description = "binomial tree: reduce to rank 0, then broadcast"

    def cost(self, p, shape, collective, size_bytes, segment_bytes):
        """n ranks, N bytes, levels = the pairs at distance d = 1, 2, 4 .. < n:
          all-reduce      Σ_levels 2·(α + N·β·L_level) + ⌈log2 n⌉·N·γ     (up the binomial tree, then down)
          reduce          Σ_levels (α + N·β·L_level) + ⌈log2 n⌉·N·γ        (up it, to the root)
          broadcast       Σ_levels (α + N·β·L_level)                        (down it, from the root)
        every non-root rank sends N bytes up once; interior ranks send N bytes down to each child
        (the tree from rank 0)."""
        node_of, n, N = shape.node_of(), shape.n, size_bytes
        ways = 2 if collective == "all_reduce" else 1
        total, d = 0.0, 1
        while d < n:  # level d: ranks r = d mod 2d send to r - d (and receive back on the way down)
            pairs = [(r, r - d) for r in range(d, n, 2 * d)]
            total += ways * shape.step_time(p, pairs, node_of, N)
            if collective != "broadcast":
                total += N * p.gamma * shape.reduce_load([q for _, q in pairs])
            d *= 2
        return total

    def messages(self, collective, elems, node_of_rank, segment_elems=SEGMENT_ELEMS, root: int = 0):
        sent, n = Counter(), len(node_of_rank)
        for v in range(1, n):  # the whole buffer up each edge (all-reduce, reduce), down it (all-reduce, broadcast)
            child, parent = (v + root) % n, (binomial_parent(v) + root) % n
            if collective != "broadcast":
                sent[(child, parent)] += elems
            if collective != "reduce":
                sent[(parent, child)] += elems
        return sent

    def broadcast(self, ctx, buf, root):
        comm = ctx.comm
        n, v = comm.size, (comm.rank - root) % comm.size
        parent, children = binomial_parent(v), binomial_children(v, n)
        if parent is not None:
            comm.recv(buf, (parent + root) % n, tag=2)
        comm.exchange([(buf, (c + root) % n, 2) for c in reversed(children)], []).wait()  # farthest first

    def reduce(self, ctx, buf, op, root):
        comm, red = ctx.comm, ctx.comm.reducer
        n, v = comm.size, (comm.rank - root) % comm.size
        parent, children = binomial_parent(v), binomial_children(v, n)
        tmp = comm.view(scratch_pair(ctx, "tree", len(buf), buf)[0], 0, len(buf))
        for child in children:  # nearest first: the deeper subtrees take longest
            comm.recv(tmp, (child + root) % n, tag=1)
            red.reduce(buf, tmp, reduce_op(op))
        if parent is not None:
            comm.send(buf, (parent + root) % n, tag=1)
        else:
            red.finish(buf, op, n)

    def all_reduce(self, ctx, buf, op):
        comm, red = ctx.comm, ctx.comm.reducer
        rank, n = comm.rank, comm.size
        children, parent = binomial_children(rank, n), binomial_parent(rank)
        tmp = scratch_pair(ctx, "tree", len(buf), buf)[0]
        tmp = comm.view(tmp, 0, len(buf))
        for child in children:  # nearest first: the deeper subtrees take longest
            comm.recv(tmp, child, tag=1)
            red.reduce(buf, tmp, reduce_op(op))
        if parent is not None:
            comm.send(buf, parent, tag=1)
            comm.recv(buf, parent, tag=2)
        else:
            red.finish(buf, op, n)
        comm.exchange([(buf, child, 2) for child in reversed(children)], []).wait()  # farthest first
