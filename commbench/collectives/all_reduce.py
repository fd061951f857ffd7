from commbench.collectives.base import Collective, Counts, NativeCall
from commbench.collectives.patterns import tile


class AllReduce(Collective):
    """Every rank ends with the reduction of all ranks' buffers. size = one rank's buffer."""

    name = "all_reduce"
    native = {"mpi": NativeCall("Allreduce", "send_recv_op"), "torch": NativeCall("all_reduce", "tensor_op")}
    nccl_function = "AllReduce"
    nccl_tests_name = "all_reduce"
    osu_title = "Allreduce"
    description = "every rank's buffer reduced onto every rank; size: the buffer; busbw = algbw x 2(n-1)/n"
    default_sweep = 1

    def bus_factor(self, world):
        return 2 * (world - 1) / world

    def counts(self, size_bytes, itemsize, world):
        n = size_bytes // itemsize
        return Counts(n, n, n * itemsize)

    def expected(self, pattern, rank, counts, start, length):
        return tile(pattern.reduced, start, length)

    def bind_algorithm(self, algorithm, ctx, send, recv, op, in_place, in_count, out_count):
        """algorithm.all_reduce(ctx, buf, op[, src]): buf is the input and ends as the reduction
        (src=: the input is read from there instead, when the algorithm reads_source)."""
        if in_place:
            return (lambda: algorithm.all_reduce(ctx, recv, op)), recv
        if algorithm.reads_source:
            return (lambda: algorithm.all_reduce(ctx, recv, op, src=send)), recv

        def run():
            ctx.reducer.copy(recv, send)
            algorithm.all_reduce(ctx, recv, op)
        return run, recv
