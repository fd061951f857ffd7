"""cuda/reduce.cu's logic on the CPU: CudaReducer itself, on CPU tensors, with the kernels built
by the host compiler and each launch run thread by thread in a shuffled order (tests/host_cuda.py).
Only the launch is replaced. Small grids (3 blocks of 32 threads) make the grid-stride loops
wrap many times; every result is compared bit for bit with torch's arithmetic on the CPU (a NaN
with any NaN: its bits are the hardware's, and torch on the CPU itself gives two)."""

import pytest

import host_cuda
from host_cuda import HostReducer
from commbench.kernels.reducers import CUDA_DTYPES, CUDA_OPS, MANY, REDUCE_SOURCE, TorchReducer, launch, many_chunks

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(host_cuda.missing() is not None, reason=str(host_cuda.missing()))

SHAPES = [(1, 0), (37, 0), (1000, 0), (4099, 3)]  # (elements, offset in elements from a 64-byte aligned base)
FLOATS = ("float32", "float64", "float16", "bfloat16")
# (dtype, op, kind of values): every pair on ordinary values, and the float ones on values with NaNs
# and on values half of which are subnormal (which a GPU flushing to zero would lose)
CASES = [(d, o, "plain") for d in CUDA_DTYPES for o in CUDA_OPS] + [
    (d, o, k) for k in ("nan", "subnormal") for d in FLOATS for o in CUDA_OPS]


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    return host_cuda.build(REDUCE_SOURCE, tmp_path_factory.mktemp("host-kernels"))


def _values(dtype, n, offset, seed, kind="plain"):
    """n values at `offset` elements into a fresh allocation; small integers for the wide integer
    types (no overflow), the whole range for 8-bit ones (they wrap), magnitudes 0.5-1.5 of either
    sign for floats (products of 11 stay finite, sums round). kind "nan": about one float in eight
    NaN instead; "subnormal": about half k times the smallest subnormal, 1 <= k < 1/eps (never 0)."""
    g = torch.Generator().manual_seed(seed)
    if dtype in ("int8", "uint8"):
        low, high = (-128, 128) if dtype == "int8" else (0, 256)
        x = torch.randint(low, high, (n + offset,), generator=g)
    elif dtype in ("int32", "int64"):
        x = torch.randint(-5, 6, (n + offset,), generator=g)
    else:
        sign = torch.randint(0, 2, (n + offset,), generator=g) * 2 - 1
        x = sign * (0.5 + torch.rand(n + offset, generator=g, dtype=torch.float64))
        info = torch.finfo(getattr(torch, dtype))
        if kind == "nan":
            x = torch.where(torch.rand(n + offset, generator=g) < 0.125, torch.nan, x)
        elif kind == "subnormal":
            k = torch.randint(1, int(1 / info.eps), (n + offset,), generator=g, dtype=torch.float64)
            x = torch.where(torch.rand(n + offset, generator=g) < 0.5, sign * k * (info.tiny * info.eps), x)
    return x.to(getattr(torch, dtype))[offset:]


def _bits(t):
    return t.contiguous().view(torch.uint8)


def _same(x, y):
    """Bit for bit, but any NaN for a NaN."""
    nan = y.isnan()
    return torch.equal(x.isnan(), nan) and torch.equal(_bits(x[~nan]), _bits(y[~nan]))


@pytest.mark.parametrize("dtype,op,kind", CASES)
def test_reduce_matches_torch(kernels, dtype, op, kind):
    red, ref = HostReducer(kernels), TorchReducer()
    for n, offset in SHAPES:
        a, b = _values(dtype, n, offset, 1, kind), _values(dtype, n, 0, 2, kind)  # b aligned, a not when offset
        expected = a.clone()
        ref.reduce(expected, b, op)
        out = torch.full_like(a, 7)  # a value no correct result leaves everywhere
        red.reduce(out, b, op, other=a)
        inplace = a.clone()
        red.reduce(inplace, b, op)
        assert _same(out, expected), (n, offset)
        assert _same(inplace, expected), (n, offset)
    assert set(red.launches) == {f"reduce_{dtype}_{op}", f"reduce_{dtype}_{op}_scalar"}  # aligned, and not


