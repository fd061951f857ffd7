"""cuda/collectives.cu on a GPU: NVRTC compiles one module per dtype; every rank's region is a
cudaMalloc whose CUDA IPC handle the others open; a call is one launch of `channels` blocks on
the rank's current stream. A wait that times out is reported in pinned host memory, which the
next call reads without waiting for the GPU.
"""

from __future__ import annotations

import ctypes
import functools
import os

import numpy as np

from commbench.rank.kernels import (ERROR_WORDS, GPU_THREADS, SLOT_BYTES, SOURCE, SPIN_S, KernelFault, comm_struct,
                                    describe, region_bytes, what)
from commbench.rank.reducers import NVRTC_OPTIONS, cuda_source

DTYPE_CODES = {"float32": 1, "float64": 2, "float16": 3, "bfloat16": 4, "int32": 5, "int64": 6, "int8": 7, "uint8": 8}


def mps_running() -> bool:
    """Whether an MPS control daemon serves this machine (its pipe directory has its control pipe)."""
    return os.path.exists(os.path.join(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"), "control"))


class GpuNode:
    """Every rank's region in its own cudaMalloc, opened by the others through CUDA IPC; the
    error words in pinned host memory the GPU writes and the host reads without waiting."""

    def __init__(self, comm, nbytes: int):
        import cupy
        import torch

        self._cp = cupy
        rt = cupy.cuda.runtime
        self.device = cupy.cuda.Device(torch.cuda.current_device())
        with self.device:
            self._own = rt.malloc(nbytes)
            rt.memset(self._own, 0, nbytes)
            rt.deviceSynchronize()
            handles = comm.allgather_object(bytes(rt.ipcGetMemHandle(self._own)))
            self.regions = [self._own if r == comm.rank else rt.ipcOpenMemHandle(h, rt.cudaIpcMemLazyEnablePeerAccess)
                            for r, h in enumerate(handles)]
            self._pinned = rt.hostAlloc(8 * ERROR_WORDS, 2)  # cudaHostAllocMapped
            self._error = np.frombuffer((ctypes.c_longlong * ERROR_WORDS).from_address(self._pinned), dtype=np.int64)
            self._error[:] = 0
            self.error_address = rt.pointerGetAttributes(self._pinned).devicePointer
        self._rank = comm.rank
        sharing = comm.size - len(set(comm.allgather_object(self.device.id)))
        self.note = None if not sharing or mps_running() else (
            f"{comm.size} ranks share {comm.size - sharing} GPU(s) without MPS: the GPU time-slices between "
            "processes, so every step of ring_kernel / tree_kernel waits a slice (correct, slow); start it with "
            "nvidia-cuda-mps-control -d")

    def error(self):
        return self._error.tolist()

    def upload(self, struct):
        """The rank's CbComm in device memory (its counters live there from then on)."""
        with self.device:
            return self._cp.asarray(np.frombuffer(bytes(struct), dtype=np.uint8))

    def bind(self, struct, name: str, dtype: str | None, send: int, recv: int, count: int, channels: int):
        """One launch of kernel `name` on the rank's current stream, as a zero-argument callable;
        a wait that timed out in an earlier call raises before the next launch."""
        import torch

        fn = gpu_function(name, dtype, self.device.id)
        args = (struct, np.uint64(send), np.uint64(recv), np.int64(count), np.int64(0), np.int32(channels),
                np.int32(0))  # a process's own buffers: all-gather through the FIFOs
        error, cupy = self._error, self._cp

        def run():
            if error[0]:
                raise KernelFault(describe(error.tolist(), what(name)))
            with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                fn((channels,), (GPU_THREADS,), args)
        return run

    def close(self, comm) -> None:
        rt = self._cp.cuda.runtime
        with self.device:
            rt.deviceSynchronize()
            for r, ptr in enumerate(self.regions):
                if r != self._rank:
                    rt.ipcCloseMemHandle(ptr)
            comm.barrier()  # nobody has this rank's region open any more
            rt.free(self._own)
            rt.freeHost(self._pinned)


@functools.lru_cache(maxsize=None)
def gpu_function(name: str, dtype: str | None, device: int):
    """A kernel of cuda/collectives.cu, NVRTC-compiled with one dtype's entry points."""
    import cupy

    code = DTYPE_CODES.get(dtype or "", 0)
    with cupy.cuda.Device(device):
        module = cupy.RawModule(code=cuda_source(SOURCE.name), options=(*NVRTC_OPTIONS, f"-DCB_DTYPE={code}"))
        return module.get_function(name)


class OneGpuNode:
    """n ranks of one node in one process and one launch (gridDim.y = ranks): their regions in one
    allocation, rank y's buffers at base + y·stride. The cheapest real test of the device protocol
    (tests/gpu, benchmarks): every rank's blocks run at once, so flags, fences, chunking and
    channels run on the hardware; bandwidth is then HBM-bound, not NVLink-bound."""

    def __init__(self, n: int, channels: int, timeout_s: float = 20.0):
        import cupy

        self._cp, self.n = cupy, n
        slot = SLOT_BYTES["cuda"]
        region = region_bytes(n, channels, slot)
        self.memory = cupy.zeros(region * n, dtype=cupy.uint8)
        base = self.memory.data.ptr
        self._error = cupy.cuda.alloc_pinned_memory(8 * ERROR_WORDS)
        self.error_words = np.frombuffer(self._error, dtype=np.int64, count=ERROR_WORDS)
        self.error_words[:] = 0
        error = cupy.cuda.runtime.pointerGetAttributes(self._error.ptr).devicePointer
        raw = b"".join(bytes(comm_struct(r, n, channels, timeout_s, [base + q * region for q in range(n)], error, slot,
                                         SPIN_S["cuda"])) for r in range(n))
        self.comms = cupy.asarray(np.frombuffer(raw, dtype=np.uint8))

    def run(self, name: str, dtype: str | None, send: int, recv: int, count: int, stride: int, channels: int,
            ranks: int | None = None, direct: bool = False) -> None:
        """Launch kernel `name` for ranks 0 .. ranks-1 (default all) on the current stream; direct:
        all-gather reads its neighbour's buffers (at `stride`) instead of going through the FIFOs."""
        import torch

        fn = gpu_function(name, dtype, torch.cuda.current_device())
        with self._cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            fn((channels, ranks or self.n), (GPU_THREADS,), (self.comms, np.uint64(send), np.uint64(recv),
                                                            np.int64(count), np.int64(stride), np.int32(channels),
                                                            np.int32(direct)))
