"""Reducers: the arithmetic commbench's own algorithms apply to received data.

One Reducer per buffer kind: numpy arrays (MPI), torch tensors (gloo, and NCCL without CuPy),
and torch CUDA tensors through commbench's own kernels in cuda/reduce.cu (NCCL with CuPy).
All work in place on `dst`, with the same four methods.

Which kernel a CUDA reduction launches, on what grid and with which arguments is decided in
plain Python (`launch`, `many_chunks`), apart from the launch itself (CudaReducer._run), so that
tests/kernels/test_reducers.py runs CudaReducer on CPU tensors with cuda/reduce.cu built for the CPU.
"""

from __future__ import annotations

import functools
import re
import warnings

import numpy as np

from commbench.dtypes import DTYPES
from commbench.sources import CUDA_DIR

REDUCE_SOURCE = CUDA_DIR / "reduce.cu"
CUDA_DTYPES = tuple(DTYPES)  # every dtype: reduce.cu and collectives.cu define entries for each
CUDA_OPS = ("sum", "prod", "min", "max")


MANY = 8  # inputs of one reduce_many launch (cuda/reduce.cu)
VECTOR_BYTES = 16  # one vectorised load or store

# NVRTC compiles cuda/*.cu with commbench's options, then -ftz=true, which CuPy appends to every
# RawModule's options (cupy/cuda/compiler.py, _compile_with_cache_cuda, every CuPy since 2017).
# -ftz=true flushes float32 subnormals to zero and wins over a --ftz=false of ours (the later
# option does; NVRTC only warns, cupy/cupy#9576), so cuda/reduce.cu keeps subnormals by itself:
# its float arithmetic and comparisons are PTX without .ftz. tests/cuda/test_cuda_compile.py compiles
# with both tuples (nvcc spells them alike). --fmad=false: every + and * rounds on its own, as on
# the CPU (NVRTC's default contracts a*b+c into one fma).
NVRTC_OPTIONS = ("-std=c++17", "--fmad=false")
CUPY_NVRTC_OPTIONS = ("-ftz=true",)


class _Reducer:
    def prepare(self) -> None:
        """Get ready to reduce (outside any timed loop): nothing to build here."""

    def reduce_many(self, dst, srcs: list, op: str) -> None:
        """dst = srcs[0] op srcs[1] op ... op srcs[-1], left to right, rounding after every op.
        dst may be srcs[0], no other input. This one is the chain of reduce calls."""
        if len(srcs) == 1:
            self.copy(dst, srcs[0])
            return
        self.reduce(dst, srcs[1], op, other=srcs[0])
        for s in srcs[2:]:
            self.reduce(dst, s, op)


def quiet_overflow() -> None:
    """Timed loops repeat in-place reductions, so values grow without bound: numpy's overflow and invalid-value
    warnings from these reducers say nothing (the correctness check starts again from a fresh fill). Every rank
    process calls this first; the filter names this module by its own name, so it follows it wherever it lives."""
    warnings.filterwarnings("ignore", r"(overflow|invalid value) encountered", RuntimeWarning, re.escape(__name__))


class NumpyReducer(_Reducer):
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


class TorchReducer(_Reducer):
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


