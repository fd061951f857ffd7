import numpy as np

from commbench.collectives.all_gather import AllGather
from commbench.collectives.base import NativeCall


class Gather(AllGather):
    """Every rank's buffer ends on the root, in rank order (the others' outputs are undefined and not
    checked). size = the gathered output; busbw = algbw x (n-1)/n (nccl-tests)."""

    name = "gather"
    rooted, default_sweep = True, 0
    native = {"mpi": NativeCall("Gather", "gather"), "torch": NativeCall("gather", "gather_list", in_place=False,
                                                                       no_in_place="takes separate input and output tensors")}
    nccl_function = None
    nccl_tests_name = "gather"
    osu_title, osu_binary = "Gather", "osu_gather"
    description = "every rank's buffer to the root, in rank order; size: the gathered output; busbw = algbw x (n-1)/n"

    def expected(self, pattern, rank, counts, start, length):
        if rank != counts.root:
            return np.full(length, np.nan)
        return super().expected(pattern, rank, counts, start, length)

    def bind_algorithm(self, algorithm, ctx, send, recv, op, in_place, in_count, out_count):
        raise ValueError(f"commbench's own algorithms do not run {self.name}")
