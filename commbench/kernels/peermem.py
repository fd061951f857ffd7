"""Memory that every rank of one node reads directly: the ground under the peer algorithms.

Each rank owns a staging area of two slots (calls alternate between them) and maps every other
rank's: on the CPU a file in /dev/shm mapped by all of them, on the GPU a cudaMalloc'd buffer
whose CUDA IPC handle the others open (the same GPU for processes sharing one, or a peer GPU
with peer access). Slots come back as the harness' own buffer type (numpy, torch CPU or torch
CUDA tensors), so an algorithm reduces and copies with the communicator's Reducer, on the GPU
with commbench's own kernels (cuda/reduce.cu) reading the peers' memory.

Ranks meet at `barrier()`: each rank stores an epoch number in its flag word (the first 64-byte
line of its /dev/shm file) and spins, yielding the core, until every peer's flag has reached it.
A GPU rank synchronises its stream first, so what it wrote is complete before its flag says so.
The flags are aligned 8-byte stores and loads, single-copy atomic and, on x86-64 (total store
order), seen in program order; other CPUs are refused. Setup and teardown use the communicator.
`barrier(on_gpu=True)` lets the GPU wait instead: every rank's flag page is registered with CUDA
(cudaHostRegister) and cuda/peer_flags.cu stores and waits on the same words with system-scope
release/acquire, queued on the rank's stream, so the host never waits for the stream.

Two slots make one barrier per phase enough: a rank writes slot s again at call k+2 only after
passing call k+1's first barrier, which every rank reaches only after finishing call k.
"""

from __future__ import annotations

import mmap
import os
import platform
import uuid

import numpy as np

SHM_DIR = "/dev/shm"
FLAG_BYTES = 64  # one cache line per rank's flag
SPINS_BEFORE_YIELD = 64


def unsupported(node_of_rank: list[int]) -> str | None:
    """Why the peer algorithms cannot run here, or None."""
    if len(set(node_of_rank)) > 1:
        return "peer algorithms read the other ranks' memory: every rank must be on one node"
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"the peer flag protocol relies on x86-64 store ordering (this is {platform.machine()})"
    if not os.path.isdir(SHM_DIR):
        return f"no {SHM_DIR} for shared memory"
    return None


def _map_file(path: str, nbytes: int, create: bool) -> mmap.mmap:
    fd = os.open(path, (os.O_CREAT | os.O_EXCL | os.O_RDWR) if create else os.O_RDWR, 0o600)
    try:
        if create:
            os.ftruncate(fd, nbytes)
        return mmap.mmap(fd, nbytes)
    finally:
        os.close(fd)


