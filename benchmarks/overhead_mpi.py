"""Measurement overhead: commbench's reported MPI all-reduce latency next to a bare mpi4py loop
of the same call, 8 B - 4 KB, in one job, rounds interleaved.

    python benchmarks/overhead_mpi.py            # re-launches itself under mpirun -n 4
    mpirun -n 4 python benchmarks/overhead_mpi.py --rounds 7 --iters 2000

The bare loop is what a hand-written benchmark does (OSU style): barrier, N back-to-back calls,
elapsed / N, maximum over ranks. commbench's figure is its headline `time_us`: the median over
iterations of the per-iteration maximum over ranks (harness.measure, the code `run` uses).
Each size reports the median over rounds of each figure and their ratio.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np


def relaunch(args: list[str]) -> int:
    n = os.environ.get("COMMBENCH_OVERHEAD_RANKS", "4")
    cmd = ["mpirun", "-n", n]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += ["--oversubscribe", sys.executable, __file__, *args]
    return subprocess.call(cmd)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args()
    if "OMPI_COMM_WORLD_SIZE" not in os.environ and "PMI_SIZE" not in os.environ:
        sys.exit(relaunch(sys.argv[1:]))

    from mpi4py import MPI

    from commbench.rank import harness
    from commbench.rank.backends.mpi import MPICommunicator
    from commbench.rank.collectives import COLLECTIVES
    from commbench.dtypes import DTYPES

    comm = MPI.COMM_WORLD
    cb = MPICommunicator(comm)
    coll, dtype = COLLECTIVES["all_reduce"], DTYPES["float32"]
    sizes = [8 << i for i in range(10)]  # 8 B .. 4 KB
    results = {s: ([], []) for s in sizes}

    def bare(size):
        a = np.ones(size // 4, dtype=np.float32)
        b = np.empty_like(a)
        for _ in range(args.warmup):
            comm.Allreduce(a, b, MPI.SUM)
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            comm.Allreduce(a, b, MPI.SUM)
        per_iter = (time.perf_counter() - t0) / args.iters
        return comm.allreduce(per_iter, MPI.MAX) * 1e6

    def commbench_time(size):
        counts = coll.counts(size, dtype.itemsize, comm.size)
        m = harness.measure(cb, coll, counts, dtype, "sum", False, args.warmup, args.iters, 0.1, 5, 1000)
        return float(np.median(m.samples_s)) * 1e6

    for _ in range(args.rounds):
        for size in sizes:
            results[size][0].append(bare(size))
            results[size][1].append(commbench_time(size))
    if comm.rank == 0:
        print(f"# {comm.size} ranks, {args.rounds} rounds x {args.iters} iterations, float32 sum, out-of-place")
        print(f"{'size':>6} {'bare mpi4py (us)':>17} {'commbench (us)':>15} {'overhead':>9}")
        ratios = []
        for size in sizes:
            b, c = (float(np.median(x)) for x in results[size])
            ratios.append(c / b)
            print(f"{size:>6} {b:>17.2f} {c:>15.2f} {100 * (c / b - 1):>8.1f}%")
        print(f"median overhead over sizes: {100 * (np.median(ratios) - 1):.1f}%   max: {100 * (max(ratios) - 1):.1f}%")


if __name__ == "__main__":
    main()
