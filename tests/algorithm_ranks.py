"""commbench's own algorithms with threads as ranks, for the unit tests of ring, rhd, tree and
dbtree (tests/algorithms/test_ring.py & co.): tests/nccl_semantics.py's World, whose
communicators also count what every rank sends to every other (elements and messages), so that
an algorithm's messages() can be set against what its ranks really sent; inputs whose every
reduction numpy computes exactly in any order; and the reference answers, computed in numpy."""

from __future__ import annotations

from collections import Counter

import numpy as np
from nccl_semantics import NcclSemanticsComm, World

from commbench.algorithms import Context

UFUNCS = {"sum": np.add, "avg": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}


class CountingComm(NcclSemanticsComm):
    """Counts every send it issues, alone or in a group: world.sent[(src, dst)] elements,
    world.messages[(src, dst)] calls."""

    def _op(self, kind, buf, peer, group):
        op = super()._op(kind, buf, peer, group)  # (called under the world's lock)
        if kind == "send":
            self.world.sent[(self.rank, peer)] += len(buf)
            self.world.messages[(self.rank, peer)] += 1
        return op


class CountingWorld(World):
    def __init__(self, size: int):
        super().__init__(size)
        self.sent: Counter = Counter()
        self.messages: Counter = Counter()

    def comm(self, rank):
        return CountingComm(self, ("world",), rank, self.size)


def inputs(n: int, count: int, op: str, dtype: str = "int64", seed: int = 0) -> list[np.ndarray]:
    """Every rank's input, for which the reduction is exact in any order and any dtype used here:
    small integers for sum and avg, factors of magnitude at most 2 for prod, a spread for min/max."""
    rng = np.random.default_rng([seed, n, count])
    if op in ("sum", "avg"):
        vals = [rng.integers(-8, 9, count) for _ in range(n)]
    elif op == "prod":
        vals = [rng.choice([-1, 1, 1, 2], count) for _ in range(n)]
    else:
        vals = [rng.integers(-100, 101, count) for _ in range(n)]
    return [v.astype(dtype) for v in vals]


def reduced(values: list[np.ndarray], op: str) -> np.ndarray:
    """The element-wise reduction of the ranks' values; avg: the exact sum divided once by n."""
    total = UFUNCS[op].reduce(np.stack(values), axis=0, dtype=values[0].dtype)  # (no promotion of int32)
    return total / len(values) if op == "avg" else total


def expected(collective: str, values: list[np.ndarray], op: str | None, rank: int, block: int) -> np.ndarray:
    """Rank `rank`'s answer: the reduction (all-reduce), the concatenation (all-gather), block
    `rank` of the reduction (reduce-scatter)."""
    if collective == "all_gather":
        return np.concatenate(values)
    total = reduced(values, op)
    return total if collective == "all_reduce" else total[rank * block:(rank + 1) * block]


def run(algorithm, collective: str, n: int, count: int, op: str | None = "sum", dtype: str = "int64",
        nodes: list[int] | None = None, segment_elems: int = 1 << 18, src: bool = False, repeat: int = 1,
        values: list[np.ndarray] | None = None):
    """One call of the algorithm's in-place method on every rank (count: the all-reduce buffer, or
    one rank's block for all-gather and reduce-scatter), `repeat` times back to back, with fresh
    inputs each time. src: the input is passed as src= (reads_source) and the buffer starts as
    garbage. Returns (values, each rank's outputs of every repeat, inputs after the calls, world)."""
    nodes = nodes if nodes is not None else [0] * n
    size = count * (n if collective != "all_reduce" else 1)
    if values is None:
        values = inputs(n, count, "max", dtype) if collective == "all_gather" else inputs(n, size, op, dtype)

    def rank(comm):
        r = comm.rank
        ctx = Context(comm, nodes, segment_elems=segment_elems)
        outputs, sources = [], []
        for _ in range(repeat):
            buf = np.full(size, -77, dtype=values[r].dtype)
            source = values[r].copy()
            if collective == "all_gather":
                buf[r * count:(r + 1) * count] = source
                algorithm.all_gather(ctx, buf, count)
            else:
                if not src:
                    buf[...] = source
                kw = {"src": source} if src else {}
                if collective == "all_reduce":
                    algorithm.all_reduce(ctx, buf, op, **kw)
                else:
                    algorithm.reduce_scatter(ctx, buf, op, count, **kw)
                    buf = buf[r * count:(r + 1) * count]
            outputs.append(buf.copy())
            sources.append(source)
        return outputs, sources

    world = CountingWorld(n)
    results = world.run(rank)
    return values, [o for o, _ in results], [s for _, s in results], world


def assert_exact(collective, values, outputs, op, block) -> None:
    """Every rank's every output equals the reference bit for bit (dtype included)."""
    for r, outs in enumerate(outputs):
        want = expected(collective, values, op, r, block)
        for got in outs:
            assert got.dtype == want.dtype, (r, got.dtype, want.dtype)
            assert got.tobytes() == want.tobytes(), f"rank {r}: {got.tolist()} != {want.tolist()}"


def uneven_counts(n: int) -> list[int]:
    """All-reduce counts that do not divide by n (where n > 1), one shorter than n, and one."""
    return sorted({1, max(n - 1, 1), 2 * n + 1, 37})
