"""MPI through mpi4py, on numpy buffers (CPU)."""

from __future__ import annotations

from functools import partial

import numpy as np
from mpi4py import MPI

from commbench.rank.backends.base import Communicator, NumpyBuffers, Request
from commbench.dtypes import DType
from commbench.rank.reducers import NumpyReducer

_OPS = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}


class _MPIRequest(Request):
    def __init__(self, req):
        self._req = req

    def wait(self):
        self._req.Wait()


class MPICommunicator(NumpyBuffers, Communicator):
    backend = "mpi"

    def __init__(self, comm=None):
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.reducer = NumpyReducer()

    def unsupported(self, collective, dtype: DType, op, in_place, native=True):
        if dtype.numpy_name is None:
            return f"MPI has no {dtype.name} datatype"
        if op == "avg" and not dtype.is_float:
            return "avg of integers truncates; commbench checks avg on floating-point types only"
        if native and op is not None and op not in _OPS:
            return f"MPI has no {op} reduction"
        return None

    def bind(self, collective, send, recv, op, in_place):
        c = self.comm
        if collective == "all_reduce":
            return partial(c.Allreduce, MPI.IN_PLACE if in_place else send, recv, _OPS[op]), recv
        if collective == "all_gather":
            return partial(c.Allgather, MPI.IN_PLACE if in_place else send, recv), recv
        if collective == "reduce_scatter":
            if in_place:  # MPI leaves the result at the start of the buffer
                return partial(c.Reduce_scatter_block, MPI.IN_PLACE, send, _OPS[op]), send[:len(recv)]
            return partial(c.Reduce_scatter_block, send, recv, _OPS[op]), recv
        raise ValueError(f"mpi backend has no collective {collective!r}")

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
            "mpi_library": MPI.Get_library_version().strip().splitlines()[0],
            "mpi_standard": "%d.%d" % MPI.Get_version(),
        }
