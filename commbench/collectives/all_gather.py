import numpy as np

from commbench.collectives.base import Collective, Counts, NativeCall
from commbench.collectives.patterns import tile


class AllGather(Collective):
    """Every rank ends with all ranks' buffers, in rank order. size = the gathered output."""

    name = "all_gather"
    reduces = False
    native = {"mpi": NativeCall("Allgather", "send_recv"),
              "torch": NativeCall(("all_gather_single", "all_gather_into_tensor"), "output_input")}
    nccl_function = "AllGather"
    nccl_tests_name = "all_gather"
    osu_title, osu_size_is_block = "Allgather", True
    description = "every rank's buffer to every rank, in rank order; size: the gathered output; busbw = algbw x (n-1)/n"
    default_sweep = 2

    def bus_factor(self, world):
        return (world - 1) / world

    def counts(self, size_bytes, itemsize, world):
        per_rank = size_bytes // itemsize // world
        return Counts(per_rank, per_rank * world, per_rank * world * itemsize)

    def expected(self, pattern, rank, counts, start, length):
        idx = np.arange(start, start + length)
        out = np.empty(length)
        block = idx // counts.in_count
        for src in np.unique(block):
            sel = block == src
            out[sel] = tile(pattern.values(int(src)), int(idx[sel][0] % counts.in_count), int(sel.sum()))
        return out

    def in_place_offset(self, rank, counts):
        return rank * counts.in_count

    def bind_algorithm(self, algorithm, ctx, send, recv, op, in_place, in_count, out_count):
        """algorithm.all_gather(ctx, buf, block): buf holds the rank's own block at rank*block
        and ends gathered."""
        if in_place:
            return (lambda: algorithm.all_gather(ctx, recv, in_count)), recv
        own = ctx.comm.view(recv, ctx.comm.rank * in_count, in_count)

        def run():
            ctx.reducer.copy(own, send)
            algorithm.all_gather(ctx, recv, in_count)
        return run, recv
