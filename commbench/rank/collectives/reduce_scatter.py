from commbench.rank.collectives.base import Collective, Counts
from commbench.rank.patterns import tile


class ReduceScatter(Collective):
    """Rank r ends with block r of the reduction of all ranks' buffers. size = one rank's input."""

    name = "reduce_scatter"

    def bus_factor(self, world):
        return (world - 1) / world

    def counts(self, size_bytes, itemsize, world):
        per_rank = size_bytes // itemsize // world
        return Counts(per_rank * world, per_rank, per_rank * world * itemsize)

    def expected(self, pattern, rank, counts, start, length):
        return tile(pattern.reduced, rank * counts.out_count + start, length)

    def in_place_offset(self, rank, counts):
        return rank * counts.out_count
