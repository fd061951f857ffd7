from commbench.rank.collectives.base import Collective, Counts
from commbench.rank.patterns import tile


class AllReduce(Collective):
    """Every rank ends with the reduction of all ranks' buffers. size = one rank's buffer."""

    name = "all_reduce"

    def bus_factor(self, world):
        return 2 * (world - 1) / world

    def counts(self, size_bytes, itemsize, world):
        n = size_bytes // itemsize
        return Counts(n, n, n * itemsize)

    def expected(self, pattern, rank, counts, start, length):
        return tile(pattern.reduced, start, length)
