"""MPI through mpi4py, on numpy buffers (CPU)."""

from __future__ import annotations

import os
from functools import partial

import numpy as np
from mpi4py import MPI

from commbench.collectives.all_to_allv import layout
from commbench.dtypes import DType
from commbench.kernels import mpi_loop
from commbench.backends.base import Communicator, Convention, NumpyBuffers, Request
from commbench.kernels.reducers import NumpyReducer

_OPS = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}
THREAD_LEVELS = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled", MPI.THREAD_SERIALIZED: "serialized",
                 MPI.THREAD_MULTIPLE: "multiple"}


def _call(fn, send, recv, in_place, *op):
    """fn(sendbuf, recvbuf, *op). In place, MPI takes MPI_IN_PLACE and one buffer (the larger of
    send and recv: the harness lays the other out inside it), reads the input where the harness
    put it and leaves the result at the buffer's start (reduce-scatter's block too)."""
    if not in_place:
        return partial(fn, send, recv, *op), recv
    whole = send if len(send) >= len(recv) else recv
    return partial(fn, MPI.IN_PLACE, whole, *op), whole[:len(recv)]


def _rooted(comm, fn, send, recv, op, in_place, root, at_root, elsewhere):
    """A rooted call in place: MPI_IN_PLACE at the root only (at_root(whole)), the others' arguments
    as MPI takes them from a rank not the root (elsewhere(send, recv, whole))."""
    whole = send if len(send) >= len(recv) else recv
    args = at_root(whole) if comm.rank == root else elsewhere(send, recv, whole)
    return partial(fn, *args, *op, root=root), recv  # (scatter's: the rank's block, where the harness laid it)


# the calling conventions of the mpi4py calls the collectives declare (Collective.native["mpi"]); in
# place, the harness' one buffer (harness.Buffers) as MPI takes it, MPI_IN_PLACE where MPI has it
CONVENTIONS = {
    "send_recv_op": Convention(lambda comm, fn, send, recv, op, in_place, counts:
                               _call(fn, send, recv, in_place, _OPS[op])),
    "send_recv": Convention(lambda comm, fn, send, recv, op, in_place, counts: _call(fn, send, recv, in_place)),
    # Bcast(buf, root): one buffer, in and out
    "bcast": Convention(lambda comm, fn, send, recv, op, in_place, counts: (partial(fn, recv, root=counts.root), recv),
                        out_of_place=False),
    # Reduce(send, recv, op, root): in place the root reduces into its one buffer, the others send theirs
    "reduce_op": Convention(lambda comm, fn, send, recv, op, in_place, counts:
                            (partial(fn, send, recv, _OPS[op], root=counts.root), recv) if not in_place else
                            _rooted(comm, fn, send, recv, (_OPS[op],), True, counts.root,
                                    lambda whole: (MPI.IN_PLACE, whole), lambda s, r, whole: (whole, None))),
    # Gather(send, recv, root): in place the root's own block is already at its place in the output
    "gather": Convention(lambda comm, fn, send, recv, op, in_place, counts:
                         (partial(fn, send, recv, root=counts.root), recv) if not in_place else
                         _rooted(comm, fn, send, recv, (), True, counts.root,
                                 lambda whole: (MPI.IN_PLACE, whole), lambda s, r, whole: (s, None))),
    # Scatter(send, recv, root): in place the root keeps its own block where it is in the input
    "scatter": Convention(lambda comm, fn, send, recv, op, in_place, counts:
                          (partial(fn, send, recv, root=counts.root), recv) if not in_place else
                          _rooted(comm, fn, send, recv, (), True, counts.root,
                                  lambda whole: (whole, MPI.IN_PLACE), lambda s, r, whole: (None, r))),
    # Sendrecv to rank r+1 from rank r-1; in place Sendrecv_replace on the one buffer
    "sendrecv": Convention(lambda comm, fn, send, recv, op, in_place, counts: _ring_pair(comm, fn, send, recv, in_place)),
    # Alltoallv([send, (counts, displacements)], [recv, (counts, displacements)]): the blocks Counts.peers sizes
    "v": Convention(lambda comm, fn, send, recv, op, in_place, counts: _uneven(comm, fn, send, recv, counts)),
}


def _uneven(comm, fn, send, recv, counts):
    sent, sent_at, got, got_at = layout(counts.peers, comm.rank)
    return partial(fn, [send, (sent, sent_at)], [recv, (got, got_at)]), recv


