"""Run under mpirun: hierarchical_kernel, bound as the harness binds it, against MPI's own Allreduce,
Reduce_scatter_block and Allgather on the same random integers, byte for byte. Every node layout
of the job's ranks (M nodes of G ranks for every M dividing the world, node by node, and
round-robin where 1 < M < n), in place and out of place, two calls back to back per binding,
several dtypes, ops and counts: one element, counts whose G parts leave a tail, counts cut into
several chunks (a small segment), the all-reduce's chunks both pipelined and in order; then, on two
nodes, blocks across them larger than one unanswered message (a larger segment). Rank 0 prints the reason
the algorithm gives for nodes of unequal sizes ("uneven: ..."), the largest message between two
nodes, then "compared N results in L layouts, D differ" (then the first differing cases); the exit
code is 1 if any differ."""

import sys

import numpy as np
from mpi4py import MPI

from commbench.algorithms import ALGORITHMS, Context
from commbench.backends.communicators import open_backend
from commbench.backends.mpi import MPICommunicator
from forced_chunks import Forced

OPS = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}
CASES = [(d, "sum") for d in ("float32", "float64", "int32", "int64", "int8", "uint8")] + [
    (d, op) for d in ("float32", "int64", "int8") for op in ("prod", "min", "max")] + [("float32", "avg")]
GATHERED = ("float64", "int32", "uint8")
COUNTS = {"all_reduce": (1, 7, 5003), "reduce_scatter": (1, 37), "all_gather": (1, 37)}  # blocks of one rank
SEGMENT = 64  # elements: 5003 elements on G <= 3 ranks make the all-reduce's 8 pipelined chunks
# then, between two nodes, a segment of LARGE_SEGMENT elements and blocks across them of 20,000 (the
# all-reduce: 2 chunks, a tail of 3) or 40,000: more than the library's unanswered message
# (hierarchical.inter_segment)
LARGE_SEGMENT = 32768
ACROSS = {"all_reduce": [("float32", "sum"), ("int64", "max")], "reduce_scatter": [("float32", "sum")],
          "all_gather": [("float64", None)]}


def values(rng, dtype: str, op: str, count: int, world: int) -> np.ndarray:
    if op == "avg":  # multiples of the world: the sum divides exactly (MPI has no avg: its sum / world)
        return values(rng, dtype, "sum", count, world) * np.asarray(world, dtype)
    """Random integers whose reduction over `world` ranks is exact in any order and in range (Open
    MPI's op/avx saturates 8-bit sums where C wraps)."""
    small = dtype in ("int8", "uint8")
    if op == "sum":
        top = (127 if dtype == "int8" else 255) // world if small else 1000
        return rng.integers(0 if dtype == "uint8" else -top, top + 1, count).astype(dtype)
    if op == "prod":
        return rng.choice([-2, -1, 1, 2] if dtype != "uint8" else [1, 2], count).astype(dtype)  # |2^6| fits int8
    low, high = (np.iinfo(dtype).min, np.iinfo(dtype).max + 1) if small else (-(1 << 20), 1 << 20)
    return rng.integers(low, high, count).astype(dtype)


def recorded_isends() -> list[int]:
    """The sizes of the messages MPI sends from here on (every point-to-point message of
    hierarchical_kernel crosses nodes: inside a node its kernels move the data)."""
    sizes, isend = [], MPICommunicator.isend

    def recorded(self, buf, dst, tag=0):
        sizes.append(buf.nbytes)
        return isend(self, buf, dst, tag)

    MPICommunicator.isend = recorded
    return sizes


