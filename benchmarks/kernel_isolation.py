"""ring_kernel and tree_kernel against the MPI library's call, both loops in one process (issue 16).

    python benchmarks/kernel_isolation.py                  # latency (2 ranks) and busbw (2 and 4 ranks)
    python benchmarks/kernel_isolation.py --quick          # fewer sizes and rounds

benchmarks/kernels_vs_native.py runs each algorithm's points in turn inside a commbench job, so
native and ring_kernel meet this VM's slow periods (seconds when the cores' cache-to-cache path
is 2-4x slower: benchmarks/stream_handoff.c) at different times, and one size's ratio can be 4x
off either way. Here every rank is one process holding both loops, each on the buffers a
commbench point gives it (the kernels' in the node's shared memory: NodeKernels.allocator):
native (commbench's C loop around the MPI call, commbench.kernels.mpi_loop, what times a `native`
point) and the host build of cuda/collectives.cu's kernels with their own C loop (the one that
times a ring_kernel / tree_kernel point), bound as commbench.kernels.node binds them
(automatic channels, float32 sum, out of place). Each kernel is paired with native alone: rounds
alternate which of the two goes first, and a ratio is the median over rounds of the two loops'
block medians in that round (loop_isolation.paired_rounds / paired_ratio: adjacent blocks, so
drifts cancel).

Targets (issue 16), each judged on its worst size:
  latency  2 ranks, all-reduce 8 B - 4 KB: ring_kernel and tree_kernel / native <= 1.5
  busbw    2 and 4 ranks, all three collectives, 1 - 64 MB: ring_kernel busbw / native busbw >= 1.0
           (busbw ratio = native time / ring_kernel time: both move the same bytes)
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import numpy as np
from kernels_vs_native import BUSBW_SIZES, BUSBW_TARGET, LATENCY_SIZES, LATENCY_TARGET, QUICK  # the targets' owner
from loop_isolation import BATCH, CALLS, buffers, paired_ratio, paired_rounds  # puts the repo on sys.path
from overhead_mpi import mpirun

CONFIGS = {"latency": (["all_reduce"], ["ring_kernel", "tree_kernel"]),
           "busbw": (list(CALLS), ["ring_kernel"])}
TIMEOUT_S = 60.0  # a kernel wait's limit (a peer that died)


def _comm(comm):
    """What commbench.kernels.node.NodeKernels and harness.Buffers ask of a communicator, over
    mpi4py's (numpy buffers, as the MPI backend's)."""
    from commbench.backends.base import NumpyBuffers

    class Comm(NumpyBuffers):
        device = "cpu"

        def __init__(self):
            self.rank, self.size = comm.rank, comm.size

        def allgather_object(self, value):
            return comm.allgather(value)

        def barrier(self) -> None:
            comm.Barrier()
    return Comm()


def rank_main(config: str, sizes: list[int], rounds: int, samples: int) -> None:
    from mpi4py import MPI

    from commbench.dtypes import DTYPES
    from commbench.kernels import abi as kernel_abi
    from commbench.collectives import COLLECTIVES
    from commbench.rank.harness import Buffers
    from commbench.kernels.node import NodeKernels
    from commbench.kernels.mpi_loop import bind_loop

    comm = MPI.COMM_WORLD
    node = NodeKernels(_comm(comm), "cpu", TIMEOUT_S, kernel_abi.MAX_AUTO_CHANNELS["cpu"])
    notes = []
    collectives, algorithms = CONFIGS[config]
    rows = []
    for collective in collectives:
        for size in sizes:
            # each loop on the buffers a commbench point gives it: native the communicator's, the
            # kernels the node's shared memory (NodeKernels.allocator), laid out by harness.Buffers
            counts = COLLECTIVES[collective].counts(size, 4, comm.size)
            bufs = Buffers(node.comm, COLLECTIVES[collective], counts, DTYPES["float32"], False, node.allocator(notes))
            send, recv = bufs.send, bufs.recv
            send[:] = 1.0
            own_send, own_recv, _ = buffers(collective, size, comm.size)
            batch = BATCH if size <= 1 << 16 else 1
            native = bind_loop(comm, CALLS[collective], own_send, own_recv,
                               None if collective == "all_gather" else MPI.SUM, False)
            if native is None:
                sys.exit(f"commbench has no C loop for {CALLS[collective]}")
            kernel_count = {"all_reduce": counts.in_count, "reduce_scatter": counts.out_count,
                            "all_gather": counts.in_count * 4}[collective]  # all-gather: bytes of a rank's block
            channels = node.call_channels(max(send.nbytes, recv.nbytes), None)
            for algorithm in algorithms:  # each kernel paired with native alone: their blocks adjacent
                name = kernel_abi.entry(algorithm.removesuffix("_kernel"), collective, "float32", "sum")
                run = node.bind(name, "float32", send, recv, kernel_count, channels, direct=True)
                times = paired_rounds(comm, {"native": lambda n: native(None, n, batch),
                                             algorithm: lambda n, loop=run.timer: loop(None, n, batch)}, rounds, samples)
                med = {name: float(np.median(np.concatenate(t))) * 1e6 for name, t in times.items()}
                ratio = (paired_ratio(times, algorithm, "native") if config == "latency"
                         else paired_ratio(times, "native", algorithm))
                rows.append((collective, size, algorithm, med["native"], med[algorithm], ratio))
    node.close()
    if comm.rank != 0:
        return
    for note in dict.fromkeys(notes):  # the kernels' buffers could not be shared, say
        print(f"# note: {note}")
    what = "kernel / native time" if config == "latency" else "kernel busbw / native busbw"
    print(f"# {config}: {comm.size} ranks, float32 sum out of place, {channels} channel(s) at the largest size; "
          f"{rounds} rounds x {samples} samples a loop; µs = median sample; ratio = {what}, paired per round")
    print(f"{'collective':<15}{'size':>10} {'algorithm':<12}{'native':>11}{'kernel':>11}{'ratio':>8}")
    for collective, size, algorithm, n_us, k_us, ratio in rows:
        print(f"{collective:<15}{size:>10} {algorithm:<12}{n_us:>11.3f}{k_us:>11.3f}{ratio:>8.3f}")
    for algorithm in algorithms:
        ratios = [r[-1] for r in rows if r[2] == algorithm]
        if config == "latency":
            ok = max(ratios) <= LATENCY_TARGET
            print(f"{comm.size} ranks, {algorithm} latency / native, 8 B - 4 KB: median {np.median(ratios):.3f}, "
                  f"worst {max(ratios):.3f} (target <= {LATENCY_TARGET}) -> {'PASS' if ok else 'FAIL'}")
        else:
            ok = min(ratios) >= BUSBW_TARGET
            print(f"{comm.size} ranks, {algorithm} busbw / native, 1 - 64 MB: median {np.median(ratios):.3f}, "
                  f"worst {min(ratios):.3f} (target >= {BUSBW_TARGET}) -> {'PASS' if ok else 'FAIL'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes, 8 rounds")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--samples", type=int, default=5, help="samples per block")
    ap.add_argument("--only", choices=list(CONFIGS), help="one configuration")
    ap.add_argument("--rank-of", choices=list(CONFIGS), help=argparse.SUPPRESS)  # set in the ranks
    ap.add_argument("--sizes", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank_of:
        rank_main(args.rank_of, [int(s) for s in args.sizes.split(",")], args.rounds, args.samples)
        return
    rounds = 8 if args.quick else args.rounds
    failed = 0
    for config in [args.only] if args.only else list(CONFIGS):
        sizes = QUICK[config] if args.quick else (LATENCY_SIZES if config == "latency" else BUSBW_SIZES)
        for ranks in [2] if config == "latency" else [2, 4]:
            command = [*mpirun(ranks), sys.executable, __file__, "--rank-of", config, "--sizes",
                       ",".join(map(str, sizes)), "--rounds", str(rounds), "--samples", str(args.samples)]
            failed |= subprocess.run(command).returncode
    sys.exit(failed)


if __name__ == "__main__":
    main()