class PeerMemory:
    """Two slots of `slot_bytes` per rank, every rank's mapped into every rank; see the module."""

    def __init__(self, comm, slot_bytes: int, like, timeout_s: float = 120.0):
        """timeout_s: how long a barrier the GPU waits on may wait for a peer (on the host the job's
        watchdog ends a hang)."""
        self.comm, self.rank, self.size, self.timeout_s = comm, comm.rank, comm.size, timeout_s
        self.slot_bytes = -(-max(slot_bytes, 1) // FLAG_BYTES) * FLAG_BYTES
        self.cuda = is_cuda(like)
        self.epoch, self.calls = 0, 0
        self._views: dict = {}
        self._gpu_flags: _GpuFlags | None = None
        token = comm.allgather_object(uuid.uuid4().hex[:12])[0]
        path = os.path.join(SHM_DIR, f"commbench-{token}-{self.rank}")
        host_bytes = FLAG_BYTES + (0 if self.cuda else 2 * self.slot_bytes)
        self._maps = {self.rank: _map_file(path, host_bytes, create=True)}
        try:
            self._device = _DeviceSlots(self.slot_bytes, comm) if self.cuda else None
            comm.barrier()  # every file exists
            for r in range(self.size):
                if r != self.rank:
                    self._maps[r] = _map_file(os.path.join(SHM_DIR, f"commbench-{token}-{r}"), host_bytes, create=False)
            comm.barrier()  # every rank mapped every file: the names can go
        finally:
            os.unlink(path)
        self.flags = [np.frombuffer(self._maps[r], dtype=np.int64, count=1) for r in range(self.size)]

    def slot(self, rank: int, parity: int, like, count: int):
        """Elements [0, count) of `rank`'s slot `parity`, as a buffer of `like`'s kind. The
        whole slot's view is built once per dtype; a call only slices it (it runs every call)."""
        key = (rank, parity, like.dtype)
        whole = self._views.get(key)
        if whole is None:
            whole = self._views[key] = self._whole_slot(rank, parity * self.slot_bytes, like)
        return whole[:count]

    def _whole_slot(self, rank: int, offset: int, like):
        nbytes = self.slot_bytes  # a multiple of 64: whole elements of any dtype
        if self.cuda:
            return self._device.view(rank, offset, nbytes, like)
        buf = memoryview(self._maps[rank])[FLAG_BYTES + offset:FLAG_BYTES + offset + nbytes]
        if isinstance(like, np.ndarray):
            return np.frombuffer(buf, dtype=like.dtype)
        import torch

        return torch.frombuffer(buf, dtype=like.dtype)

    def next_parity(self) -> int:
        self.calls += 1
        return self.calls % 2

    def barrier(self, on_gpu: bool = False) -> None:
        """Wait until every rank has reached this barrier (see the module); on_gpu: the GPU waits."""
        self.epoch += 1
        if on_gpu:
            if self._gpu_flags is None:
                self._gpu_flags = _GpuFlags(self.flags, self._device.device, self.timeout_s)
            self._gpu_flags.wait(self.rank, self.size, self.epoch)
            return
        if self.cuda:
            import torch

            torch.cuda.current_stream().synchronize()
        self.flags[self.rank][0] = self.epoch
        for flag in self.flags:
            spins = 0
            while flag[0] < self.epoch:
                spins += 1
                if spins > SPINS_BEFORE_YIELD:
                    os.sched_yield()

    def close(self) -> None:
        self.comm.barrier()  # nobody reads anyone's slots any more
        if self._gpu_flags is not None:
            self._gpu_flags.close()
        if self._device is not None:
            self._device.close(self.comm)
        self.flags, self._views, self._gpu_flags = [], {}, None
        for m in self._maps.values():
            try:
                m.close()
            except BufferError:  # a view still lives; the mapping goes with it
                pass
        self._maps = {}


def is_cuda(like) -> bool:
    """Whether `like` is a CUDA tensor (numpy arrays and CPU tensors are not)."""
    return getattr(getattr(like, "device", None), "type", "cpu") == "cuda"


def itemsize(like) -> int:
    """Bytes per element of a numpy array or a torch tensor."""
    return like.itemsize if isinstance(like, np.ndarray) else like.element_size()


class _DeviceSlots:
    """Each rank's two slots in one cudaMalloc; the others open it by its CUDA IPC handle."""

    def __init__(self, slot_bytes: int, comm):
        import cupy
        import torch

        self._cp, self.rank = cupy, comm.rank
        self.device = cupy.cuda.Device(torch.cuda.current_device())  # the rank's GPU, not CuPy's default
        rt = cupy.cuda.runtime
        with self.device:
            self._own = rt.malloc(2 * slot_bytes)
            handles = comm.allgather_object(bytes(rt.ipcGetMemHandle(self._own)))
            self.ptrs = [self._own if r == self.rank else rt.ipcOpenMemHandle(h, rt.cudaIpcMemLazyEnablePeerAccess)
                         for r, h in enumerate(handles)]

    def view(self, rank: int, offset: int, nbytes: int, like):
        import torch

        cp = self._cp
        mem = cp.cuda.UnownedMemory(self.ptrs[rank] + offset, nbytes, self, device_id=self.device.id)
        raw = cp.ndarray((nbytes,), dtype=cp.uint8, memptr=cp.cuda.MemoryPointer(mem, 0))
        return torch.from_dlpack(raw).view(like.dtype)

    def close(self, comm) -> None:
        rt = self._cp.cuda.runtime
        with self.device:
            for r, ptr in enumerate(self.ptrs):
                if r != self.rank:
                    rt.ipcCloseMemHandle(ptr)
            self.ptrs = []
            comm.barrier()  # no rank holds this buffer open any more
            rt.free(self._own)


class _GpuFlags:
    """Every rank's flag page registered with CUDA in this process, and the barrier kernel
    (cuda/peer_flags.cu) that waits on them from this rank's stream. A peer that never arrives
    ends the kernel's wait after timeout_s: it records that rank in pinned host memory (error
    words), which the next barrier reads before it launches, without waiting for the stream."""

    REGISTER_PORTABLE, REGISTER_MAPPED = 1, 2  # cudaHostRegisterPortable, cudaHostRegisterMapped

    def __init__(self, flags: list, device, timeout_s: float):
        import cupy

        from commbench.kernels.reducers import cuda_module

        self._cp, self.device, self.timeout_ns = cupy, device, int(timeout_s * 1e9)
        rt = cupy.cuda.runtime
        self._hosts = [f.ctypes.data for f in flags]  # each the start of its rank's mapping
        with device:
            for ptr in self._hosts:
                rt.hostRegister(ptr, FLAG_BYTES, self.REGISTER_PORTABLE | self.REGISTER_MAPPED)
            table = [rt.pointerGetAttributes(ptr).devicePointer for ptr in self._hosts]
            self._table = cupy.asarray(np.array(table, dtype=np.uint64))
            self._kernel = cuda_module("peer_flags.cu").get_function("peer_barrier")
            self._pinned = cupy.cuda.alloc_pinned_memory(16)  # error words: code, the rank that never arrived
            self.error_words = np.frombuffer(self._pinned, dtype=np.int64, count=2)
            self.error_words[:] = 0
            self._error = rt.pointerGetAttributes(self._pinned.ptr).devicePointer

    def wait(self, rank: int, size: int, epoch: int) -> None:
        import torch

        raise_if_timed_out(self.error_words, epoch - 1)
        with self._cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            self._kernel((1,), (1,), (self._table, np.int32(rank), np.int32(size), np.int64(epoch),
                                      np.int64(self.timeout_ns), np.uint64(self._error)))

    def close(self) -> None:
        import torch

        torch.cuda.current_stream().synchronize()  # no barrier kernel still reads the pages
        with self.device:
            for ptr in self._hosts:
                self._cp.cuda.runtime.hostUnregister(ptr)
        self._hosts = []
        raise_if_timed_out(self.error_words, None)


def raise_if_timed_out(error_words, epoch) -> None:
    """Raise where cuda/peer_flags.cu's barrier recorded a peer that never arrived (error words:
    code, rank; a code of -1 is a record still being written: a timeout all the same)."""
    if int(error_words[0]):
        when = "" if epoch is None else f" (at or before barrier {epoch})"
        raise TimeoutError(f"peer barrier on the GPU: rank {int(error_words[1])} never arrived{when}; "
                           "its wait timed out")
