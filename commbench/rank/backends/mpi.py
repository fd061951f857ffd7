"""MPI through mpi4py, on numpy buffers (CPU)."""

from __future__ import annotations

from functools import partial

import numpy as np
from mpi4py import MPI

from commbench.dtypes import DType
from commbench.rank import mpi_loop
from commbench.rank.backends.base import Communicator, Convention, NumpyBuffers, Request
from commbench.rank.reducers import NumpyReducer

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


# the calling conventions of the mpi4py calls the collectives declare (Collective.native["mpi"])
CONVENTIONS = {
    "send_recv_op": Convention(lambda comm, fn, send, recv, op, in_place: _call(fn, send, recv, in_place, _OPS[op])),
    "send_recv": Convention(lambda comm, fn, send, recv, op, in_place: _call(fn, send, recv, in_place)),
}


class _MPIRequest(Request):
    def __init__(self, req):
        self._req = req

    def wait(self):
        self._req.Wait()


class MPICommunicator(NumpyBuffers, Communicator):
    backend = "mpi"
    library, library_title, conventions = "mpi", "MPI", CONVENTIONS

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

    def bind(self, collective, send, recv, op, in_place):
        """The library's call, carrying the C loop that times it (commbench.rank.mpi_loop) where
        there is one; where the loop cannot be built, the Python loop times it and a note says why."""
        fn, out = super().bind(collective, send, recv, op, in_place)
        try:
            fn.timer = mpi_loop.bind_loop(self.comm, self.native_call(collective)[0].name, send, recv,
                                          _OPS.get(op), in_place)
        except mpi_loop.LoopUnavailable as exc:
            note = f"{exc}: native MPI points are timed by the Python loop (timer column: python)"
            if note not in self.notes:
                self.notes.append(note)
        return fn, out

    def barrier(self):
        self.comm.Barrier()

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
