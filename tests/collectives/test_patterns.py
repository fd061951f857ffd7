"""The data patterns must give results that are exact in every summation order, for every
dtype, op and world size: checked by reducing in the real dtype, in several orders."""

import numpy as np
import pytest

from commbench.dtypes import DTYPES
from commbench.collectives.patterns import PERIOD, Pattern, tile

WORLDS = [1, 2, 3, 5, 8, 64, 300, 1100]


def _reduce_in_dtype(values, op, dtype, order):
    """Reduce rank values one at a time in `order`, in the dtype itself (bf16 via torch)."""
    if dtype.numpy_name is None:
        import torch

        conv = lambda v: torch.from_numpy(v).to(torch.bfloat16)  # noqa: E731
        back = lambda t: t.to(torch.float64).numpy()  # noqa: E731
        fns = {"sum": torch.add, "avg": torch.add, "prod": torch.mul, "min": torch.minimum, "max": torch.maximum}
    else:
        conv = lambda v: v.astype(dtype.numpy_name)  # noqa: E731
        back = lambda a: a.astype(np.float64)  # noqa: E731
        fns = {"sum": np.add, "avg": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}
    acc = conv(values[order[0]])
    for r in order[1:]:
        acc = fns[op](acc, conv(values[r]))
    return back(acc)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max"])
@pytest.mark.parametrize("world", WORLDS)
def test_reduction_exact_in_any_order(dtype, op, world):
    dt = DTYPES[dtype]
    p = Pattern(op, dt, world)
    values = [p.values(r) for r in range(world)]
    rng = np.random.default_rng(world)
    for order in (list(range(world)), list(range(world))[::-1], list(rng.permutation(world))):
        got = _reduce_in_dtype(values, op, dt, order)
        assert np.array_equal(got, p.reduced), (dtype, op, world)


@pytest.mark.parametrize("world", [2, 3, 8])
def test_patterns_are_not_trivial(world):
    """Different ranks hold different data, and results vary along the buffer."""
    for op in ("sum", "prod", "min", "max", None):
        p = Pattern(op, DTYPES["float32"], world)
        assert not np.array_equal(p.values(0), p.values(1)), op
        assert len(np.unique(p.values(0))) > 1, op
        if op:
            assert len(np.unique(p.reduced)) > 1, op


def test_sentinel_never_an_answer():
    for dt in DTYPES.values():
        for op in ("sum", "prod", "min", "max", None):
            for world in (1, 2, 7, 300):
                p = Pattern(op, dt, world)
                assert dt.sentinel not in p.values(0)
                if op:
                    assert dt.sentinel not in p.reduced


def test_avg_tolerance_covers_rounding_only():
    p = Pattern("avg", DTYPES["bfloat16"], 3)
    exp = p.reduced
    assert np.all(p.tolerance(exp) < 0.2 * np.maximum(exp, 1))


def test_tile_is_periodic():
    v = np.arange(PERIOD, dtype=float)
    assert np.array_equal(tile(v, PERIOD - 2, 4), [PERIOD - 2, PERIOD - 1, 0, 1])
