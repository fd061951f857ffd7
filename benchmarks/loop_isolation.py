"""Does commbench's C timing loop change what is measured? (issue 18)

    python benchmarks/loop_isolation.py                 # 2 ranks, 8 B - 4 KB and 1 - 16 MB, 20 rounds
    python benchmarks/loop_isolation.py --ranks 4 --rounds 40

benchmarks/overhead_mpi.py compares separate processes (whole commbench jobs against a C program):
on this VM whole jobs, and periods of seconds, run 1.5-4x faster or slower (the cores'
cache-to-cache path; Open MPI's large calls also with the process's allocation history), so that
ratio measures the jobs as much as the loops. Here every rank is one process that holds both
loops and one set of buffers (numpy arrays, as commbench allocates them): commbench's loop
(commbench.kernels.mpi_loop.bind_loop, what times a `native` MPI point) and the C reference's
(benchmarks/reference_mpi.c built as a library). Per collective and size: a warm-up, then ROUNDS
rounds of one block of SAMPLES samples by each loop, the loop that goes first alternating, so a
drift of the machine lands on both alike; a sample is a batch (BATCH calls up to 64 KB, one call
above) and is the maximum over ranks; the figure per loop is the median sample, and the ratio the
median over rounds of commbench's block median / the reference's (adjacent blocks: drifts cancel).
Targets (issue 18): 8 B - 4 KB median ratio <= 1.05 and worst <= 1.15; >= 1 MB within 1.00 +- 0.05.
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from overhead_mpi import LARGE, SMALL, build_reference, mpirun  # the same C reference, sizes and launch; puts the repo on sys.path

from commbench.collectives import COLLECTIVES

SIZES = SMALL + LARGE
BATCH = 100  # calls per sample up to 64 KB
# the collectives reference_mpi.c times, and the mpi4py function each calls (commbench's C loop's entry)
CALLS = {name: COLLECTIVES[name].native["mpi"].function for name in ("all_reduce", "all_gather", "reduce_scatter")}
WARMUP = 5


def buffers(collective: str, size: int, n: int) -> tuple[np.ndarray, np.ndarray, int]:
    """send, recv (float32, as nccl-tests counts size) and the reference's per-rank count."""
    elems = size // 4
    part = elems // n
    send = np.zeros(part if collective == "all_gather" else elems, np.float32)
    recv = np.zeros(part if collective == "reduce_scatter" else elems, np.float32)
    send[:] = 1.0
    return send, recv, elems if collective == "all_reduce" else part


def paired_rounds(comm, loops: dict, rounds: int, samples: int) -> dict[str, list[np.ndarray]]:
    """Each loop (samples -> seconds per call, one per sample) warmed up, then `rounds` rounds of one
    block of `samples` samples by every loop in turn, the order rotating from round to round so a
    drift of the machine lands on all alike; a sample is the maximum over ranks. Per loop, its
    blocks in round order."""
    from mpi4py import MPI

    names = list(loops)
    for name in names:
        loops[name](WARMUP)
    times: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            comm.Barrier()
            local = loops[name](samples)
            worst = np.empty_like(local)
            comm.Allreduce(local, worst, op=MPI.MAX)
            times[name].append(worst)
    return times


def paired_ratio(times: dict[str, list[np.ndarray]], a: str, b: str) -> float:
    """The median over rounds of loop a's block median / loop b's (blocks of one round are
    adjacent in time: a drift slower than a round cancels)."""
    return float(np.median([np.median(x) / np.median(y) for x, y in zip(times[a], times[b], strict=True)]))


def rank_main(lib_path: str, sizes: list[int], rounds: int, samples: int) -> None:
    from mpi4py import MPI

    from commbench.kernels.mpi_loop import bind_loop

    comm = MPI.COMM_WORLD
    ref = ctypes.CDLL(lib_path)
    ref.ref_time.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                             ctypes.c_int, ctypes.POINTER(ctypes.c_double)]
    rows = []
    for collective, function in CALLS.items():
        for size in sizes:
            send, recv, count = buffers(collective, size, comm.size)
            ours = bind_loop(comm, function, send, recv, MPI.SUM if collective != "all_gather" else None, False)
            if ours is None:
                sys.exit(f"commbench has no C loop for {function}")

            def reference(n: int) -> np.ndarray:
                out = (ctypes.c_double * n)()
                ref.ref_time(collective.encode(), send.ctypes.data, recv.ctypes.data, count, n, batch, out)
                return np.frombuffer(out, dtype=np.float64).copy()

            batch = BATCH if size <= 1 << 16 else 1
            times = paired_rounds(comm, {"commbench": lambda n: ours(None, n, batch), "reference": reference},
                                  rounds, samples)
            med = {name: float(np.median(np.concatenate(t))) * 1e6 for name, t in times.items()}
            paired = paired_ratio(times, "commbench", "reference")
            rows.append((collective, size, med["reference"], med["commbench"], paired))
    if comm.rank == 0:
        print(f"# {comm.size} ranks, float32 sum out of place; {rounds} rounds x {samples} samples a loop, "
              f"one process a rank; µs = median sample; ratio = median over rounds of the round's two block medians")
        print(f"{'collective':<15}{'size':>10}{'reference':>11}{'commbench':>11}{'ratio':>8}")
        small, large = [], []
        for collective, size, r, c, ratio in rows:
            (small if size <= SMALL[-1] else large).append(ratio)
            print(f"{collective:<15}{size:>10}{r:>11.3f}{c:>11.3f}{ratio:>8.3f}")
        if small:
            ok = np.median(small) <= 1.05 and max(small) <= 1.15
            print(f"8 B - 4 KB, loops in one process: commbench/reference median {np.median(small):.3f} (target <= 1.05), "
                  f"worst {max(small):.3f} (target <= 1.15) -> {'PASS' if ok else 'FAIL'}")
        if large:
            ok = 0.95 <= min(large) and max(large) <= 1.05
            print(f">= 1 MB, loops in one process: commbench/reference {min(large):.3f} .. {max(large):.3f} "
                  f"(target 0.95 .. 1.05) -> {'PASS' if ok else 'FAIL'}")

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--samples", type=int, default=5, help="samples per block")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="bytes, comma-separated")
    ap.add_argument("--rank-of", help=argparse.SUPPRESS)  # set in the ranks: the reference library
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.rank_of:
        rank_main(args.rank_of, sizes, args.rounds, args.samples)
        return
    with tempfile.TemporaryDirectory() as tmp:
        lib = build_reference(Path(tmp), library=True)
        command = [*mpirun(args.ranks), sys.executable, __file__, "--rank-of", str(lib), "--sizes", args.sizes,
                   "--rounds", str(args.rounds), "--samples", str(args.samples)]
        sys.exit(subprocess.run(command).returncode)


if __name__ == "__main__":
    main()
