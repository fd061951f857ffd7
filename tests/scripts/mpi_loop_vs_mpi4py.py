"""Run under mpirun: the C timing loop (commbench/kernels/mpi_loop.c) against mpi4py's own call, on
the harness' buffers as `commbench run` lays them out, byte for byte: every collective with a
C entry x every MPI dtype x op x in place / out of place x sizes that are not multiples of
anything. One call of each (a timed loop repeats it; one shows it is the same call). Rank 0
prints "compared N results, M differ, timer native", the collectives compared (then the first differing cases); the exit
code is 1 if any differ or a point was not timed in C."""

import sys


from commbench.dtypes import DTYPES
from commbench.backends.communicators import open_backend
from commbench.collectives import COLLECTIVES
from commbench.rank.harness import Buffers
from commbench.collectives.patterns import Pattern
from commbench.timers import loop_for

SIZES = [8, 36, 4100, 1 << 20]  # bytes as nccl-tests counts them
OPS = ["sum", "prod", "min", "max"]


def main():
    comm = open_backend("mpi", 0, 0, 0, 60)
    differ, compared, loops, names = [], 0, set(), set()
    for name, coll in COLLECTIVES.items():
        for dtype in (d for d in DTYPES.values()  # MPI has it (either buffer mode: broadcast is in place only)
                      if any(comm.unsupported(name, d, "sum", mode) is None for mode in (False, True))):
            for op in OPS if coll.reduces else [None]:
                for in_place in (False, True):
                    for size in SIZES:
                        counts = coll.counts(size, dtype.itemsize, comm.size)
                        if counts.size_bytes == 0 or comm.unsupported(name, dtype, op, in_place):
                            continue
                        bufs = Buffers(comm, coll, counts, dtype, in_place)
                        fn, out = comm.bind(name, bufs.send, bufs.recv, op, in_place, counts)
                        loop = loop_for(fn, "cpu")
                        loops.add(loop.name)
                        pattern = Pattern(op, dtype, comm.size)
                        bufs.fill(pattern)
                        comm.barrier()
                        loop(fn, 1, 1)
                        got = out.copy()
                        bufs.fill(pattern)
                        comm.barrier()
                        fn()
                        compared += 1
                        names.add(name)
                        if got.tobytes() != out.tobytes():
                            differ.append((name, dtype.name, op, in_place, size))
    differ = sum(comm.allgather_object(differ), [])
    total = sum(comm.allgather_object(compared))
    if comm.rank == 0:
        print(f"compared {total} results, {len(differ)} differ, timer {','.join(sorted(loops))}")
        print(f"collectives {','.join(sorted(names))}")
        for case in differ[:10]:
            print("differs:", case)
    sys.exit(1 if differ or loops != {"native"} else 0)


if __name__ == "__main__":
    main()