@pytest.mark.parametrize("dtype,op,kind", CASES)
def test_reduce_many_is_the_chain_of_reduces(kernels, dtype, op, kind):
    """The n-ary kernel rounds after every op, left to right: bit-identical to the binary chain,
    in place (dst is the first input, as peer_twoshot calls it) and out of place, across chunks."""
    red, ref = HostReducer(kernels), TorchReducer()
    for k in (2, 3, MANY, MANY + 3, 2 * MANY):
        for n, offset in SHAPES[1:]:
            srcs = [_values(dtype, n, offset if i == 1 else 0, 10 * k + i, kind) for i in range(k)]
            expected = torch.empty_like(srcs[0])
            ref.reduce_many(expected, srcs, op)
            out = torch.full_like(srcs[0], 7)
            red.reduce_many(out, srcs, op)
            first = srcs[0].clone()
            red.reduce_many(first, [first] + srcs[1:], op)
            assert _same(out, expected), (k, n, offset)
            assert _same(first, expected), (k, n, offset)
    assert f"reduce_many_{dtype}_{op}" in red.launches and f"reduce_many_{dtype}_{op}_scalar" in red.launches


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["min", "max"])
def test_min_and_max_of_special_values_are_torchs(kernels, dtype, op):
    """Every pair of NaN, -0.0, +0.0, +-1, +-inf and +-the smallest subnormal, and triples of them
    (n-ary), give what torch gives for one element: a NaN operand wins, and of equal ones (-0.0,
    +0.0) the first (std::min / std::max). For more elements torch's vectorised CPU loop keeps the
    second of -0.0 and +0.0 instead, so whole tensors are no reference for ties."""
    t = getattr(torch, dtype)
    info = torch.finfo(t)
    special = [torch.nan, 0.0, -0.0, 1.0, -1.0, torch.inf, -torch.inf, info.tiny * info.eps, -info.tiny * info.eps]
    fn = torch.minimum if op == "min" else torch.maximum
    red = HostReducer(kernels)
    for offset in (0, 3):  # the vector loop and its tail, and the scalar path
        def at_offset(values):
            return torch.tensor([7.0] * offset + values, dtype=t)[offset:]
        a = at_offset([x for x in special for _ in special])
        b = at_offset([y for _ in special for y in special])
        c = at_offset([special[(i * 5) % len(special)] for i in range(len(special) ** 2)])
        expected = torch.cat([fn(a[i:i + 1], b[i:i + 1]) for i in range(len(a))])
        out, inplace = torch.full_like(a, 7), a.clone()
        red.reduce(out, b, op, other=a)
        red.reduce(inplace, b, op)
        assert _same(out, expected) and _same(inplace, expected), offset
        red.reduce_many(out, [a, b, c], op)
        assert _same(out, torch.cat([fn(expected[i:i + 1], c[i:i + 1]) for i in range(len(a))])), offset
    assert {f"reduce_{dtype}_{op}", f"reduce_{dtype}_{op}_scalar", f"reduce_many_{dtype}_{op}",
            f"reduce_many_{dtype}_{op}_scalar"} == set(red.launches)


def test_one_input_is_a_copy_and_empty_buffers_launch_nothing(kernels):
    red = HostReducer(kernels)
    x, out = _values("float32", 5, 0, 1), torch.zeros(5)
    red.reduce_many(out, [x], "sum")
    red.reduce(torch.zeros(0), torch.zeros(0), "sum")
    assert torch.equal(out, x) and red.launches == []


def test_any_grid_covers_the_buffer(kernels):
    """One block of one thread, and more blocks than elements: the same result."""
    x, y = _values("float16", 999, 0, 1), _values("float16", 999, 0, 2)
    expected = x + y
    for blocks, threads in ((1, 1), (64, 32)):
        red = HostReducer(kernels, blocks=blocks)
        red.THREADS = threads
        out = torch.empty_like(x)
        red.reduce(out, y, "sum", other=x)
        assert torch.equal(out, expected), (blocks, threads)


def test_launch_picks_variant_and_grid():
    name, blocks, args = launch("float32", "avg", 1000, 4, 4096, [4096, 8192], max_blocks=100, threads=32)
    assert (name, blocks) == ("reduce_float32_sum", 8)  # 250 vectors of 4 over 32 threads; avg sums
    assert [int(a) for a in args] == [4096, 4096, 8192, 1000]
    name, blocks, _ = launch("float32", "max", 1000, 4, 4096, [4100, 8192], max_blocks=100, threads=32)
    assert (name, blocks) == ("reduce_float32_max_scalar", 32)
    name, blocks, args = launch("int8", "min", 10**6, 1, 0, [0, 16, 32], max_blocks=5, threads=256)
    assert (name, blocks) == ("reduce_many_int8_min", 5)
    assert [int(a) for a in args] == [0, 10**6, 3, 0, 16, 32] + [0] * (MANY - 3)
    for k in (1, MANY + 1):
        with pytest.raises(ValueError):
            launch("float32", "sum", 10, 4, 0, [0] * k, max_blocks=1, threads=1)


@pytest.mark.parametrize("k", [2, MANY, MANY + 1, 2 * MANY - 1, 2 * MANY, 30])
def test_many_chunks_take_every_input_once_in_order(k):
    srcs = [f"s{i}" for i in range(k)]
    chunks = many_chunks("dst", srcs)
    assert all(2 <= len(c) <= MANY for c in chunks)
    assert chunks[0] == srcs[:MANY] and all(c[0] == "dst" for c in chunks[1:])
    assert [s for c in chunks for s in c if s != "dst"] == srcs


def test_the_harness_sees_a_broken_kernel(tmp_path):
    """The same checks on a copy of reduce.cu whose vector loop skips every other stride fail."""
    source = REDUCE_SOURCE.read_text()
    broken = source.replace("for (long long i = first; i < vectors; i += stride) {\n        uint4 x = av[i];",
                            "for (long long i = first; i < vectors; i += 2 * stride) {\n        uint4 x = av[i];")
    assert broken != source
    (tmp_path / "reduce.cu").write_text(broken)
    red = HostReducer(host_cuda.build(tmp_path / "reduce.cu", tmp_path))
    x, y = _values("float32", 4096, 0, 1), _values("float32", 4096, 0, 2)
    out = torch.zeros_like(x)
    red.reduce(out, y, "sum", other=x)
    assert not torch.equal(out, x + y)


def test_the_rank_processes_silence_this_module_s_overflow_warnings_only():
    """Timed loops repeat in-place sums until float32 overflows: the ranks ignore numpy's warning there, by
    this module's own name (a filter naming its old place silenced nothing after a move), and nowhere else."""
    import warnings

    import numpy as np

    from commbench.kernels import reducers

    big = np.full(4, 3e38, dtype=np.float32)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        reducers.quiet_overflow()
        reducers.NumpyReducer().reduce(big.copy(), big, "sum")
        with np.errstate(over="warn"):
            np.add(big, big)  # elsewhere: still warned
    assert [str(w.message) for w in seen] == ["overflow encountered in add"]
    assert seen[0].filename == __file__
