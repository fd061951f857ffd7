import numpy as np

from commbench.collectives.base import Collective, Counts, NativeCall
from commbench.collectives.patterns import tile


class AllToAll(Collective):
    """Block q of rank r's input ends as block r of rank q's output (n blocks of size/n each way).
    size = one rank's whole input; busbw = algbw x (n-1)/n (nccl-tests)."""

    name = "all_to_all"
    reduces = False
    native = {"mpi": NativeCall("Alltoall", "send_recv"),
              "torch": NativeCall("all_to_all_single", "output_input", in_place=False,
                                        no_in_place="takes separate input and output tensors")}
    nccl_tests_name = "alltoall"
    osu_title, osu_binary = "All-to-All Personalized Exchange", "osu_alltoall"
    osu_size_is_block = True  # (its message to each rank)
    description = "block q of every rank's input to rank q; size: one rank's input (n blocks); busbw = algbw x (n-1)/n"

    def bus_factor(self, world):
        return (world - 1) / world

    def counts(self, size_bytes, itemsize, world):
        per = size_bytes // itemsize // world
        return Counts(per * world, per * world, per * world * itemsize)

    def expected(self, pattern, rank, counts, start, length):
        per = counts.in_count // pattern.world  # one block
        idx = np.arange(start, start + length)
        out = np.empty(length)
        src = idx // per
        for q in np.unique(src):  # block q came from rank q: its input block `rank`
            sel = src == q
            out[sel] = tile(pattern.values(int(q)), rank * per + int(idx[sel][0] % per), int(sel.sum()))
        return out

    def bind_algorithm(self, algorithm, ctx, send, recv, op, in_place, in_count, out_count):
        """algorithm.all_to_all(ctx, recv, block, src): blocks of src out, blocks into recv; in place
        the input is first copied aside (timed), as the blocks it still has to send get overwritten."""
        block = in_count // ctx.comm.size
        if not in_place:
            return (lambda: algorithm.all_to_all(ctx, recv, block, src=send)), recv
        aside = ctx.comm.alloc_like(recv, in_count)

        def run():
            ctx.reducer.copy(aside, recv)
            algorithm.all_to_all(ctx, recv, block, src=aside)
        return run, recv
