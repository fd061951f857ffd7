"""Input data whose every reduction has a known, exactly representable answer.

Rank r's input at element i is `values(r)[i % PERIOD]`: small integers (or ±1, ±2 for prod)
drawn from a fixed hash of (r, i), bounded so that every partial result, in any order, stays
within what the dtype represents exactly (`DType.exact_limit`). Results can therefore be
compared bit for bit, for every dtype and op, as nccl-tests does; `avg` alone divides by the
world size and is checked to within the rounding of that division.

PERIOD is a prime, so a chunk shifted by any amount that is not a multiple of it is caught,
and expected outputs cost O(world x PERIOD) to build whatever the buffer size.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from commbench.dtypes import DType

PERIOD = 1021
_SPREAD = 100  # value range for min, max and gathered data


def _hash(rank: int) -> np.ndarray:
    j = np.arange(1, PERIOD + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = j * np.uint64(0x9E3779B97F4A7C15) ^ np.uint64((rank + 1) * 0x85EBCA77C2B2AE63 % 2**64)
        h ^= h >> np.uint64(29)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(32)
    return h


class Pattern:
    """The inputs of every rank and their reduction, for one (op, dtype, world size)."""

    def __init__(self, op: str | None, dtype: DType, world: int):
        self.op, self.dtype, self.world = op, dtype, world

    def values(self, rank: int) -> np.ndarray:
        """Rank `rank`'s input over one period, as float64 (exact for every dtype)."""
        h = _hash(rank)
        j = np.arange(PERIOD)
        op, n, limit = self.op, self.world, self.dtype.exact_limit
        if op in ("sum", "avg"):
            m = min(16, limit // n + 1)  # (m - 1) * n <= limit: every partial sum is exact
            if m >= 2:
                return (h % np.uint64(m)).astype(np.float64)
            return ((j + rank) % n == 0).astype(np.float64)  # one rank contributes 1 per element
        if op == "prod":
            v = np.where(j % (n + 1) == rank, 2.0, 1.0)  # at most one factor 2 per element
            if self.dtype.signed:
                v = np.where(h & np.uint64(1), -v, v)
            return v
        # min, max, and data that is only moved (all-gather)
        return (h % np.uint64(min(_SPREAD, limit))).astype(np.float64)

    @cached_property
    def reduced(self) -> np.ndarray:
        """The exact reduction over all ranks, one period, float64."""
        stack = np.stack([self.values(r) for r in range(self.world)])
        if self.op == "sum":
            return stack.sum(axis=0)
        if self.op == "avg":
            return stack.sum(axis=0) / self.world
        if self.op == "prod":
            return stack.prod(axis=0)
        if self.op == "min":
            return stack.min(axis=0)
        if self.op == "max":
            return stack.max(axis=0)
        raise ValueError(f"pattern for op {self.op!r} has no reduction")

    def tolerance(self, expected: np.ndarray) -> np.ndarray | float:
        """Allowed absolute error: 0 (bit-exact) except for avg, whose division rounds."""
        if self.op != "avg":
            return 0.0
        eps = 2.0 ** -self.dtype.mantissa_bits if self.dtype.is_float else 1.0
        return (self.world + 2) * eps * np.maximum(np.abs(expected), 1.0)


def tile(period_values: np.ndarray, start: int, length: int) -> np.ndarray:
    """Elements start .. start+length-1 of the periodic sequence, float64."""
    return period_values[(np.arange(start, start + length) % PERIOD)]
