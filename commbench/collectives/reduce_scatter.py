from commbench.collectives.base import Collective, NativeCall, SplitInput
from commbench.collectives.patterns import tile


class ReduceScatter(SplitInput, Collective):
    """Rank r ends with block r of the reduction of all ranks' buffers. size = one rank's input."""

    name = "reduce_scatter"
    native = {"mpi": NativeCall("Reduce_scatter_block", "send_recv_op"),
              "torch": NativeCall(("reduce_scatter_single", "reduce_scatter_tensor"), "output_input_op")}
    nccl_function = "ReduceScatter"
    nccl_tests_name = "reduce_scatter"
    osu_title = "Reduce_scatter"
    description = "block r of the reduction of every rank's input to rank r; size: one rank's input (n blocks); busbw = algbw x (n-1)/n"
    default_sweep = 3

    def expected(self, pattern, rank, counts, start, length):
        return tile(pattern.reduced, rank * counts.out_count + start, length)

    def in_place_offset(self, rank, counts):
        return rank * counts.out_count

    def message_elems(self, counts):
        return counts.out_count

    def bind_algorithm(self, algorithm, ctx, send, recv, op, in_place, in_count, out_count):
        """algorithm.reduce_scatter(ctx, buf, op, block[, src]): buf is the input and ends with
        the reduced own block at rank*block (src=: as for all_reduce)."""
        if in_place:
            return (lambda: algorithm.reduce_scatter(ctx, send, op, out_count)), recv
        comm, red = ctx.comm, ctx.reducer
        work = comm.alloc_like(send, in_count)
        mine = comm.view(work, comm.rank * out_count, out_count)

        def run():
            if algorithm.reads_source:
                algorithm.reduce_scatter(ctx, work, op, out_count, src=send)
            else:
                red.copy(work, send)
                algorithm.reduce_scatter(ctx, work, op, out_count)
            red.copy(recv, mine)
        return run, recv
