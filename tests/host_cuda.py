"""cuda/*.cu run on the CPU: built by the host compiler with tests/host_cuda.h, each launch run
thread by thread, in a shuffled order, with the launch's own grid and arguments.

What a machine without a GPU can check of a kernel's logic: indexing, vector widths, the tail,
grid-stride coverage, alignment variants, dtype conversions and rounding. Not checked here:
anything the GPU's memory model, timing or compiler decides (tests/gpu/ does that on a GPU).
"""

from __future__ import annotations

import ctypes
import random
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import numpy as np

from commbench.kernels.reducers import CudaReducer
from commbench.sources import CUDA_DIR

HEADER = Path(__file__).resolve().parent / "host_cuda.h"
_CTYPES = {np.uint64: ctypes.c_uint64, np.int64: ctypes.c_int64, np.int32: ctypes.c_int32}


def missing() -> str | None:
    """Why kernels cannot be built for the host here, or None."""
    if shutil.which("nvcc") is None:
        return "nvcc is not installed (its headers declare the CUDA types)"
    if shutil.which("g++") is None:
        return "g++ is not installed"
    return None


def cuda_includes() -> list[str]:
    """The include flags nvcc itself passes to the host compiler (from `nvcc -dryrun`)."""
    out = subprocess.run(["nvcc", "-dryrun", "-x", "cu", "-c", "/dev/null", "-o", "/dev/null"],
                         capture_output=True, text=True, timeout=60)
    flags = []
    for name in ("INCLUDES", "SYSTEM_INCLUDES"):
        m = re.search(rf'^#\$ {name}=(.*)$', out.stderr + out.stdout, re.M)
        if m:
            flags += shlex.split(m.group(1))
    if not flags:
        raise RuntimeError(f"no include paths in nvcc -dryrun's output:\n{out.stderr[-2000:]}")
    return flags


def build(source: Path, out_dir: Path) -> HostKernels:
    lib = out_dir / f"{source.stem}.so"
    cmd = ["g++", "-std=c++17", "-O1", "-fno-strict-aliasing", "-shared", "-fPIC", "-Wno-unknown-pragmas",
           *cuda_includes(), f"-I{CUDA_DIR}", "-x", "c++", "-include", str(HEADER), str(source), "-o", str(lib)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode:
        raise RuntimeError(f"{shlex.join(cmd)}\n{proc.stderr[-4000:]}")
    return HostKernels(ctypes.CDLL(str(lib)))


class HostKernels:
    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib
        self.lib.cb_host_thread.argtypes = [ctypes.c_uint] * 4

    def __call__(self, name: str, blocks: int, threads: int, args: tuple, seed: int = 0) -> None:
        """Run kernel `name` as a launch of blocks x threads, the threads in a shuffled order."""
        fn = getattr(self.lib, name)
        fn.argtypes = [_CTYPES[type(a)] for a in args]
        fn.restype = None
        values = [int(a) for a in args]
        order = [(b, t) for b in range(blocks) for t in range(threads)]
        random.Random(seed).shuffle(order)
        for b, t in order:
            self.lib.cb_host_thread(b, t, blocks, threads)
            fn(*values)


class HostReducer(CudaReducer):
    """CudaReducer with its launches run on the CPU by `kernels` (build()), on CPU tensors;
    `device` is the GPU it stands for. Records every launch: its kernel, and its (device, stream)."""

    THREADS = 32

    def __init__(self, kernels: HostKernels, blocks: int = 3, device: int = 0):
        super().__init__(device)
        self._kernels_on_host, self._blocks = kernels, blocks
        self.launches: list[str] = []
        self.targets: list[tuple[int, int]] = []

    def _stream(self, device: int) -> int:
        return 0  # a CPU build of torch has no streams; tests/rank/test_cuda_devices.py checks the real one

    def _run(self, device, stream, name, blocks, args):
        self.launches.append(name)
        self.targets.append((device, stream))
        self._kernels_on_host(name, blocks, self.THREADS, args, seed=len(self.launches))
