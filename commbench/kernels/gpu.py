"""cuda/collectives.cu on a GPU: NVRTC compiles one module per dtype and device; every rank's region
is a cudaMalloc whose CUDA IPC handle the others open; a call is one launch of `channels` blocks on
the rank's current stream. A wait that times out is reported in pinned host memory, which the
next call reads without waiting for the GPU.

The kernels' blocks wait on one another (a channel's flags are written by the same channel of the
neighbouring ranks), so every block of a call must be resident at once, or the ones that never
start leave the others spinning into their timeout. What must be co-resident: one launch's
channels × ranks blocks (OneGpuNode); a process's channels, and under MPS every process sharing the
GPU's (time slices without MPS run one process at a time). `residency` says how many fit, from
the kernel's occupancy and the SMs (under MPS, the client's active-thread share of them); a launch
that cannot fit is refused up front in one line, and the automatic channel count stays within it.
Peer access between the ranks' GPUs is checked before anything is bound (`layout`): without it
the kernel algorithms are skipped with the reason, and native points still run.
"""

from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass
from typing import Callable

import numpy as np

from commbench.dtypes import DTYPES
from commbench.kernels.abi import (ERROR_WORDS, GPU_THREADS, SOURCE, KernelFault,
                                    KernelUnavailable, comm_struct, describe, region_bytes, tuned, what)
from commbench.kernels.reducers import NVRTC_OPTIONS, cuda_source

DTYPE_CODES = {name: code for code, name in enumerate(DTYPES, 1)}  # CB_DTYPE: collectives.cu's module of one dtype
PROBE = ("cb_ring_all_reduce_float32_sum", "float32")  # the kernel that stands for all in checks before binding
CU_FUNC_ATTRIBUTE_NUM_REGS = 4
MPS_PERCENTAGE = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"


