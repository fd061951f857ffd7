"""The element types (commbench/dtypes.py): each one's size and names agree with numpy and torch,
`exact_limit` is the largest integer held exactly together with every smaller one (2**(mantissa
bits + 1) for floats, the type's maximum for integers but uint8's sentinel), and the sentinel is a
value no data pattern produces."""

import numpy as np
import pytest

from commbench.dtypes import DTYPES, OPS, DType
from commbench.collectives.patterns import Pattern

NUMPY = [d for d in DTYPES.values() if d.numpy_name is not None]


def test_the_table_is_keyed_by_name_and_covers_what_is_swept():
    assert list(DTYPES) == ["float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8"]
    assert all(name == d.name for name, d in DTYPES.items())
    assert [d.name for d in DTYPES.values() if d.numpy_name is None] == ["bfloat16"]  # numpy has no bfloat16
    assert OPS == ("sum", "prod", "min", "max", "avg")
    with pytest.raises(AttributeError):  # frozen: a shared table nobody can change by accident
        DTYPES["float32"].itemsize = 8


@pytest.mark.parametrize("d", NUMPY, ids=lambda d: d.name)
def test_numpy_agrees_on_size_kind_and_signedness(d: DType):
    t = np.dtype(d.numpy_name)
    assert t.itemsize == d.itemsize
    assert (t.kind == "f") == d.is_float
    assert (t.kind in "fi") == d.signed
    if d.is_float:
        assert np.finfo(t).nmant == d.mantissa_bits
    else:
        assert d.mantissa_bits == 0


@pytest.mark.parametrize("d", [d for d in DTYPES.values() if d.is_float], ids=lambda d: d.name)
def test_a_float_limit_is_exact_with_every_integer_below_it_and_the_next_integer_is_not(d: DType):
    assert d.exact_limit == 2 ** (d.mantissa_bits + 1)
    torch = pytest.importorskip("torch")
    t = getattr(torch, d.torch_name)
    every = torch.arange(0, min(d.exact_limit, 1 << 20) + 1, dtype=torch.int64)  # all of them for the 16-bit types
    assert torch.equal(every.to(t).to(torch.int64), every)
    edge = torch.tensor([d.exact_limit - 1, d.exact_limit, d.exact_limit + 1], dtype=torch.int64)
    assert edge.to(t).to(torch.int64).tolist() != edge.tolist()
    assert edge[:2].to(t).to(torch.int64).tolist() == edge[:2].tolist()


@pytest.mark.parametrize("d", [d for d in NUMPY if not d.is_float], ids=lambda d: d.name)
def test_an_integer_limit_is_the_types_maximum_but_the_uint8_sentinel(d: DType):
    info = np.iinfo(d.numpy_name)
    assert d.exact_limit == (info.max - 1 if d.name == "uint8" else info.max)
    assert info.min <= d.sentinel <= info.max  # the sentinel fits the type
    assert d.sentinel == (255 if d.name == "uint8" else -7)


@pytest.mark.parametrize("d", list(DTYPES.values()), ids=lambda d: d.name)
@pytest.mark.parametrize("op", [*OPS, None])
def test_no_data_pattern_produces_the_sentinel(d: DType, op):
    for world in (2, 3, 8):
        pattern = Pattern(op, d, world)
        values = np.concatenate([pattern.values(r) for r in range(world)])
        assert d.sentinel not in values
        assert np.abs(values).max() <= d.exact_limit
        if op in ("sum", "prod", "min", "max"):
            assert d.sentinel not in pattern.reduced and np.abs(pattern.reduced).max() <= d.exact_limit


def test_torch_names_exist():
    torch = pytest.importorskip("torch")
    for d in DTYPES.values():
        assert getattr(torch, d.torch_name).itemsize == d.itemsize, d.name