def _ring_pair(comm, fn, send, recv, in_place):
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    if in_place:
        return partial(comm.comm.Sendrecv_replace, recv, dest=right, source=left), recv
    return partial(fn, send, dest=right, recvbuf=recv, source=left), recv


class _MPIRequest(Request):
    def __init__(self, req):
        self._req = req

    def wait(self):
        self._req.Wait()


def open_mpi_unanswered() -> int | None:
    """Open MPI's TCP transport sends a message larger than its eager limit (btl_tcp_eager_limit, 64 KiB
    with the headers, or OMPI_MCA_btl_tcp_eager_limit) only once the receiver has answered, and queues
    the message's data on the connection whole: in an exchange both ways over one connection a rank's
    answer can wait behind its own message, and the two cross one after the other (docs, Emulated
    cluster). The largest message it sends unanswered: the limit less room for the headers, 4 KiB
    (None under another MPI)."""
    if not mpi_loop.library_version().startswith("Open MPI"):
        return None
    given = os.environ.get("OMPI_MCA_btl_tcp_eager_limit", "")
    limit = int(given) if given.isdigit() and int(given) > 0 else 64 << 10
    return limit - min(4 << 10, limit // 2)


class MPICommunicator(NumpyBuffers, Communicator):
    backend = "mpi"
    library, library_title, conventions = "mpi", "MPI", CONVENTIONS
    unanswered_message_bytes = open_mpi_unanswered()

    def __init__(self, comm=None):
        self.comm = self.native_target = comm if comm is not None else MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.reducer = NumpyReducer()
        self.notes: list[str] = []

    def unsupported(self, collective, dtype: DType, op, in_place, native=True):
        if dtype.numpy_name is None:
            return f"MPI has no {dtype.name} datatype"
        if op == "avg" and not dtype.is_float:
            return "avg of integers truncates; commbench checks avg on floating-point types only"
        if native and op is not None and op not in _OPS:
            return f"MPI has no {op} reduction"
        return super().unsupported(collective, dtype, op, in_place, native)

    def bind(self, collective, send, recv, op, in_place, counts=None):
        """The library's call, carrying the C loop that times it (commbench.kernels.mpi_loop) where
        there is one; where the loop cannot be built, the Python loop times it and a note says why."""
        fn, out = super().bind(collective, send, recv, op, in_place, counts)
        try:
            fn.timer = mpi_loop.bind_loop(self.comm, self.native_call(collective)[0].name, send, recv,
                                          _OPS.get(op), in_place, counts.root if counts else 0,
                                          None if counts is None or counts.peers is None
                                          else layout(counts.peers, self.comm.rank))
        except mpi_loop.LoopUnavailable as exc:
            note = f"{exc}: native MPI points are timed by the Python loop (timer column: python)"
            if note not in self.notes:
                self.notes.append(note)
        return fn, out

    def barrier(self):
        self.comm.Barrier()

    def idle_barrier(self, nap_s=0.0005):
        import time

        request = self.comm.Ibarrier()
        while not request.Test():
            time.sleep(nap_s)

    def reduce_host(self, values, op):
        out = np.empty_like(values, dtype=np.float64)
        self.comm.Allreduce(np.ascontiguousarray(values, dtype=np.float64), out, MPI.MAX if op == "max" else MPI.SUM)
        return out

    def allgather_object(self, obj):
        return self.comm.allgather(obj)

    def isend(self, buf, dst, tag=0):
        return _MPIRequest(self.comm.Isend(buf, dest=dst, tag=tag))

    def irecv(self, buf, src, tag=0):
        return _MPIRequest(self.comm.Irecv(buf, source=src, tag=tag))

    def sendrecv(self, sendbuf, dst, recvbuf, src, tag=0):
        self.comm.Sendrecv(sendbuf, dest=dst, sendtag=tag, recvbuf=recvbuf, source=src, recvtag=tag)

    def split(self, color, key):
        return MPICommunicator(self.comm.Split(color, key))

    def library_info(self):
        import mpi4py

        return {
            "mpi4py": mpi4py.__version__,
            "mpi_library": mpi_loop.library_version().splitlines()[0],
            "mpi_standard": "%d.%d" % MPI.Get_version(),
            "mpi_thread_level": THREAD_LEVELS.get(MPI.Query_thread(), str(MPI.Query_thread())),
        }