def layouts(n: int) -> dict[str, list[int]]:
    out = {}
    for m in (m for m in range(1, n + 1) if n % m == 0):
        out[f"{m}x{n // m}"] = [r // (n // m) for r in range(n)]
        if 1 < m < n:
            out[f"{m}x{n // m} round-robin"] = [r % m for r in range(n)]
    return out


def one_case(comm, ctx, algorithm, collective, dtype, op, count, in_place, rng):
    """Bind once, call twice on fresh inputs; the descriptions of the results that differ from MPI's."""
    n, r, world = comm.size, comm.rank, MPI.COMM_WORLD
    in_count = n * count if collective == "reduce_scatter" else count
    out_count = n * count if collective == "all_gather" else count
    send, recv = np.zeros(in_count, dtype), np.zeros(out_count, dtype)
    if in_place:
        if collective == "all_reduce":
            recv = send
        elif collective == "all_gather":
            send = recv[r * count:(r + 1) * count]
        else:
            recv = send[r * count:(r + 1) * count]
    fn, out = algorithm.bind(ctx, collective, send, recv, op, in_place, in_count, out_count)
    differ = []
    for call in range(2):
        data = values(rng, dtype, op or "max", in_count, n)
        send[...] = data
        expected = np.zeros(out_count, dtype)
        if collective == "all_reduce":
            world.Allreduce(data, expected, OPS.get(op, MPI.SUM))
        elif collective == "reduce_scatter":
            world.Reduce_scatter_block(data, expected, OPS.get(op, MPI.SUM))
        else:
            world.Allgather(data, expected)
        if op == "avg":
            expected /= n
        fn()
        if out.view(np.uint8).tobytes() != expected.view(np.uint8).tobytes():
            differ.append(f"{collective} {dtype} {op} count={count} in_place={in_place} "
                          f"pipelined={getattr(algorithm, 'forced', None)} call {call} rank {r}")
    return differ


def main():
    algorithm = ALGORITHMS["hierarchical_kernel"]
    modes = {"all_reduce": (Forced(True), Forced(False))}  # the chunks pipelined, then in order
    comm = open_backend("mpi", 0, 0, 0, 60, threads=algorithm.threads)  # its pipeline crosses the nodes in a thread
    rng = np.random.default_rng(2000 + comm.rank)
    compared, differ, shapes = 0, [], layouts(comm.size)
    uneven = algorithm.unsupported(Context(comm, [0] * (comm.size - 1) + [1]), "all_reduce")
    if comm.rank == 0:
        print(f"uneven: {uneven}", flush=True)
    for i, (name, nodes) in enumerate(shapes.items()):
        ctx = Context(comm, nodes, segment_elems=SEGMENT, timeout_s=60.0, channels=2 if i % 2 else None)
        assert algorithm.unsupported(ctx, "all_reduce") is None, algorithm.unsupported(ctx, "all_reduce")
        for collective, counts in COUNTS.items():
            cases = [(d, None) for d in GATHERED] if collective == "all_gather" else CASES
            for dtype, op in cases:
                for count, mode in ((c, m) for c in counts for m in modes.get(collective, (algorithm,))):
                    for in_place in (True, False):
                        differ += [f"{name}: {d}" for d in one_case(comm, ctx, mode, collective, dtype, op,
                                                                    count, in_place, rng)]
                        compared += 2
    two_nodes = [(name, nodes) for name, nodes in shapes.items() if len(set(nodes)) == 2]
    sizes = recorded_isends()
    for name, nodes in two_nodes:
        ctx = Context(comm, nodes, segment_elems=LARGE_SEGMENT, timeout_s=60.0)
        for collective, cases in ACROSS.items():
            count = 40_000 * (comm.size if collective == "all_reduce" else 1) + (collective == "all_reduce") * 3
            for dtype, op in cases:
                for mode in modes.get(collective, (algorithm,)):
                    differ += [f"{name} (large): {d}" for d in one_case(comm, ctx, mode, collective, dtype, op, count,
                                                                         False, rng)]
                    compared += 2
    largest = MPI.COMM_WORLD.allreduce(max(sizes, default=0), op=MPI.MAX)
    if comm.rank == 0:
        print(f"between two nodes: {len(two_nodes)} layouts, the largest message {largest} bytes", flush=True)
    everyone = MPI.COMM_WORLD.gather((compared, differ), root=0)
    if comm.rank == 0:
        bad = [d for _, ds in everyone for d in ds]
        print(f"compared {sum(c for c, _ in everyone)} results in {len(shapes)} layouts, {len(bad)} differ",
              *bad[:10], sep="\n", flush=True)
        sys.exit(1 if MPI.COMM_WORLD.bcast(bool(bad), root=0) else 0)
    sys.exit(1 if MPI.COMM_WORLD.bcast(None, root=0) else 0)


if __name__ == "__main__":
    main()
