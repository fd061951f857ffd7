from commbench.collectives.base import Collective, NativeCall, WholeBuffer
from commbench.collectives.patterns import tile


class Broadcast(WholeBuffer, Collective):
    """The root's buffer ends on every rank. size = the buffer; busbw = algbw (nccl-tests)."""

    name = "broadcast"
    reduces, rooted = False, True
    native = {"mpi": NativeCall("Bcast", "bcast"), "torch": NativeCall("broadcast", "tensor_root")}
    nccl_function = "Broadcast"
    nccl_tests_name = "broadcast"
    osu_title, osu_binary = "Broadcast", "osu_bcast"
    description = "the root's buffer to every rank; size: the buffer; busbw = algbw"

    def expected(self, pattern, rank, counts, start, length):
        return tile(pattern.values(counts.root), start, length)

    def bind_algorithm(self, algorithm, ctx, send, recv, op, in_place, in_count, out_count):
        """algorithm.broadcast(ctx, buf, root): the root's buf ends on every rank (out of place, the
        root first copies its input there, timed)."""
        if in_place or ctx.comm.rank != ctx.root:
            return (lambda: algorithm.broadcast(ctx, recv, ctx.root)), recv

        def run():
            ctx.reducer.copy(recv, send)
            algorithm.broadcast(ctx, recv, ctx.root)
        return run, recv