def launch(dtype: str, op: str, n: int, itemsize: int, dst: int, srcs: list[int], max_blocks: int,
           threads: int) -> tuple[str, int, tuple]:
    """One kernel launch for dst = srcs[0] op srcs[1] (op ...) over n elements at these device
    addresses: (entry point, blocks, arguments). Two inputs take reduce_*, up to MANY take
    reduce_many_*. The vectorised variant needs every address 16-byte aligned, else _scalar; the
    grid covers n at that width, capped at max_blocks (the kernels' grid-stride loops do the rest)."""
    if not 2 <= len(srcs) <= MANY:
        raise ValueError(f"a launch reduces 2 to {MANY} inputs, not {len(srcs)}")
    aligned = all(a % VECTOR_BYTES == 0 for a in (dst, *srcs))
    per_thread = VECTOR_BYTES // itemsize if aligned else 1
    blocks = max(1, min(max_blocks, -(-n // (per_thread * threads))))
    name = f"{dtype}_{'sum' if op == 'avg' else op}{'' if aligned else '_scalar'}"
    ptrs = [np.uint64(a) for a in srcs]
    if len(srcs) == 2:
        return f"reduce_{name}", blocks, (np.uint64(dst), *ptrs, np.int64(n))
    padding = [ptrs[0]] * (MANY - len(ptrs))  # read by no thread
    return f"reduce_many_{name}", blocks, (np.uint64(dst), np.int64(n), np.int32(len(srcs)), *ptrs, *padding)


def many_chunks(dst, srcs: list) -> list[list]:
    """The inputs of each launch that reduces len(srcs) > 1 inputs into dst: the first MANY, then
    dst (the result so far) and up to MANY - 1 more, until none is left."""
    chunks, rest = [list(srcs[:MANY])], list(srcs[MANY:])
    while rest:
        chunks.append([dst] + rest[:MANY - 1])
        rest = rest[MANY - 1:]
    return chunks


def entry_points() -> dict[str, list[str]]:
    """Every kernel the Python side launches, by the file in cuda/ that must define it."""
    reducer = [f"{family}_{d}_{o}{v}" for family in ("reduce", "reduce_many") for d in CUDA_DTYPES for o in CUDA_OPS
               for v in ("", "_scalar")]
    return {REDUCE_SOURCE.name: reducer, "peer_flags.cu": ["peer_barrier"]}


def cuda_source(source: str, seen: set | None = None) -> str:
    """cuda/<source> with its local headers (#include "x.h") written in place, each once: one
    text, so the compilers need no include path and CuPy's cache (keyed by the text) sees a
    header change."""
    seen = set() if seen is None else seen

    def inline(m: re.Match) -> str:
        if m.group(1) in seen:
            return ""
        seen.add(m.group(1))
        return cuda_source(m.group(1), seen)

    return re.sub(r'^#include "([^"]+)"[^\n]*$', inline, (CUDA_DIR / source).read_text(), flags=re.M)


@functools.lru_cache(maxsize=None)
def cuda_module(source: str):
    """cuda/<source> compiled once per process by NVRTC (CuPy caches the binary on disk too)."""
    import cupy

    return cupy.RawModule(code=cuda_source(source), options=NVRTC_OPTIONS)


class CudaReducer:
    """Reductions in commbench's own kernels on torch CUDA tensors (device addresses passed as
    64-bit integers); copies and the final division of avg stay torch's.

    Every launch goes to the device of its destination tensor (this reducer's `device` for a
    host tensor, which only the CPU tests pass) and to the stream the caller passes, by default
    that device's current stream: never to the calling thread's current device, which in a
    thread the rank started (hierarchical's pipeline) is GPU 0 whatever the rank's GPU.
    The kernels are built on first use; where they cannot be (no CuPy, an NVRTC error) `fallback`
    says why in one line and torch's arithmetic reduces instead."""

    THREADS = 256

    def __init__(self, device: int):
        import torch

        self._torch, self.device = torch, device
        self._torch_reducer = TorchReducer()
        self._kernels: dict = {}
        self._blocks: int | None = None
        self.fallback: str | None = None

    def prepare(self) -> None:
        self._built()

    def _built(self) -> bool:
        """Build the kernels on first use; False where they cannot be (fallback says why)."""
        if self._blocks is None and self.fallback is None:
            try:
                import cupy

                with cupy.cuda.Device(self.device):
                    self._module = cuda_module(REDUCE_SOURCE.name)
                    self._module.get_function("reduce_float32_sum")  # NVRTC compiles here
                    self._blocks = 4 * cupy.cuda.Device(self.device).attributes["MultiProcessorCount"]
                self._cp = cupy
            except Exception as exc:  # noqa: BLE001 - whatever CuPy or NVRTC raise, the run goes on
                first = (str(exc).strip().splitlines() or [""])[0]
                self.fallback = (f"commbench's CUDA reduction kernels did not build ({type(exc).__name__}: {first}); "
                                 "torch's arithmetic reduces instead")
        return self.fallback is None

    def _kernel(self, device: int, name: str):
        if (device, name) not in self._kernels:
            with self._cp.cuda.Device(device):  # the module is loaded into each device's context
                self._kernels[(device, name)] = self._module.get_function(name)
        return self._kernels[(device, name)]

    def reduce(self, dst, src, op: str, other=None, stream: int | None = None) -> None:
        if self._built():
            self._launch(dst, [dst if other is None else other, src], op, stream)
        else:
            self._torch_reducer.reduce(dst, src, op, other=other)

    def reduce_many(self, dst, srcs: list, op: str, stream: int | None = None) -> None:
        """As _Reducer's, in one pass over dst per MANY inputs (reduce_many_* kernels)."""
        if len(srcs) == 1:
            self.copy(dst, srcs[0])
        elif not self._built():
            self._torch_reducer.reduce_many(dst, srcs, op)
        else:
            for chunk in many_chunks(dst, srcs):
                self._launch(dst, chunk, op, stream)

    def _launch(self, dst, srcs: list, op: str, stream: int | None) -> None:
        if dst.numel() == 0:
            return
        device = dst.device.index if dst.is_cuda else self.device
        name, blocks, args = launch(str(dst.dtype).replace("torch.", ""), op, dst.numel(), dst.element_size(),
                                    dst.data_ptr(), [t.data_ptr() for t in srcs], self._blocks, self.THREADS)
        self._run(device, self._stream(device) if stream is None else stream, name, blocks, args)

    def _stream(self, device: int) -> int:
        """The device's current stream (torch's, for this thread): where torch queued dst's data."""
        return self._torch.cuda.current_stream(device).cuda_stream

    def _run(self, device: int, stream: int, name: str, blocks: int, args: tuple) -> None:
        """The launch itself (the CPU tests replace only this, with the kernels built for the host)."""
        with self._cp.cuda.Device(device), self._cp.cuda.ExternalStream(stream, device):
            self._kernel(device, name)((blocks,), (self.THREADS,), args)

    def copy(self, dst, src) -> None:
        dst.copy_(src)

    def finish(self, dst, op: str, world: int) -> None:
        self._torch_reducer.finish(dst, op, world)


def gpu_reducer(device: int) -> CudaReducer:
    """The reducer of a rank whose GPU is `device` (its kernels built on first use)."""
    return CudaReducer(device)
