"""Run under mpirun: ring_kernel's and tree_kernel's all-reduce (commbench/kernels/abi.py's
NodeKernels on the job's /dev/shm segment) against MPI's own Allreduce on the same random integer
data, byte for byte, for several dtypes, ops, sizes and channels. Rank 0 prints one line:
"compared N results, M differ" (then the first differing cases); the exit code is 1 if any differ."""

import sys

import numpy as np
from mpi4py import MPI

from commbench.kernels import node as kernel_node
from commbench.kernels import abi as kernel_abi
from commbench.backends.communicators import open_backend

OPS = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}
DTYPES = ["float32", "float64", "int32", "int64", "int8", "uint8"]
COUNTS = [1, 5, 4099, 70001]


def values(rng, dtype, op, count):
    """Random integers whose reduction is exact in any order and never overflows (at most 4
    ranks): Open MPI's op/avx saturates 8-bit sums where C (and the kernels) wrap."""
    if dtype in ("int8", "uint8"):
        if op == "sum":
            return rng.integers(-31 if dtype == "int8" else 0, 32, count).astype(dtype)
        if op == "prod":
            return rng.choice([-3, -1, 0, 1, 2, 3] if dtype == "int8" else [0, 1, 2, 3], count).astype(dtype)
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max + 1, count).astype(dtype)
    if op == "prod":
        return rng.choice([-2, -1, 1, 2], count).astype(dtype)
    if op == "sum":
        return rng.integers(-1000, 1001, count).astype(dtype)
    return rng.integers(-(1 << 20), 1 << 20, count).astype(dtype)


def main():
    comm = open_backend("mpi", 0, 0, 0, 60)
    assert comm.size <= 4, "values() keeps 8-bit sums and products in range for at most 4 ranks"
    node = kernel_node.NodeKernels(comm, "cpu", 30.0, 3)
    rng = np.random.default_rng(1000 + comm.rank)
    compared, differ = 0, []
    for algorithm in ("ring", "tree"):
        for dtype in DTYPES:
            for op in OPS:
                for count in COUNTS:
                    for channels in (1, 3):
                        send = values(rng, dtype, op, count)
                        ours, theirs = np.zeros_like(send), np.zeros_like(send)
                        node.bind(kernel_abi.entry(algorithm, "all_reduce", dtype, op), dtype, send, ours, count,
                                  channels)()
                        MPI.COMM_WORLD.Allreduce(send, theirs, OPS[op])
                        compared += 1
                        if ours.view(np.uint8).tobytes() != theirs.view(np.uint8).tobytes():
                            differ.append(f"{algorithm} {dtype} {op} count={count} channels={channels} rank {comm.rank}")
    node.close()
    everyone = MPI.COMM_WORLD.gather((compared, differ), root=0)
    if comm.rank == 0:
        total = sum(c for c, _ in everyone)
        bad = [d for _, ds in everyone for d in ds]
        print(f"compared {total} results, {len(bad)} differ", *bad[:10], sep="\n", flush=True)
        MPI.COMM_WORLD.bcast(bool(bad), root=0)
        sys.exit(1 if bad else 0)
    sys.exit(1 if MPI.COMM_WORLD.bcast(None, root=0) else 0)


if __name__ == "__main__":
    main()
