"""Reducers: the arithmetic commbench's own algorithms apply to received data.

One Reducer per buffer kind: numpy arrays (MPI), torch tensors (gloo, and NCCL without CuPy),
and torch CUDA tensors through commbench's own kernels in cuda/reduce.cu (NCCL with CuPy).
All work in place on `dst`, with the same three methods.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np

CUDA_DIR = Path(os.environ.get("COMMBENCH_CUDA_DIR", Path(__file__).resolve().parent.parent / "cuda"))
REDUCE_SOURCE = CUDA_DIR / "reduce.cu"
CUDA_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8")
CUDA_OPS = ("sum", "prod", "min", "max")


class NumpyReducer:
    _UFUNCS = {"sum": np.add, "avg": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}

    def reduce(self, dst, src, op: str, other=None) -> None:
        """dst = op(other, src) element-wise, other defaulting to dst (avg accumulates a sum;
        see finish). `other` lets an out-of-place algorithm read its input without a copy."""
        self._UFUNCS[op](dst if other is None else other, src, out=dst)

    def copy(self, dst, src) -> None:
        dst[...] = src

    def finish(self, dst, op: str, world: int) -> None:
        """Turn an accumulated sum into the average."""
        if op == "avg":
            np.divide(dst, world, out=dst)


class TorchReducer:
    def __init__(self):
        import torch  # only where a torch backend runs

        self._fns = {"sum": torch.add, "avg": torch.add, "prod": torch.mul, "min": torch.minimum,
                     "max": torch.maximum}

    def reduce(self, dst, src, op: str, other=None) -> None:
        self._fns[op](dst if other is None else other, src, out=dst)

    def copy(self, dst, src) -> None:
        dst.copy_(src)

    def finish(self, dst, op: str, world: int) -> None:
        if op == "avg":
            dst.div_(world)


def kernel_names() -> list[str]:
    """Every entry point CudaReducer may launch (each must exist in cuda/reduce.cu)."""
    return [f"reduce_{d}_{o}{v}" for d in CUDA_DTYPES for o in CUDA_OPS for v in ("", "_scalar")]


@functools.lru_cache(maxsize=None)
def _reduce_module():
    """cuda/reduce.cu compiled once per process by NVRTC (CuPy caches the binary on disk too)."""
    import cupy

    return cupy.RawModule(code=REDUCE_SOURCE.read_text(), options=("-std=c++17",))


class CudaReducer:
    """Reductions in commbench's own kernels on torch CUDA tensors, launched on torch's current
    stream; copies and the final division of avg stay torch's."""

    THREADS = 256

    def __init__(self):
        import cupy
        import torch

        self._cp, self._torch = cupy, torch
        self._module = _reduce_module()
        self._blocks = 4 * cupy.cuda.Device().attributes["MultiProcessorCount"]
        self._torch_reducer = TorchReducer()
        self._kernels: dict = {}

    def _kernel(self, name: str):
        if name not in self._kernels:
            self._kernels[name] = self._module.get_function(name)
        return self._kernels[name]

    def reduce(self, dst, src, op: str, other=None) -> None:
        a = dst if other is None else other
        n = dst.numel()
        if n == 0:
            return
        dtype = str(dst.dtype).replace("torch.", "")
        aligned = all(t.data_ptr() % 16 == 0 for t in (dst, a, src))
        kernel = self._kernel(f"reduce_{dtype}_{'sum' if op == 'avg' else op}{'' if aligned else '_scalar'}")
        per_thread = 16 // dst.element_size() if aligned else 1
        grid = max(1, min(self._blocks, -(-n // (per_thread * self.THREADS))))
        cp = self._cp
        with cp.cuda.ExternalStream(self._torch.cuda.current_stream().cuda_stream):
            kernel((grid,), (self.THREADS,), (cp.from_dlpack(dst), cp.from_dlpack(a), cp.from_dlpack(src), np.int64(n)))

    def copy(self, dst, src) -> None:
        dst.copy_(src)

    def finish(self, dst, op: str, world: int) -> None:
        self._torch_reducer.finish(dst, op, world)


def gpu_reducer():
    """CudaReducer when CuPy is installed, else torch's own arithmetic."""
    try:
        import cupy  # noqa: F401
    except ImportError:
        return TorchReducer()
    return CudaReducer()