def mps_running() -> bool:
    """Whether an MPS control daemon serves this machine (its pipe directory has its control pipe)."""
    return os.path.exists(os.path.join(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"), "control"))


# --- which GPU, and who shares it ------------------------------------------------------------------------
def device_identity(device: int) -> tuple[str, str]:
    """A GPU's identity whatever CUDA_VISIBLE_DEVICES calls it (its UUID, else its PCI address), and
    its PCI bus id (what another process finds it by: cudaDeviceGetByPCIBusId)."""
    import cupy

    rt = cupy.cuda.runtime
    bus = rt.deviceGetPCIBusId(device)
    uuid = rt.getDeviceProperties(device).get("uuid")
    return (bytes(uuid).hex() if uuid else bus.lower()), bus


@dataclass(frozen=True)
class Layout:
    """The ranks' GPUs as one rank sees them (the same on every rank): how many ranks share this
    rank's GPU, and why the ranks' GPUs cannot reach one another's memory (None: they can)."""
    sharing: int
    peer_reason: str | None


def peer_refusal(rank: int, buses: list[str], identities: list[str], local_ordinal: Callable[[str], int | None],
                 can_access: Callable[[int, int], bool], same_node: list[bool] | None = None) -> str | None:
    """Why this rank cannot map the memory of every other rank of its node, or None. buses and
    identities: every rank's GPU; local_ordinal: a PCI bus id to this process's device number (None
    where CUDA_VISIBLE_DEVICES hides it); can_access: cudaDeviceCanAccessPeer; same_node: which
    ranks share this rank's node (default all). Ranks on this rank's own GPU need nothing."""
    mine = local_ordinal(buses[rank])
    for q, bus in enumerate(buses):
        if identities[q] == identities[rank] or (same_node is not None and not same_node[q]):
            continue
        theirs = local_ordinal(bus)
        if mine is None or theirs is None:
            return (f"rank {q}'s GPU ({bus}) is not visible to rank {rank} (CUDA_VISIBLE_DEVICES), so its memory "
                    "cannot be opened: give every rank every GPU of the node")
        if not can_access(mine, theirs):
            return (f"rank {rank}'s GPU ({buses[rank]}) has no peer access to rank {q}'s ({bus}): "
                    "cudaDeviceCanAccessPeer says no (no NVLink or PCIe P2P between them)")
    return None


def layout(comm, node_of_rank: list[int] | None = None) -> Layout:
    """The ranks' GPUs (collective: every rank calls it at the same point, whatever fails locally):
    who shares this rank's, and whether every pair of a node has peer access. The reason is the
    first any rank found, on every rank."""
    try:
        import cupy
        import torch

        rt = cupy.cuda.runtime
        identity, bus = device_identity(torch.cuda.current_device())
        failure = None
    except Exception as exc:  # noqa: BLE001 - no CuPy, no device: said, and the same on every rank
        rt, identity, bus = None, None, None
        failure = f"the GPU's identity cannot be read ({type(exc).__name__}: {str(exc).strip()[:200]})"
    gathered = comm.allgather_object((identity, bus, failure))
    failure = next((f for _, _, f in gathered if f), None)
    if failure:
        return Layout(sharing=1, peer_reason=failure)
    identities, buses = [g[0] for g in gathered], [g[1] for g in gathered]

    def local_ordinal(pci: str) -> int | None:
        try:
            return rt.deviceGetByPCIBusId(pci)
        except Exception:  # noqa: BLE001 - cudaErrorInvalidDevice: not visible here
            return None

    def can_access(a: int, b: int) -> bool:
        try:
            return bool(rt.deviceCanAccessPeer(a, b))
        except Exception:  # noqa: BLE001
            return False

    same = [True] * comm.size if node_of_rank is None else [n == node_of_rank[comm.rank] for n in node_of_rank]
    reason = peer_refusal(comm.rank, buses, identities, local_ordinal, can_access, same)
    reason = next((r for r in comm.allgather_object(reason) if r), None)
    sharing = sum(1 for q, i in enumerate(identities) if i == identity and same[q])  # (a bus id repeats across nodes)
    return Layout(sharing=sharing, peer_reason=reason)


def probe_residency() -> Residency:
    """The residency of the kernel that stands for all before any is bound (ring all-reduce float32:
    among the most registers), on the rank's device."""
    import torch

    return residency(*PROBE, torch.cuda.current_device())


# --- how many blocks can be resident at once -------------------------------------------------------------
@dataclass(frozen=True)
class Residency:
    """A kernel on a GPU: blocks of GPU_THREADS resident per SM (its occupancy), the SMs, and under
    MPS the client's active-thread percentage (None: no MPS, or no limit set)."""
    blocks_per_sm: int
    sms: int
    mps: bool = False
    mps_percent: float | None = None

    def client_sms(self) -> int:
        """The SMs one process may use (MPS's active-thread percentage caps its share)."""
        if not self.mps or self.mps_percent is None:
            return self.sms
        return max(1, int(self.sms * self.mps_percent / 100))

    def max_channels(self, ranks_per_launch: int = 1, sharing: int = 1) -> int:
        """The most channels a call may have: one launch's ranks_per_launch × channels blocks fit the
        client's SMs, and under MPS the blocks of every process sharing the GPU fit all of them."""
        limit = self.blocks_per_sm * self.client_sms() // max(ranks_per_launch, 1)
        if self.mps and sharing > 1:
            limit = min(limit, self.blocks_per_sm * self.sms // sharing)
        return limit

    def refusal(self, channels: int, ranks_per_launch: int = 1, sharing: int = 1) -> str | None:
        """One line where `channels` cannot all be resident at once (the blocks would wait on blocks
        that never start), else None."""
        limit = self.max_channels(ranks_per_launch, sharing)
        if channels <= limit:
            return None
        procs = sharing if self.mps and sharing > 1 else 1
        need = channels * ranks_per_launch * procs
        who = (f"{channels} channels x {ranks_per_launch} ranks" if ranks_per_launch > 1 else
               f"{channels} channels x {procs} processes under MPS" if procs > 1 else f"{channels} channels")
        share = (f", MPS active threads {self.mps_percent:g} % of {self.sms}" if self.mps and self.mps_percent is not None
                 else "")
        fix = (f"use --channels {limit} or fewer" if limit >= 1 else
               f"not even one channel fits: fewer ranks per GPU, or a kernel of fewer registers per {GPU_THREADS} threads")
        return (f"ring_kernel / tree_kernel need {who} = {need} blocks resident at once; this GPU holds "
                f"{self.blocks_per_sm} per SM x {self.client_sms()} SMs{share}: {fix}")


def mps_percent() -> float | None:
    value = os.environ.get(MPS_PERCENTAGE)
    try:
        return float(value) if value else None
    except ValueError:
        return None


@functools.lru_cache(maxsize=None)
def residency(name: str, dtype: str | None, device: int) -> Residency:
    """Kernel `name`'s residency on this device (cudaOccupancyMaxActiveBlocksPerMultiprocessor, or
    from its registers where CuPy has no occupancy call)."""
    import cupy

    fn = gpu_function(name, dtype, device)
    attrs = cupy.cuda.Device(device).attributes
    with cupy.cuda.Device(device):
        handle = fn.kernel.ptr  # RawModule.get_function gives a RawKernel; its CUfunction is .kernel's
        try:
            per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(handle, GPU_THREADS, 0)
        except AttributeError:
            regs = cupy.cuda.driver.funcGetAttribute(CU_FUNC_ATTRIBUTE_NUM_REGS, handle)
            per_sm = min(attrs["MaxThreadsPerMultiProcessor"] // GPU_THREADS,
                         attrs["MaxRegistersPerMultiprocessor"] // max(regs * GPU_THREADS, 1))
    return Residency(per_sm, attrs["MultiProcessorCount"], mps_running(), mps_percent())


# --- the kernels -------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def gpu_module(dtype: str | None, device: int):
    """cuda/collectives.cu NVRTC-compiled with one dtype's entry points, once per dtype and device."""
    import cupy

    with cupy.cuda.Device(device):
        return cupy.RawModule(code=cuda_source(SOURCE.name),
                              options=(*NVRTC_OPTIONS, f"-DCB_DTYPE={DTYPE_CODES.get(dtype or '', 0)}"))


@functools.lru_cache(maxsize=None)
def gpu_function(name: str, dtype: str | None, device: int):
    """A kernel of cuda/collectives.cu (from its dtype's module)."""
    import cupy

    with cupy.cuda.Device(device):
        return gpu_module(dtype, device).get_function(name)


class GpuNode:
    """Every rank's region in its own cudaMalloc, opened by the others through CUDA IPC; the
    error words in pinned host memory the GPU writes and the host reads without waiting."""

    def __init__(self, comm, nbytes: int):
        import cupy
        import torch

        self._cp = cupy
        rt = cupy.cuda.runtime
        self.device = cupy.cuda.Device(torch.cuda.current_device())
        self.layout = layout(comm)
        if self.layout.peer_reason:  # (the algorithms check first; this keeps a direct caller from dying in IPC)
            raise KernelUnavailable(self.layout.peer_reason)
        with self.device:
            self._own = rt.malloc(nbytes)
            rt.memset(self._own, 0, nbytes)
            rt.deviceSynchronize()
            handles = comm.allgather_object(bytes(rt.ipcGetMemHandle(self._own)))
            self.regions = [self._own if r == comm.rank else rt.ipcOpenMemHandle(h, rt.cudaIpcMemLazyEnablePeerAccess)
                            for r, h in enumerate(handles)]
            self._pinned = rt.hostAlloc(8 * ERROR_WORDS, 2)  # cudaHostAllocMapped
            self._error = np.frombuffer((ctypes.c_longlong * ERROR_WORDS).from_address(self._pinned), dtype=np.int64)
            self._error[:] = 0
            self.error_address = rt.pointerGetAttributes(self._pinned).devicePointer
        self._rank = comm.rank
        sharing = self.layout.sharing
        self.note = None if sharing < 2 or mps_running() else (
            f"{sharing} ranks share one GPU without MPS: the GPU time-slices between processes, so every step "
            "of ring_kernel / tree_kernel waits a slice (correct, slow); start it with nvidia-cuda-mps-control -d")

    def error(self):
        return self._error.tolist()

    def upload(self, struct):
        """The rank's CbComm in device memory (its counters live there from then on)."""
        with self.device:
            return self._cp.asarray(np.frombuffer(bytes(struct), dtype=np.uint8))

    def max_channels(self, name: str, dtype: str | None) -> int:
        return residency(name, dtype, self.device.id).max_channels(1, self.layout.sharing)

    def bind(self, struct, name: str, dtype: str | None, send: int, recv: int, count: int, channels: int):
        """One launch of kernel `name` on the rank's current stream, as a zero-argument callable;
        a wait that timed out in an earlier call raises before the next launch. A launch whose
        blocks cannot all be resident at once is refused here (KernelUnavailable), never launched."""
        import torch

        refusal = residency(name, dtype, self.device.id).refusal(channels, 1, self.layout.sharing)
        if refusal:
            raise KernelUnavailable(refusal)
        fn = gpu_function(name, dtype, self.device.id)
        args = (struct, np.uint64(send), np.uint64(recv), np.int64(count), np.int64(0), np.int32(channels),
                np.int32(0))  # a process's own buffers: every call through the FIFOs
        error, cupy = self._error, self._cp

        def run():
            if error[0]:
                raise KernelFault(describe(error.tolist(), what(name)))
            with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                fn((channels,), (GPU_THREADS,), args)
        return run

    def close(self, comm) -> None:
        rt = self._cp.cuda.runtime
        with self.device:
            rt.deviceSynchronize()
            for r, ptr in enumerate(self.regions):
                if r != self._rank:
                    rt.ipcCloseMemHandle(ptr)
            comm.barrier()  # nobody has this rank's region open any more
            rt.free(self._own)
            self._error = self._error.copy()  # the last record, off the pinned page, before it goes
            rt.freeHost(self._pinned)


class OneGpuNode:
    """n ranks of one node in one process and one launch (gridDim.y = ranks): their regions in one
    allocation, rank y's buffers at base + y·stride. The cheapest real test of the device protocol
    (tests/gpu, benchmarks): every rank's blocks run at once, so flags, fences, chunking and
    channels run on the hardware; bandwidth is then HBM-bound, not NVLink-bound."""

    def __init__(self, n: int, channels: int, timeout_s: float = 20.0):
        import cupy

        self._cp, self.n = cupy, n
        slot = tuned("slot_bytes", "cuda")
        region = region_bytes(n, channels, slot)
        self.memory = cupy.zeros(region * n, dtype=cupy.uint8)
        base = self.memory.data.ptr
        self._error = cupy.cuda.alloc_pinned_memory(8 * ERROR_WORDS)
        self.error_words = np.frombuffer(self._error, dtype=np.int64, count=ERROR_WORDS)
        self.error_words[:] = 0
        error = cupy.cuda.runtime.pointerGetAttributes(self._error.ptr).devicePointer
        raw = b"".join(bytes(comm_struct(r, n, channels, timeout_s, [base + q * region for q in range(n)], error, slot,
                                         tuned("spin_us", "cuda"), where="cuda")) for r in range(n))
        self.comms = cupy.asarray(np.frombuffer(raw, dtype=np.uint8))

    def run(self, name: str, dtype: str | None, send: int, recv: int, count: int, stride: int, channels: int,
            ranks: int | None = None, direct: bool = False) -> None:
        """Launch kernel `name` for ranks 0 .. ranks-1 (default all) on the current stream; direct:
        all-gather and the ring all-reduce read their neighbour's buffers (at `stride`) instead of going
        through the FIFOs.
        A launch whose channels x ranks blocks cannot all be resident is refused (KernelUnavailable)."""
        import torch

        device = torch.cuda.current_device()
        refusal = residency(name, dtype, device).refusal(channels, ranks or self.n)
        if refusal:
            raise KernelUnavailable(refusal)
        fn = gpu_function(name, dtype, device)
        with self._cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            fn((channels, ranks or self.n), (GPU_THREADS,), (self.comms, np.uint64(send), np.uint64(recv),
                                                            np.int64(count), np.int64(stride), np.int32(channels),
                                                            np.int32(direct)))
