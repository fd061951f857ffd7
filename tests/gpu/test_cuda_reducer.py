"""commbench's reduction kernels (cuda/reduce.cu through CuPy) against torch on a real GPU:
every dtype and op, in place and three-operand, aligned and misaligned views, odd lengths."""

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("cupy")

from commbench.kernels.reducers import CUDA_DTYPES, CUDA_OPS, CudaReducer  # noqa: E402

REFERENCE = {"sum": torch.add, "prod": torch.mul, "min": torch.minimum, "max": torch.maximum}


def _values(n, dtype, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    low, high = (-3, 4) if dtype != "uint8" else (0, 4)  # small integers: exact in every dtype
    return torch.randint(low, high, (n,), generator=g).to(getattr(torch, dtype)).cuda()


@pytest.mark.parametrize("dtype", CUDA_DTYPES)
@pytest.mark.parametrize("op", CUDA_OPS)
@pytest.mark.parametrize("n,offset", [(1, 0), (1000003, 0), (4099, 1), (65536, 3)])
def test_matches_torch(dtype, op, n, offset):
    red = CudaReducer(torch.cuda.current_device())
    a, b = _values(n + offset, dtype, 1)[offset:], _values(n + offset, dtype, 2)[offset:]
    expected = REFERENCE[op](a, b)
    out = torch.empty_like(a)
    red.reduce(out, b, op, other=a)  # three operands
    inplace = a.clone()
    red.reduce(inplace, b, op)
    torch.cuda.synchronize()
    assert torch.equal(out, expected) and torch.equal(inplace, expected)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8"])
@pytest.mark.parametrize("k", [3, 8, 11])
def test_reduce_many_is_the_chain_of_reduces(dtype, k):
    """The n-ary kernels on the GPU: bit-identical to the chain of binary reductions (torch's own
    arithmetic), one input misaligned, in place on the first input and across two launches."""
    red = CudaReducer(torch.cuda.current_device())
    srcs = [_values(100003 + 1, dtype, 10 + i)[1 if i == 1 else 0:][:100003] for i in range(k)]
    expected = srcs[0].clone()
    for s in srcs[1:]:
        expected = REFERENCE["sum"](expected, s)
    out = torch.empty_like(srcs[0])
    red.reduce_many(out, srcs, "sum")
    first = srcs[0].clone()
    red.reduce_many(first, [first] + srcs[1:], "sum")
    torch.cuda.synchronize()
    assert torch.equal(out, expected) and torch.equal(first, expected)
