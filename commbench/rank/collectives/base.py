"""What a collective is, in the nccl-tests sense: buffer sizes, bus-bandwidth factor, and the
exact expected output. One harness (`commbench.rank.harness`) runs every collective through this."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commbench.rank.patterns import Pattern


@dataclass(frozen=True)
class Counts:
    """Elements per rank for one point, and the size it reports (nccl-tests semantics)."""

    in_count: int
    out_count: int
    size_bytes: int

    @property
    def count(self) -> int:
        """The `count` column: elements of the larger per-rank buffer, as nccl-tests prints."""
        return max(self.in_count, self.out_count)


class Collective:
    name: str = ""
    reduces: bool = True  # takes a reduction op

    def bus_factor(self, world: int) -> float:
        """busbw = algbw x this factor (nccl-tests doc/PERFORMANCE.md)."""
        raise NotImplementedError

    def counts(self, size_bytes: int, itemsize: int, world: int) -> Counts:
        """Per-rank element counts for a requested size, rounded down as nccl-tests does."""
        raise NotImplementedError

    def expected(self, pattern: Pattern, rank: int, counts: Counts, start: int, length: int) -> np.ndarray:
        """Rank `rank`'s correct output, elements start .. start+length-1, as float64."""
        raise NotImplementedError

    def in_place_offset(self, rank: int, counts: Counts) -> int:
        """In-place: where the rank's input lies inside its output buffer (all-gather), or its
        output inside its input buffer (reduce-scatter), in elements, as nccl-tests lays it out."""
        return 0
