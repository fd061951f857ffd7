"""Pipelined chain broadcast and reduce: the ranks in a line from the root (rank order, wrapping),
the buffer cut in segments of --segment-bytes that flow down the line one behind another.

Broadcast: the root sends segment k to the next rank while that rank sends segment k-1 on: after
n-1 steps of latency every link carries one segment per step, so the time tends to one buffer's
transfer, whatever n (MPI's and NCCL's large-message broadcast). Reduce: the same line towards
the root, each rank adding its own segment to what arrives before passing it on.

  broadcast   (n-1 + S-1)·(α + N/S·β·L)                  S = ⌈N / segment⌉ segments
  reduce      (n-1 + S-1)·(α + N/S·β·L) + N·γ            each rank adds every segment once
"""

from __future__ import annotations

import math
from collections import Counter

from commbench.algorithms.base import SEGMENT_ELEMS, Algorithm, reduce_op, scratch_pair, segments


def line(rank: int, root: int, n: int) -> tuple[int | None, int | None]:
    """(the rank before this one in the line from the root, the one after it); None at the ends."""
    k = (rank - root) % n
    return (None if k == 0 else (rank - 1) % n), (None if k == n - 1 else (rank + 1) % n)


class Chain(Algorithm):
    name = "chain"
    description = "pipelined chain from the root: broadcast and reduce in segments"

    def cost(self, p, shape, collective, size_bytes, segment_bytes):
        """n ranks, N bytes, S = ⌈N / segment⌉, L the load of a step's busiest link:
          broadcast       (n-1 + S-1)·(α + N/S·β·L)
          reduce          (n-1 + S-1)·(α + N/S·β·L) + N·γ
        (the line from rank 0; every link busy once the pipe is full)."""
        node_of, n, N = shape.node_of(), shape.n, size_bytes
        s = max(1, math.ceil(N / max(segment_bytes, 1)))
        step = shape.step_time(p, [(r, r + 1) for r in range(n - 1)], node_of, N / s)
        return (n - 1 + s - 1) * step + (collective == "reduce") * N * p.gamma * shape.reduce_load(range(n))

    def messages(self, collective, elems, node_of_rank, segment_elems=SEGMENT_ELEMS, root: int = 0):
        n, sent = len(node_of_rank), Counter()
        for k in range(n - 1):  # the whole buffer along each link of the line, down or up
            a, b = (root + k) % n, (root + k + 1) % n
            sent[(a, b) if collective == "broadcast" else (b, a)] += elems
        return sent

    def broadcast(self, ctx, buf, root):
        comm = ctx.comm
        before, after = line(comm.rank, root, comm.size)
        segs = segments(comm, [buf], ctx.segment_elems)
        pending = []
        for k, seg in enumerate(segs):  # receive segment k (the root has it), then pass it on
            if before is not None:
                comm.recv(seg, before, tag=k % 4096)
            if after is not None:
                pending.append(comm.exchange([(seg, after, k % 4096)], []))
        for req in pending:
            req.wait()

    def reduce(self, ctx, buf, op, root):
        comm, red = ctx.comm, ctx.comm.reducer
        before, after = line(comm.rank, root, comm.size)  # data flows from `after` towards the root
        segs = segments(comm, [buf], ctx.segment_elems)
        tmp = scratch_pair(ctx, "chain", max((len(s) for s in segs), default=1), buf)  # (segments() may cut longer)
        pending = []
        for k, seg in enumerate(segs):
            if after is not None:  # the partial sum of the ranks beyond this one
                got = comm.view(tmp[k % 2], 0, len(seg))
                comm.recv(got, after, tag=k % 4096)
                red.reduce(seg, got, reduce_op(op))
            if before is not None:  # (a segment of buf itself: the scratch is free once added)
                pending.append(comm.exchange([(seg, before, k % 4096)], []))
        for req in pending:
            req.wait()
        if before is None:
            red.finish(buf, op, comm.size)
