"""Pairwise-exchange all-to-all: n-1 steps; at step k every rank sends its block for rank r+k and
receives rank r-k's block for it, so each step is a permutation of the ranks, every link used once
(MPI's default for large all-to-all messages; NCCL's all-to-all issues every pair at once).

  all-to-all   Σ_{k=1..n-1} (α + N/n·β·L_k)       N = one rank's whole input, L_k: step k's busiest link
"""

from __future__ import annotations

from collections import Counter

from commbench.algorithms.base import SEGMENT_ELEMS, Algorithm


class Pairwise(Algorithm):
    name = "pairwise"
    description = "all-to-all (even and uneven) by pairwise exchange: n-1 steps, rank r+k's block out, rank r-k's in"
    reads_source = True  # reads its input from send and writes recv: out of place without a copy

    def cost(self, p, shape, collective, size_bytes, segment_bytes):
        """n ranks, N bytes (one rank's whole input: n blocks of N/n):
          all-to-all      Σ_{k=1..n-1} (α + N/n·β·L_k)      L_k: the load of step k's busiest link
        (Thakur, Rabenseifner & Gropp 2005's pairwise exchange)."""
        node_of, n, N = shape.node_of(), shape.n, size_bytes
        return sum(shape.step_time(p, [(r, (r + k) % n) for r in range(n)], node_of, N / n) for k in range(1, n))

    def messages(self, collective, elems, node_of_rank, segment_elems=SEGMENT_ELEMS, peers=None):
        """peers: the uneven all-to-all's elements [r][q] (else n even blocks of elems)."""
        n, sent = len(node_of_rank), Counter()
        for r in range(n):
            for q in range(n):
                if q != r and (peers is None or peers[r][q]):
                    sent[(r, q)] += elems // n if peers is None else peers[r][q]
        return sent

    def all_to_all(self, ctx, recv, block, src):
        """src: this rank's n blocks of `block` elements; recv: the n blocks received (src not recv)."""
        comm, red = ctx.comm, ctx.comm.reducer
        r, n = comm.rank, comm.size
        red.copy(comm.view(recv, r * block, block), comm.view(src, r * block, block))  # its own block stays
        for k in range(1, n):
            to, frm = (r + k) % n, (r - k) % n
            comm.exchange([(comm.view(src, to * block, block), to, 3)],
                          [(comm.view(recv, frm * block, block), frm, 3)]).wait()

    def all_to_allv(self, ctx, recv, src, blocks):
        """The uneven all-to-all in the same n-1 steps: blocks, this rank's (send counts, send displacements,
        receive counts, receive displacements) in elements (collectives.all_to_allv.layout), packed in rank
        order in src and recv; an empty block is not sent."""
        comm, red = ctx.comm, ctx.comm.reducer
        r, n = comm.rank, comm.size
        sent, sent_at, got, got_at = blocks
        if got[r]:
            red.copy(comm.view(recv, got_at[r], got[r]), comm.view(src, sent_at[r], sent[r]))
        for k in range(1, n):
            to, frm = (r + k) % n, (r - k) % n
            out = [(comm.view(src, sent_at[to], sent[to]), to, 3)] if sent[to] else []
            into = [(comm.view(recv, got_at[frm], got[frm]), frm, 3)] if got[frm] else []
            if out or into:
                comm.exchange(out, into).wait()
