"""Double binary tree all-reduce, as NCCL runs it across nodes: two binary trees, each carrying
half of the data, in which (almost) every rank that is an inner node of one tree is a leaf of
the other, so both halves use every rank's links and no rank forwards much more than N bytes.

Tree A is the in-order binary tree over ranks 0..n-1: rank 0 is the root with one child (the
largest power of two below n); a rank r > 0 whose lowest set bit is 2^h has children r - 2^(h-1)
and the largest r + 2^j (j < h) below n, so odd ranks are leaves. Tree B is tree A shifted by
one rank (rank r stands where r - 1 stands in A), which turns A's leaves into B's inner nodes.
Each half is pipelined in segments: reduce up the tree, then broadcast down. Each rank sends
≈ N bytes up and ≤ N bytes down in total (as an inner node of one tree): for large N bandwidth
close to ring's, without ring's 2(n-1) latency steps.
"""

from __future__ import annotations

import math
from collections import Counter

from commbench.algorithms.base import SEGMENT_ELEMS, Algorithm, reduce_op, scratch_pair, segments, wait_all
from commbench.trees import double_tree


class DoubleBinaryTree(Algorithm):
    name = "dbtree"
    description = "NCCL's double binary tree: two complementary trees, pipelined in segments"

    def cost(self, p, shape, collective, size_bytes, segment_bytes):
        """n ranks, N bytes, depth d = ⌈log2 n⌉, k = ⌈N/2 / segment⌉ segments per half (tree):
          all-reduce      2(d+k-1)·(α + N/2k·β·L) + N·γ
        every step a rank sends one segment up (then down) each tree, both trees at once."""
        node_of, n, N = shape.node_of(), shape.n, size_bytes
        depth = math.ceil(math.log2(n))
        k = max(1, math.ceil(N / 2 / segment_bytes))
        edges = [(r, parent[r]) for parent, _ in double_tree(n) for r in range(n) if parent[r] is not None]
        step = shape.step_time(p, edges, node_of, N / (2 * k))  # both trees' segments at once
        return 2 * (depth + k - 1) * step + N * p.gamma * shape.reduce_load(range(n))

    def messages(self, collective, elems, node_of_rank, segment_elems=SEGMENT_ELEMS):
        sent, halves = Counter(), (elems // 2, elems - elems // 2)
        for half, (parent, _) in zip(halves, double_tree(len(node_of_rank))):
            for r, p in enumerate(parent):  # each half up its tree's edges, then down
                if p is not None:
                    sent[(r, p)] += half
                    sent[(p, r)] += half
        return sent

    def all_reduce(self, ctx, buf, op):
        comm, red = ctx.comm, ctx.comm.reducer
        rank, n = comm.rank, comm.size
        if "dbtree" not in ctx.cache:
            ctx.cache["dbtree"] = double_tree(n)
        trees = ctx.cache["dbtree"]
        half = len(buf) // 2
        halves = [comm.view(buf, 0, half), comm.view(buf, half, len(buf) - half)]
        segs = [segments(comm, [h], ctx.segment_elems) for h in halves]
        tmp = scratch_pair(ctx, "dbtree", max((len(s[0]) for s in segs if s), default=1), buf)[0]
        sends = []
        for k in range(max(len(s) for s in segs)):  # up: reduce segment k of both trees
            for t, (parent, children) in enumerate(trees):
                if k < len(segs[t]):
                    seg = segs[t][k]
                    scratch = comm.view(tmp, 0, len(seg))
                    for child in children[rank]:
                        comm.recv(scratch, child, tag=2 * t)
                        red.reduce(seg, scratch, reduce_op(op))
                    if parent[rank] is not None:
                        sends.append(comm.exchange([(seg, parent[rank], 2 * t)], []))
        wait_all(sends)
        for t, (parent, _) in enumerate(trees):
            if parent[rank] is None:
                red.finish(halves[t], op, n)
        for k in range(max(len(s) for s in segs)):  # down: broadcast segment k of both trees
            for t, (parent, children) in enumerate(trees):
                if k < len(segs[t]):
                    seg = segs[t][k]
                    if parent[rank] is not None:
                        comm.recv(seg, parent[rank], tag=2 * t + 1)
                    sends.append(comm.exchange([(seg, child, 2 * t + 1) for child in children[rank]], []))
        wait_all(sends)
