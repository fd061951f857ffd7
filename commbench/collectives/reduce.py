import numpy as np

from commbench.collectives.base import Collective, NativeCall, WholeBuffer
from commbench.collectives.patterns import tile


class Reduce(WholeBuffer, Collective):
    """The reduction of every rank's buffer ends on the root (the others' outputs are undefined and
    not checked). size = the buffer; busbw = algbw (nccl-tests)."""

    name = "reduce"
    rooted = True
    native = {"mpi": NativeCall("Reduce", "reduce_op"), "torch": NativeCall("reduce", "tensor_root_op")}
    nccl_function = "Reduce"
    nccl_tests_name = "reduce"
    osu_title = "Reduce"
    description = "every rank's buffer reduced onto the root; size: the buffer; busbw = algbw"

    def expected(self, pattern, rank, counts, start, length):
        if rank != counts.root:
            return np.full(length, np.nan)
        return tile(pattern.reduced, start, length)

    def bind_algorithm(self, algorithm, ctx, send, recv, op, in_place, in_count, out_count):
        """algorithm.reduce(ctx, buf, op, root): every rank's buf reduced into the root's (the others'
        left as scratch); out of place the input is first copied into the output (timed)."""
        if in_place:
            return (lambda: algorithm.reduce(ctx, recv, op, ctx.root)), recv

        def run():
            ctx.reducer.copy(recv, send)
            algorithm.reduce(ctx, recv, op, ctx.root)
        return run, recv
