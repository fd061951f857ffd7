"""Peer-memory all-reduce latency next to one reduction alone, side by side in one session.

    python benchmarks/peer_latency.py                  # CPU: 2 and 4 MPI ranks, /dev/shm slots
    python benchmarks/peer_latency.py --device cuda    # GPU: 2 and 4 processes on one GPU, CUDA IPC

Each world size is one `commbench run` (all-reduce, float32, in place, 8 B - 2 MB by 8x) of
peer_oneshot and peer_twoshot, with native and ring beside them on the CPU (MPI) and the
_gpuflags variants (the GPU waits at the barriers) beside them on the GPU. The reference
is one element-wise reduction of the same size on this device (numpy on the CPU, commbench's
CUDA kernel on the GPU, its time per call in batches of back-to-back calls between CUDA events,
launches not counted: cuda_timing.py): the floor that a one-rank "all-reduce" costs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from cuda_timing import seconds_per_call

from commbench.analysis.model import load_rows
from commbench.algorithms import ALGORITHMS

PEER = [name for name, a in ALGORITHMS.items() if not a.sends_messages]  # the peer-memory algorithms
SIZES = [8 * 8**k for k in range(7)]  # 8 B .. 2 MB


def reduction_us(device: str, size: int, reps: int = 200) -> float:
    n = max(1, size // 4)
    if device == "cpu":
        a, b = np.ones(n, np.float32), np.ones(n, np.float32)
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            np.add(a, b, out=a)
            times.append(time.perf_counter() - t)
        return statistics.median(times) * 1e6
    import torch

    from commbench.kernels.reducers import CudaReducer

    red, a, b = CudaReducer(torch.cuda.current_device()), torch.ones(n, device="cuda"), torch.ones(n, device="cuda")
    return seconds_per_call(lambda: red.reduce(a, b, "sum")) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--worlds", default="2,4")
    args = parser.parse_args()
    on_cpu = [name for name in PEER if not ALGORITHMS[name].flags_on_gpu]  # the _gpuflags ones wait in a GPU kernel
    backend, algos = ("mpi", ",".join(["native", "ring", *on_cpu])) if args.device == "cpu" else ("gloo", ",".join(PEER))
    reference = {s: reduction_us(args.device, s) for s in SIZES}
    for world in map(int, args.worlds.split(",")):
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([sys.executable, "-m", "commbench", "run", "-n", str(world), "--backend", backend,
                            "--device", args.device, "-a", algos, "-c", "all_reduce", "-d", "float32", "--in-place",
                            "--sizes", ",".join(map(str, SIZES)), "--min-time", "0.2", "--out", out, "--quiet"],
                           check=True)
            rows = load_rows([out])
        table = rows.pivot_table(index="size_bytes", columns="algorithm", values="time_us")
        table["one reduction"] = [reference[s] for s in table.index]
        print(f"\n{world} ranks, {args.device}: median µs per call (wrong elements: {int(rows.wrong.sum())})")
        print(table.round(1).to_string())


if __name__ == "__main__":
    main()
