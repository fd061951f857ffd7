import numpy as np

from commbench.rank.collectives.base import Collective, Counts, NativeCall
from commbench.rank.patterns import tile


class Reduce(Collective):
    """The reduction of every rank's buffer ends on the root (the others' outputs are undefined and
    not checked). size = the buffer; busbw = algbw (nccl-tests)."""

    name = "reduce"
    rooted = True
    native = {"mpi": NativeCall("Reduce", "reduce_op"), "torch": NativeCall("reduce", "tensor_root_op")}
    nccl_function = "Reduce"
    nccl_tests_name = "reduce"
    osu_title = "Reduce"
    description = "every rank's buffer reduced onto the root; size: the buffer; busbw = algbw"

    def bus_factor(self, world):
        return 1.0

    def counts(self, size_bytes, itemsize, world):
        n = size_bytes // itemsize
        return Counts(n, n, n * itemsize)

    def expected(self, pattern, rank, counts, start, length):
        if rank != counts.root:
            return np.full(length, np.nan)
        return tile(pattern.reduced, start, length)
