import numpy as np

from commbench.rank.collectives.base import Collective, Counts
from commbench.rank.patterns import tile


class AllGather(Collective):
    """Every rank ends with all ranks' buffers, in rank order. size = the gathered output."""

    name = "all_gather"
    reduces = False

    def bus_factor(self, world):
        return (world - 1) / world

    def counts(self, size_bytes, itemsize, world):
        per_rank = size_bytes // itemsize // world
        return Counts(per_rank, per_rank * world, per_rank * world * itemsize)

    def expected(self, pattern, rank, counts, start, length):
        idx = np.arange(start, start + length)
        out = np.empty(length)
        block = idx // counts.in_count
        for src in np.unique(block):
            sel = block == src
            out[sel] = tile(pattern.values(int(src)), int(idx[sel][0] % counts.in_count), int(sel.sum()))
        return out

    def in_place_offset(self, rank, counts):
        return rank * counts.in_count
