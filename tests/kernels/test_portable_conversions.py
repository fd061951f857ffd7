"""cuda/portable.h's host half and bfloat16 conversions, built alone into a shim (the kernels' host
build uses them for float16 and bfloat16 reductions), against numpy and torch."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from commbench.errors import OK
from commbench.kernels import host as kernel_host
from commbench.kernels import abi as K


SHIM = r"""
#include "portable.h"
extern "C" {
CB_EXPORT void half_to_float(const uint16_t* in, float* out, long n) {
    for (long i = 0; i < n; ++i) { cb_half h; h.bits = in[i]; out[i] = float(h); }
}
CB_EXPORT void float_to_half(const float* in, uint16_t* out, long n) {
    for (long i = 0; i < n; ++i) out[i] = cb_half(in[i]).bits;
}
CB_EXPORT void bfloat16_to_float(const uint16_t* in, float* out, long n) {
    for (long i = 0; i < n; ++i) { cb_bfloat16 h; h.bits = in[i]; out[i] = float(h); }
}
CB_EXPORT void float_to_bfloat16(const float* in, uint16_t* out, long n) {
    for (long i = 0; i < n; ++i) out[i] = cb_bfloat16(in[i]).bits;
}
}
"""


@pytest.fixture(scope="module")
def conversions(tmp_path_factory):
    cxx = kernel_host.compiler()
    if cxx is None:
        pytest.skip("no C++ compiler (g++, c++, clang++ or $CXX)")
    folder = tmp_path_factory.mktemp("portable")
    (folder / "shim.cc").write_text(SHIM)
    proc = subprocess.run([cxx, *kernel_host.HOST_FLAGS, f"-I{K.SOURCE.parent}", str(folder / "shim.cc"), "-o",
                           str(folder / "shim.so")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == OK, proc.stderr[-3000:]
    lib = ctypes.CDLL(str(folder / "shim.so"))

    def wrap(name, in_type, out_type):
        fn = getattr(lib, name)

        def convert(x):
            x = np.ascontiguousarray(x, dtype=in_type)
            out = np.empty(x.shape, out_type)
            fn(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_long(x.size))
            return out
        return convert
    return {"h2f": wrap("half_to_float", np.uint16, np.float32), "f2h": wrap("float_to_half", np.float32, np.uint16),
            "b2f": wrap("bfloat16_to_float", np.uint16, np.float32),
            "f2b": wrap("float_to_bfloat16", np.float32, np.uint16)}


ALL16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def _floats(seed: int, halfway_of=None) -> np.ndarray:
    """float32 inputs: random bit patterns (NaNs, infinities, subnormals), values across the 16-bit
    type's range, exact halfway points between neighbouring 16-bit values and their float
    neighbours, the overflow boundary."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 32, 2_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    spread = (rng.choice([-1, 1], 1_000_000) * np.exp2(rng.uniform(-30, 17, 1_000_000))).astype(np.float32)
    parts = [bits, spread]
    if halfway_of is not None:
        finite = halfway_of[np.isfinite(halfway_of)].astype(np.float64)
        ordered = np.unique(finite)
        mid = ((ordered[1:] + ordered[:-1]) / 2).astype(np.float32)
        assert (mid.astype(np.float64) == (ordered[1:] + ordered[:-1]) / 2).all()  # exact in float32
        up, down = np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))
        parts += [mid, up, down]
    parts.append(np.array([65504, 65519.996, 65520, 65536, 3.4e38, 2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001,
                           2.0 ** -26, 1e-45, 0.0, -0.0], np.float32))
    x = np.concatenate(parts)
    return np.concatenate([x, -x])


def _check_nans(x, got, exponent: int, quiet: int):
    """Where x is a NaN, got is a NaN of the same sign with its quiet bit set (signalling NaNs are
    quieted, as the F16C instruction and a GPU convert); the mask of x's NaNs."""
    nan = np.isnan(x)
    g = got[nan]
    assert ((g & exponent) == exponent).all() and (g & quiet).all()
    assert ((g >> 15) == (x[nan].view(np.uint32) >> 31)).all()
    return nan


def test_half_to_float_every_pattern(conversions):
    got = conversions["h2f"](ALL16)
    assert got.view(np.uint32).tobytes() == ALL16.view(np.float16).astype(np.float32).view(np.uint32).tobytes()


def test_float_to_half_rounds_as_numpy(conversions):
    # every half back from its float: exact, but a signalling NaN comes back quiet
    back = conversions["f2h"](ALL16.view(np.float16).astype(np.float32))
    signalling = ((ALL16 & 0x7E00) == 0x7C00) & ((ALL16 & 0x3FF) != 0)
    assert back[~signalling].tobytes() == ALL16[~signalling].tobytes()
    assert (back[signalling] == ALL16[signalling] | 0x200).all()
    x = _floats(1, halfway_of=ALL16.view(np.float16))
    got = conversions["f2h"](x)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    nan = _check_nans(x, got, 0x7C00, 0x0200)
    quiet_in = nan & ((x.view(np.uint32) & 0x400000) != 0)
    assert (got[quiet_in] == want[quiet_in]).all()  # a quiet NaN: numpy's bits (numpy keeps signalling ones)
    bad = np.flatnonzero(got[~nan] != want[~nan])
    assert bad.size == 0, [(float(v), hex(g), hex(w)) for v, g, w in
                           zip(x[~nan][bad[:5]], got[~nan][bad[:5]], want[~nan][bad[:5]])]
    assert np.isnan(x).sum() > 1000 and (np.abs(x) < 2.0 ** -14).sum() > 1000  # the cases are there


def test_bfloat16_conversions_as_torch(conversions):
    torch = pytest.importorskip("torch")
    as_bits = lambda t: t.view(torch.int16).numpy().view(np.uint16)  # noqa: E731
    every = torch.from_numpy(ALL16.view(np.int16).copy()).view(torch.bfloat16)
    assert conversions["b2f"](ALL16).view(np.uint32).tobytes() == every.float().numpy().view(np.uint32).tobytes()
    floats32 = every.float().numpy()
    assert conversions["f2b"](floats32)[~np.isnan(floats32)].tobytes() == ALL16[~np.isnan(floats32)].tobytes()
    x = _floats(2, halfway_of=floats32)
    got = conversions["f2b"](x)
    want = as_bits(torch.from_numpy(x).to(torch.bfloat16))
    nan = _check_nans(x, got, 0x7F80, 0x0040)
    bad = np.flatnonzero(got[~nan] != want[~nan])
    assert bad.size == 0, [(float(v), hex(g), hex(w)) for v, g, w in
                           zip(x[~nan][bad[:5]], got[~nan][bad[:5]], want[~nan][bad[:5]])]
