from commbench.collectives.base import Collective, NativeCall, SplitInput
from commbench.collectives.patterns import tile


class Scatter(SplitInput, Collective):
    """Block r of the root's input ends on rank r. size = the root's whole input (n blocks); busbw =
    algbw x (n-1)/n (nccl-tests)."""

    name = "scatter"
    reduces, rooted = False, True
    native = {"mpi": NativeCall("Scatter", "scatter"), "torch": NativeCall("scatter", "scatter_list", in_place=False,
                                                                          no_in_place="takes separate input and output tensors")}
    nccl_tests_name = "scatter"
    osu_title, osu_binary = "Scatter", "osu_scatter"
    osu_size_is_block = True  # (each rank's share)
    description = "block r of the root's input to rank r; size: the root's input (n blocks); busbw = algbw x (n-1)/n"

    def expected(self, pattern, rank, counts, start, length):
        return tile(pattern.values(counts.root), rank * counts.out_count + start, length)

    def in_place_offset(self, rank, counts):
        return rank * counts.out_count

    def message_elems(self, counts):
        return counts.out_count
