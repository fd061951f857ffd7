"""torch.distributed: gloo on CPU tensors, NCCL on CUDA tensors; gloo with CUDA tensors too, for
the peer algorithms only (their data never goes through the library, and NCCL refuses several
ranks on one GPU, which is how a one-GPU machine runs them).

The process group is created from the usual environment (MASTER_ADDR, MASTER_PORT) with the
rank and world size commbench's topology found; `commbench.rank.worker` fills MASTER_* in first
when the launcher did not (mpirun, srun).
"""

from __future__ import annotations

import os
import platform
from datetime import timedelta
from functools import partial

import numpy as np
import torch
import torch.distributed as dist

from commbench.backends import LOCAL_STORE_ENV
from commbench.backends.registration import NONE
from commbench.dtypes import DType
from commbench.backends.base import Communicator, Convention, Request, Requests
from commbench.collectives import COLLECTIVES, NativeCall
from commbench.collectives.all_to_allv import layout
from commbench.kernels.reducers import TorchReducer, gpu_reducer

_OPS = {
    "sum": dist.ReduceOp.SUM,
    "prod": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
    "avg": dist.ReduceOp.AVG,
}

# the calling conventions of the torch.distributed calls the collectives declare
# (Collective.native["torch"]); in place, recv and send share one tensor as harness.Buffers lays it out
# (torch.distributed names ranks by their global rank: a root is comm.ranks[counts.root])
CONVENTIONS = {
    "tensor_op": Convention(  # fn(tensor, op): one tensor, input and output
        lambda comm, fn, send, recv, op, in_place, counts: (partial(fn, recv, _OPS[op], group=comm.group), recv),
        out_of_place=False),
    "output_input": Convention(
        lambda comm, fn, send, recv, op, in_place, counts: (partial(fn, recv, send, group=comm.group), recv)),
    "output_input_op": Convention(
        lambda comm, fn, send, recv, op, in_place, counts: (partial(fn, recv, send, _OPS[op], group=comm.group), recv)),
    "tensor_root": Convention(  # broadcast(tensor, src): one tensor
        lambda comm, fn, send, recv, op, in_place, counts: (partial(fn, recv, comm.ranks[counts.root], group=comm.group), recv),
        out_of_place=False),
    "tensor_root_op": Convention(  # reduce(tensor, dst, op): one tensor
        lambda comm, fn, send, recv, op, in_place, counts:
        (partial(fn, recv, comm.ranks[counts.root], _OPS[op], group=comm.group), recv), out_of_place=False),
    "gather_list": Convention(  # gather(tensor, gather_list, dst): the root's list, views of its output
        lambda comm, fn, send, recv, op, in_place, counts:
        (partial(fn, send, _blocks(comm, recv, len(send)) if comm.rank == counts.root else None, comm.ranks[counts.root],
                 group=comm.group), recv)),
    "scatter_list": Convention(  # scatter(tensor, scatter_list, src): the root's list, views of its input
        lambda comm, fn, send, recv, op, in_place, counts:
        (partial(fn, recv, _blocks(comm, send, len(recv)) if comm.rank == counts.root else None, comm.ranks[counts.root],
                 group=comm.group), recv)),
    "ring_pair": Convention(  # batch_isend_irecv: to rank r+1 and from rank r-1, one group
        lambda comm, fn, send, recv, op, in_place, counts: (partial(_ring_pair, comm, fn, send, recv), recv)),
    "v_output_input": Convention(  # all_to_all_single(output, input, output_split_sizes, input_split_sizes)
        lambda comm, fn, send, recv, op, in_place, counts: _uneven(comm, fn, send, recv, counts)),
}


def _uneven(comm, fn, send, recv, counts):
    """The blocks Counts.peers sizes; torch takes tensors exactly as long as the rank's own totals."""
    sent, _, got, _ = layout(counts.peers, comm.rank)
    out = recv.narrow(0, 0, sum(got))
    return partial(fn, out, send.narrow(0, 0, sum(sent)), got, sent, group=comm.group), recv


def _blocks(comm, buf, block: int) -> list:
    return [buf.narrow(0, q * block, block) for q in range(comm.size)]


