"""Run under mpirun: every own algorithm once per collective, node layout and size, counting the
elements each rank really sends (isend / sendrecv, sub-communicators included), and print one
JSON line per case from rank 0: counted vs Algorithm.messages(). hierarchical_kernel runs twice, its
all-reduce's chunks pipelined and in order (the same messages either way)."""

import json
import sys
from collections import Counter

from commbench.dtypes import DTYPES
from commbench.algorithms import ALGORITHMS, Context
from commbench.backends.communicators import open_backend
from commbench.collectives import COLLECTIVES
from commbench.machine.traffic import block_elems
from forced_chunks import Forced


def counting(comm, to_global, log):
    isend, sendrecv, split = comm.isend, comm.sendrecv, comm.split

    def counted_isend(buf, dst, tag=0):
        log[(to_global[comm.rank], to_global[dst])] += len(buf)
        return isend(buf, dst, tag)

    def counted_sendrecv(sendbuf, dst, recvbuf, src, tag=0):
        log[(to_global[comm.rank], to_global[dst])] += len(sendbuf)
        return sendrecv(sendbuf, dst, recvbuf, src, tag)

    def counted_split(color, key):
        sub = split(color, key)
        return counting(sub, sub.allgather_object(to_global[comm.rank]), log)

    comm.isend, comm.sendrecv, comm.split = counted_isend, counted_sendrecv, counted_split
    return comm


def main():
    comm = open_backend("mpi", 0, 0, 0, 60, threads=True)  # hierarchical's pipeline calls MPI from threads
    n, dtype, log = comm.size, DTYPES["float32"], Counter()
    counted_comm = counting(open_backend("mpi", 0, 0, 0, 60).split(0, comm.rank), list(range(n)), log)
    layouts = {"block": [r * 2 // n for r in range(n)], "round-robin": [r % 2 for r in range(n)]}
    if n % 3 == 0:  # a ring of 3 nodes: how each block is cut into M shows in what crosses them (not with 2)
        layouts["3 nodes"] = [r * 3 // n for r in range(n)]
    for layout_name, nodes in layouts.items():
        variants = [(name, a) for name, a in ALGORITHMS.items() if name != "hierarchical_kernel"]
        for name, algo in variants + [("hierarchical_kernel", Forced(p)) for p in (True, False)]:
            ctx = Context(comm, nodes, segment_elems=7)
            for coll_name, coll in COLLECTIVES.items():
                if algo.unsupported(ctx, coll_name):
                    continue
                for size in (4 * n * 5, 4 * (n * 5 + 3), 4 * (n * 70 + 5)):  # even and uneven blocks, pipeline chunks
                    counts = coll.counts(size, dtype.itemsize, n)
                    log.clear()
                    ctx = Context(counted_comm, nodes, segment_elems=7, peers=counts.peers)  # (all_to_allv's blocks)
                    send, recv = comm.alloc(counts.in_count, dtype), comm.alloc(counts.out_count, dtype)
                    fn, _ = algo.bind(ctx, coll_name, send, recv, "sum", False, counts.in_count, counts.out_count)
                    fn()
                    logs = comm.allgather_object(dict(log))
                    if comm.rank == 0:
                        counted = Counter()
                        for one in logs:
                            counted.update(one)
                        uneven = {} if counts.peers is None else {"peers": counts.peers}
                        expected = algo.messages(coll_name, block_elems(coll_name, counts), nodes, 7, **uneven)
                        if algo.engine != "steps":  # a kernel moves the intra-node data through the node's memory
                            expected = Counter({e: v for e, v in expected.items() if nodes[e[0]] != nodes[e[1]]})
                        mode = f" pipelined={algo.forced}" if isinstance(algo, Forced) else ""
                        print(json.dumps({"case": f"{name} {coll_name} n={n} {layout_name} count={counts.count}{mode}",
                                          "counted": sorted(map(list, ((*k, v) for k, v in counted.items() if v))),
                                          "expected": sorted(map(list, ((*k, v) for k, v in expected.items() if v)))}))
                    comm.barrier()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
