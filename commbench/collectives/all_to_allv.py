import numpy as np

from commbench.collectives.base import Collective, Counts, NativeCall
from commbench.collectives.patterns import tile
from commbench.collectives.peer_traffic import PeerTraffic


def layout(peers: tuple[tuple[int, ...], ...], rank: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """Rank `rank`'s send counts, send displacements, receive counts and receive displacements, in
    elements (MPI_Alltoallv's four arrays): its blocks packed in rank order, out and in."""
    elems = np.asarray(peers, dtype=np.int64)
    send, recv = elems[rank], elems[:, rank]
    return (send.tolist(), (np.cumsum(send) - send).tolist(), recv.tolist(), (np.cumsum(recv) - recv).tolist())


class AllToAllV(Collective):
    """Uneven all-to-all: rank i sends rank j its own number of elements (Counts.peers, from a spread or a
    matrix: commbench.collectives.peer_traffic), blocks packed in rank order out and in. As nccl-tests'
    alltoallv_perf: size = the most bytes a rank sends or receives; busbw = algbw x (n-1)/n; buffers of
    that size on every rank; no in-place form."""

    name = "all_to_allv"
    reduces = False
    in_place_form = False
    takes_traffic = True
    native = {"mpi": NativeCall("Alltoallv", "v", in_place=False, no_in_place="has no in-place form here (nccl-tests' "
                                                                           "alltoallv has none)"),
              "torch": NativeCall("all_to_all_single", "v_output_input", in_place=False,
                                  no_in_place="takes separate input and output tensors")}
    nccl_tests_name = "alltoallv"
    description = ("rank i's block for rank j to rank j, blocks of uneven sizes (--spread, --matrix); size: the most "
                   "a rank sends or receives; busbw = algbw x (n-1)/n")

    def bus_factor(self, world):
        return (world - 1) / world

    def counts(self, size_bytes, itemsize, world):
        return self.counts_for(size_bytes, itemsize, world, None)

    def counts_for(self, size_bytes, itemsize, world, traffic):
        elems = (traffic or PeerTraffic()).peer_bytes(size_bytes, itemsize, world) // itemsize
        send, recv = int(elems.sum(axis=1).max()), int(elems.sum(axis=0).max())
        return Counts(send, recv, max(send, recv) * itemsize, peers=tuple(map(tuple, elems.tolist())))

    def expected(self, pattern, rank, counts, start, length):
        """Rank q's block for this rank, where its receive displacement puts it; past this rank's own
        total (the buffers are as long as the largest rank's), the sentinel: nothing may be written there."""
        _, _, got, at = layout(counts.peers, rank)
        elems = np.asarray(counts.peers, dtype=np.int64)
        out = np.full(length, float(pattern.dtype.sentinel))
        for q in range(pattern.world):
            lo, hi = max(at[q], start), min(at[q] + got[q], start + length)
            if lo < hi:  # elements lo..hi of the output: rank q's input from where its block for `rank` starts
                first = int(elems[q, :rank].sum()) + lo - at[q]
                out[lo - start:hi - start] = tile(pattern.values(q), first, hi - lo)
        return out

    def footprint(self, size_bytes, n, in_place):
        """Its input and output, each as long as the busiest rank's send or receive (its size)."""
        return 2.0 * size_bytes

    def message_elems(self, counts):
        return counts.in_count

    def bind_algorithm(self, algorithm, ctx, send, recv, op, in_place, in_count, out_count):
        """algorithm.all_to_allv(ctx, recv, src, blocks): blocks, this rank's layout() of ctx.peers (made here,
        not in the timed call); out of place only (nccl-tests has no in-place form)."""
        if in_place:
            raise ValueError("all_to_allv has no in-place form")
        blocks = layout(ctx.peers, ctx.comm.rank)
        return (lambda: algorithm.all_to_allv(ctx, recv, send, blocks)), recv