def _ring_pair(comm, fn, send, recv) -> None:
    right, left = comm.ranks[(comm.rank + 1) % comm.size], comm.ranks[(comm.rank - 1) % comm.size]
    for work in fn([dist.P2POp(dist.irecv, recv, left, comm.group), dist.P2POp(dist.isend, send, right, comm.group)]):
        work.wait()


def _gpu_count() -> int:
    """GPUs this rank sees; an error that says where when it sees none."""
    count = torch.cuda.device_count()
    if count == 0:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise RuntimeError(f"--device cuda, but this rank sees no CUDA GPU on {platform.node()}"
                           + (f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""))
    return count


class _TorchRequest(Request):
    def __init__(self, work):
        self._work = work

    def wait(self):
        self._work.wait()


class TorchCommunicator(Communicator):
    library, library_title, conventions, native_target = "torch", "torch.distributed", CONVENTIONS, dist

    def __init__(self, backend: str, rank: int, world: int, local_rank: int, timeout_s: float,
                 group=None, ranks: list[int] | None = None, device: str = "cpu"):
        self.backend = backend
        self.device = "cuda" if backend == "nccl" else device
        self.carries_device_buffers = not (backend == "gloo" and self.device == "cuda")
        if group is None:
            if self.device == "cuda":
                torch.cuda.set_device(local_rank % _gpu_count())
            store = os.environ.get(LOCAL_STORE_ENV)  # a local launch: a file, no TCP store on the network
            dist.init_process_group(backend, rank=rank, world_size=world, timeout=timedelta(seconds=timeout_s),
                                    **({"store": dist.FileStore(store, world)} if store else {}))
            ranks = list(range(world))
        self.group = group
        self.ranks = ranks  # global rank of each member, in this communicator's rank order
        self.rank = ranks.index(dist.get_rank())
        self.size = len(ranks)
        self._torch_device = torch.device("cuda", torch.cuda.current_device()) if self.device == "cuda" else torch.device("cpu")
        self.reducer = gpu_reducer(self._torch_device.index) if self.device == "cuda" else TorchReducer()

    def unsupported(self, collective, dtype: DType, op, in_place, native=True):
        if native and not self.carries_device_buffers:
            return "gloo with --device cuda runs the peer algorithms only (gloo's own CUDA support is partial)"
        if native and self.size < 2 and COLLECTIVES[collective].native.get("torch", NativeCall("", "")).convention == "ring_pair":
            return "torch.distributed sends to no rank but another: send-recv needs 2 ranks or more"
        reason = super().unsupported(collective, dtype, op, in_place, native)
        if reason is None and op == "avg" and not dtype.is_float:
            return "avg of integers truncates; commbench checks avg on floating-point types only"
        return reason

    registration = NONE  # NCCL buffer registration (commbench.backends.registration)
    _pool = None  # local registration: the torch.cuda.MemPool the buffers come from
    _pool_registered = False

    def register_buffers(self, mode: str) -> None:
        """Register every buffer this communicator allocates from now on with NCCL: `local`, each segment
        of a memory pool with the communicator (ncclCommRegister); `window`, each buffer as a symmetric
        window of every rank's (torch's symmetric memory on its NCCL backend)."""
        if mode == NONE:
            return
        if self.backend != "nccl":
            raise RuntimeError(f"--registration {mode}: {self.backend} registers no buffers")
        if mode == "local":
            self._pool = torch.cuda.MemPool()
        else:
            from torch.distributed import _symmetric_memory as symm_mem

            symm_mem.set_backend("NCCL")
        self.registration = mode

    def _process_group(self):
        return self.group if self.group is not None else dist.distributed_c10d._get_default_group()

    def alloc(self, count, dtype):
        return torch.zeros(count, dtype=getattr(torch, dtype.torch_name), device=self._torch_device)

    def alloc_point(self, count, dtype):
        kind = getattr(torch, dtype.torch_name)
        if self.registration == NONE or count == 0:
            return self.alloc(count, dtype)
        if self.registration == "local":
            with torch.cuda.use_mem_pool(self._pool):
                buf = torch.zeros(count, dtype=kind, device=self._torch_device)
            nccl = self._process_group()._get_backend(self._torch_device)
            if self._pool_registered:  # the pool again, with the segment this buffer may have added
                nccl.deregister_mem_pool(self._pool)
            nccl.register_mem_pool(self._pool)
            self._pool_registered = True
            return buf
        from torch.distributed import _symmetric_memory as symm_mem

        buf = symm_mem.empty(count, dtype=kind, device=self._torch_device)  # every rank's, in the same order
        buf.zero_()
        symm_mem.rendezvous(buf, self._process_group())
        return buf

    def adopt(self, memory, count, dtype):
        if self.device != "cpu":
            return super().adopt(memory, count, dtype)
        if count == 0:
            return self.alloc(0, dtype)
        return torch.frombuffer(memory, dtype=getattr(torch, dtype.torch_name), count=count)

    def view(self, buf, offset, count):
        return buf.narrow(0, offset, count)

    def write(self, buf, offset, values):
        buf.narrow(0, offset, len(values)).copy_(torch.from_numpy(np.ascontiguousarray(values)))

    def read(self, buf, offset, count):
        return buf.narrow(0, offset, count).to(dtype=torch.float64, device="cpu").numpy()

    def bind(self, collective, send, recv, op, in_place, counts=None):
        """The library's call; NCCL's may be captured in a CUDA graph (harness.measure's --graph)."""
        fn, out = super().bind(collective, send, recv, op, in_place, counts)
        fn.capturable = self.backend == "nccl"
        return fn, out

    def barrier(self):
        if self.device == "cuda" and self.backend == "nccl":
            dist.barrier(group=self.group, device_ids=[torch.cuda.current_device()])
            torch.cuda.synchronize()
        else:
            dist.barrier(group=self.group)
            self.synchronize()

    def idle_barrier(self, nap_s=0.0005):
        if self.device == "cuda":
            return self.barrier()
        import time

        work = dist.barrier(group=self.group, async_op=True)
        while not work.is_completed():
            time.sleep(nap_s)
        work.wait()

    def enter_thread(self):
        if self.device == "cuda":
            torch.cuda.set_device(self._torch_device)

    def synchronize(self):
        if self.device == "cuda":
            torch.cuda.synchronize()

    def reduce_host(self, values, op):
        t = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64))
        t = t.to(self._torch_device) if self.backend == "nccl" else t  # gloo reduces host tensors
        dist.all_reduce(t, dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM, group=self.group)
        return t.cpu().numpy()

    def allgather_object(self, obj):
        out = [None] * self.size
        dist.all_gather_object(out, obj, group=self.group)
        return out

    def isend(self, buf, dst, tag=0):
        return _TorchRequest(dist.isend(buf, self.ranks[dst], group=self.group, tag=tag))

    def irecv(self, buf, src, tag=0):
        return _TorchRequest(dist.irecv(buf, self.ranks[src], group=self.group, tag=tag))

    def exchange(self, sends, recvs):
        """One group through batch_isend_irecv: on NCCL one coalesced launch on this group's
        communicator (no per-pair communicator, no issue-order dependence between the calls)."""
        ops = ([dist.P2POp(dist.irecv, b, self.ranks[src], self.group, tag) for b, src, tag in recvs]
               + [dist.P2POp(dist.isend, b, self.ranks[dst], self.group, tag) for b, dst, tag in sends])
        return Requests([_TorchRequest(w) for w in dist.batch_isend_irecv(ops)] if ops else [])

    def split(self, color, key):
        members = self.allgather_object((color, key, self.ranks[self.rank]))
        mine = None
        for c in sorted({m[0] for m in members}):  # every rank creates every group, same order
            ranks = [g for _, _, g in sorted(m for m in members if m[0] == c)]
            group = dist.new_group(ranks=ranks)
            if c == color:
                mine = TorchCommunicator(self.backend, 0, 0, 0, 0, group=group, ranks=ranks, device=self.device)
                mine.reducer = self.reducer  # one rank, one device: its kernels built (or not) once
                mine.register_buffers(self.registration)
        mine.barrier()  # NCCL creates the group's communicator here, with all its ranks (a first
        return mine     # batch_isend_irecv must involve every rank of its group, torch's docs say)

    def library_info(self):
        info = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "reducer": type(self.reducer).__name__}
        if self.backend == "nccl":
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        return info

    def close(self):
        if self.group is None and dist.is_initialized():
            dist.destroy_process_group()
