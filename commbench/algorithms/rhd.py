"""Recursive halving and doubling (Rabenseifner; Thakur, Rabenseifner & Gropp 2005).

With p the largest power of two <= n and m = n - p: ranks 0..2m-1 first fold pairwise (each even
rank hands its data to the odd rank above it and sits out), leaving p active ranks, virtual
rank v. Active rank v owns a contiguous range of the data, seg[v]..seg[v+1].

* reduce-scatter by recursive halving: log2 p steps; at distance d = p/2 .. 1 rank v exchanges
  with v XOR d the half of its current range that the partner keeps, and adds what it receives.
* all-gather by recursive doubling: log2 p steps; at distance d = 1 .. p/2 rank v exchanges its
  aligned group of d ranges with v XOR d.
* all-reduce (Rabenseifner): halving then doubling over p equal parts of the buffer.
Folded ranks get their share back at the end, so any world size works.
"""

from __future__ import annotations

from collections import Counter

from commbench.algorithms.base import SEGMENT_ELEMS, Algorithm, bounds, reduce_op, scratch_pair


class Fold:
    """Pairing of ranks 0..2m-1 so that a power of two stays active."""

    def __init__(self, rank: int, n: int):
        self.p = 1 << (n.bit_length() - 1)
        self.m = n - self.p
        self.rank = rank
        folded = rank < 2 * self.m
        self.active = not folded or rank % 2 == 1
        self.partner = (rank + 1 if rank % 2 == 0 else rank - 1) if folded else None  # fold partner
        self.v = (rank // 2 if folded else rank - self.m) if self.active else None

    def real(self, v: int) -> int:
        return 2 * v + 1 if v < self.m else v + self.m

    def first_block(self, v: int) -> int:
        """First per-rank block owned by virtual rank v (folded pairs own two)."""
        return 2 * v if v < self.m else v + self.m


def _view(comm, buf, lo, hi):
    return comm.view(buf, lo, hi - lo)


def halving(comm, fold: Fold, buf, seg: list[int], op: str, tmp) -> None:
    """Active ranks only: afterwards virtual rank v holds seg[v]..seg[v+1] reduced."""
    v, lo, d = fold.v, 0, fold.p // 2
    while d >= 1:
        partner = fold.real(v ^ d)
        if v < lo + d:
            keep, give = (lo, lo + d), (lo + d, lo + 2 * d)
        else:
            keep, give = (lo + d, lo + 2 * d), (lo, lo + d)
        mine = _view(comm, buf, seg[keep[0]], seg[keep[1]])
        scratch = comm.view(tmp, 0, len(mine))
        comm.sendrecv(_view(comm, buf, seg[give[0]], seg[give[1]]), partner, scratch, partner, tag=3)
        comm.reducer.reduce(mine, scratch, op)
        lo, d = keep[0], d // 2


def doubling(comm, fold: Fold, buf, seg: list[int]) -> None:
    """Active ranks only: from seg[v]..seg[v+1] to the whole of seg[0]..seg[p]."""
    v, d = fold.v, 1
    while d < fold.p:
        lo = v // d * d
        plo = lo ^ d
        comm.sendrecv(_view(comm, buf, seg[lo], seg[lo + d]), fold.real(v ^ d),
                      _view(comm, buf, seg[plo], seg[plo + d]), fold.real(v ^ d), tag=4)
        d *= 2


def _fold_in(comm, fold: Fold, buf, op: str, tmp) -> None:
    """Folded pairs: the even rank's data is added into the odd rank's."""
    if fold.partner is None:
        return
    if not fold.active:
        comm.send(buf, fold.partner, tag=5)
    else:
        scratch = comm.view(tmp, 0, len(buf))
        comm.recv(scratch, fold.partner, tag=5)
        comm.reducer.reduce(buf, scratch, op)


def _fold(ctx) -> Fold:
    if "fold" not in ctx.cache:
        ctx.cache["fold"] = Fold(ctx.comm.rank, ctx.comm.size)
    return ctx.cache["fold"]


def exchanges(fold: Fold, seg: list[int], halving_steps: bool, doubling_steps: bool) -> Counter:
    """Elements active ranks send in halving and doubling over the ranges seg (fold: any rank's)."""
    sent = Counter()
    for v in range(fold.p if halving_steps else 0):
        lo, d = 0, fold.p // 2
        while d >= 1:  # v gives away the half of its range the partner keeps
            give = (lo + d, lo + 2 * d) if v < lo + d else (lo, lo + d)
            sent[(fold.real(v), fold.real(v ^ d))] += seg[give[1]] - seg[give[0]]
            lo, d = (lo if v < lo + d else lo + d), d // 2
    for v in range(fold.p if doubling_steps else 0):
        d = 1
        while d < fold.p:  # v sends its aligned group of d ranges
            lo = v // d * d
            sent[(fold.real(v), fold.real(v ^ d))] += seg[lo + d] - seg[lo]
            d *= 2
    return sent


class RecursiveHalvingDoubling(Algorithm):
    name = "rhd"
    description = "recursive halving and doubling (Rabenseifner): log2 n steps each way"

    def cost(self, p, shape, collective, size_bytes, segment_bytes):
        """n ranks, N bytes (the whole buffer), p the largest power of two <= n:
          all-reduce      Σ_halving (α + N·d/p·β·L) + Σ_doubling (same) + (p-1)/p·N·γ
                           + 2·(α + N·β) + N·γ when n is not a power of two (fold, unfold)
          reduce-scatter / all-gather: the halving / the doubling half; the fold and unfold
                           carry N one way and N/n the other
        For p = n, unloaded: all-reduce 2·log2 n·α + 2(n-1)/n·N·β + (n-1)/n·N·γ."""
        node_of, n, N = shape.node_of(), shape.n, size_bytes
        halves, doubles = collective != "all_gather", collective != "reduce_scatter"
        fold = Fold(0, n)
        active = [fold.real(v) for v in range(fold.p)]
        total, d = 0.0, fold.p // 2
        while d >= 1:  # the same partners in halving (d = p/2 .. 1) and doubling (1 .. p/2)
            pairs = [(fold.real(v), fold.real(v ^ d)) for v in range(fold.p)]
            total += (halves + doubles) * shape.step_time(p, pairs, node_of, N * d / fold.p)
            d //= 2
        total += halves * (fold.p - 1) / fold.p * N * p.gamma * shape.reduce_load(active)
        if fold.m:  # fold in (all-gather: one block) and out (reduce-scatter: one block)
            pairs = [(2 * i, 2 * i + 1) for i in range(fold.m)]
            total += shape.step_time(p, pairs, node_of, N if halves else N / n)
            total += shape.step_time(p, pairs, node_of, N if doubles else N / n)
            total += halves * N * p.gamma * shape.reduce_load([q for _, q in pairs])
        return total

    def messages(self, collective, elems, node_of_rank, segment_elems=SEGMENT_ELEMS):
        n = len(node_of_rank)
        fold = Fold(0, n)
        pairs = [(2 * i, 2 * i + 1) for i in range(fold.m)]  # (folded even rank, active odd rank)
        sent = Counter()
        if collective == "all_reduce":
            sent += exchanges(fold, bounds(elems, fold.p), True, True)
            for even, odd in pairs:  # fold in, then the result back
                sent[(even, odd)] += elems
                sent[(odd, even)] += elems
            return sent
        seg = [fold.first_block(v) * elems for v in range(fold.p)] + [n * elems]
        sent += exchanges(fold, seg, collective == "reduce_scatter", collective == "all_gather")
        for even, odd in pairs:
            if collective == "all_gather":  # own block in, the whole gathered buffer back
                sent[(even, odd)] += elems
                sent[(odd, even)] += n * elems
            else:  # the whole input in, the even rank's reduced block back
                sent[(even, odd)] += n * elems
                sent[(odd, even)] += elems
        return sent

    def all_reduce(self, ctx, buf, op):
        comm = ctx.comm
        fold = _fold(ctx)
        tmp = scratch_pair(ctx, "rhd", len(buf), buf)[0]
        _fold_in(comm, fold, buf, reduce_op(op), tmp)
        if fold.active:
            seg = bounds(len(buf), fold.p)
            halving(comm, fold, buf, seg, reduce_op(op), tmp)
            comm.reducer.finish(_view(comm, buf, seg[fold.v], seg[fold.v + 1]), op, comm.size)
            doubling(comm, fold, buf, seg)
        if fold.partner is not None:  # unfold: the odd rank returns the result
            (comm.send if fold.active else comm.recv)(buf, fold.partner, tag=6)

    def all_gather(self, ctx, buf, block):
        comm = ctx.comm
        fold = _fold(ctx)
        if fold.partner is not None:  # the even rank's block joins the odd rank's buffer
            own = comm.view(buf, comm.rank * block, block)
            if fold.active:
                comm.recv(comm.view(buf, fold.partner * block, block), fold.partner, tag=5)
            else:
                comm.send(own, fold.partner, tag=5)
        if fold.active:
            seg = [fold.first_block(v) * block for v in range(fold.p)] + [comm.size * block]
            doubling(comm, fold, buf, seg)
        if fold.partner is not None:
            (comm.send if fold.active else comm.recv)(buf, fold.partner, tag=6)

    def reduce_scatter(self, ctx, buf, op, block):
        comm = ctx.comm
        fold = _fold(ctx)
        tmp = scratch_pair(ctx, "rhd", len(buf), buf)[0]
        _fold_in(comm, fold, buf, reduce_op(op), tmp)
        own = comm.view(buf, comm.rank * block, block)
        if fold.active:
            seg = [fold.first_block(v) * block for v in range(fold.p)] + [comm.size * block]
            halving(comm, fold, buf, seg, reduce_op(op), tmp)
            if fold.partner is not None:  # the pair's range holds the even partner's block too
                comm.send(comm.view(buf, fold.partner * block, block), fold.partner, tag=6)
        elif fold.partner is not None:
            comm.recv(own, fold.partner, tag=6)
        comm.reducer.finish(own, op, comm.size)
