"""One communicator's ring and tree kernels: its regions (kernel_host.HostNode on the CPU,
kernel_gpu.GpuNode on a GPU), its CbComm, and calls bound to the harness' buffers. Built once per
communicator, collectively, at bind time (not in a timed loop), and kept in the algorithm
context's cache.
"""

from __future__ import annotations

from commbench.kernels import gpu as kernel_gpu
from commbench.kernels.gpu import GpuNode, gpu_function
from commbench.kernels.host import HostNode, host_library
from commbench.kernels.abi import (KernelUnavailable, address, auto_channels, comm_struct, entry,
                                       nap_time, region_bytes, schedule, spin_time, tuned)


class NodeKernels:
    """One communicator's kernels: its regions, its CbComm, and bound calls (see the module)."""

    def __init__(self, comm, device: str, timeout_s: float, channels: int, host_ranks: int | None = None,
                 beside_backend: bool = False):
        """host_ranks: the ranks of the job on this host (they share its cores), comm's by default;
        more where comm is a node's sub-communicator and several emulated nodes share the host.
        beside_backend: the kernels run while the backend's own transfers do (kernel_abi.nap_time)."""
        self.comm, self.device, self.n, self.channels = comm, device, comm.size, channels
        self.host_ranks = max(host_ranks or 0, self.n)
        slot_bytes = tuned("slot_bytes", device)
        self.node = (GpuNode if device == "cuda" else HostNode)(comm, region_bytes(self.n, channels, slot_bytes))
        self.note = getattr(self.node, "note", None)
        self.struct = comm_struct(comm.rank, self.n, channels, timeout_s, self.node.regions, self.node.error_address,
                                  slot_bytes, spin_time(device, self.host_ranks),
                                  nap_time(device, comm.backend) if beside_backend else 0.0, device)
        self.kernel_struct = self.node.upload(self.struct)  # where the kernel reads it
        comm.barrier()

    def set_timeout(self, seconds: float) -> None:
        """A wait's timeout from the next call on (the host's; a GPU keeps the first point's)."""
        self.struct.timeout_ns = int(seconds * 1e9)

    def call_channels(self, nbytes: int, wanted: int | None, name: str, dtype: str | None) -> int:
        """A call's channels: as asked, else by size (kernels.auto_channels), and on a GPU no more
        than kernel `name`'s blocks can be resident at once (kernel_gpu.Residency: asked for more,
        the bind refuses)."""
        if wanted:
            return min(self.channels, wanted)
        auto = min(self.channels, auto_channels(self.device, nbytes, self.host_ranks))
        return max(1, min(auto, self.node.max_channels(name, dtype))) if self.device == "cuda" else auto

    def entry_and_channels(self, kernel: str, collective: str, dtype: str | None, op: str | None, message_bytes: int,
                           nbytes: int, wanted: int | None) -> tuple[str, int]:
        """A call's entry point and channels: kernel's schedule ("ring" or "tree"), or the one-shot one
        where each peer's message of message_bytes is small (kernel_abi.schedule: one channel); nbytes:
        the larger buffer's, for the channels."""
        run = schedule(kernel, collective, self.device, self.n, message_bytes, self.host_ranks)
        name = entry(run, collective, dtype, op)
        return name, 1 if run == "oneshot" else self.call_channels(nbytes, wanted, name, dtype)

    def allocator(self, notes: list, arena=None):
        """Where the harness' buffers go for these kernels: on the CPU the node's shared memory
        (HostNode.buffer: a direct all-gather or ring all-reduce reads its neighbour's buffers), collectively, as
        (count, DType) -> buffer; where /dev/shm has no room, the communicator's (the reason goes
        to notes; all-gather and all-reduce then go through the FIFOs). None on a GPU (the communicator's).
        arena: commbench ab's shared arena (commbench.rank.arena), where every rank's lie already."""
        if self.device == "cuda":
            return None

        def alloc(count, dtype):
            try:
                return self.node.buffer(self.comm, count, dtype, arena)
            except KernelUnavailable as exc:
                notes.append(f"{exc}: these buffers stay the communicator's (ring_kernel all-gather and all-reduce "
                             "through the FIFOs)")
                return self.comm.alloc(count, dtype)
        return alloc

    def bind(self, name: str, dtype: str | None, send, recv, count: int, channels: int, direct: bool = False):
        """A zero-argument callable running kernel `name` once on these buffers. direct (collective):
        the buffers are the allocator's, laid out alike on every rank (harness.Buffers), so
        all-gather may read its neighbour's; it does where every rank's are in reach."""
        args = (self.kernel_struct, name, dtype, address(send), address(recv), count, channels)
        if self.device == "cuda":  # (its allocator gives no buffers of its own)
            return self.node.bind(*args)
        stride = self.node.stride_of(address(send), address(recv)) if direct else 0
        if direct and len(set(self.comm.allgather_object(stride))) > 1:  # all ranks direct, or none
            stride = 0
        return self.node.bind(*args, stride)

    def close(self) -> None:
        if self.device == "cuda":
            self.node.close(self.comm)
        else:
            self.comm.barrier()
            self.node.close()


def gpu_refusal(ctx, built: str | None) -> str | None:
    """Why the kernels cannot run on the ranks' GPUs, or None: no peer access between two GPUs of a
    node, or --channels more than can be resident at once. Collective (every rank, at the same
    point, whatever it found locally: built is this rank's own build failure), once per job."""
    key = "gpu-kernel-refusal"
    if key not in ctx.cache:
        lay = kernel_gpu.layout(ctx.comm, ctx.node_of_rank)
        reason = lay.peer_reason
        if reason is None and built is None and ctx.channels:
            reason = kernel_gpu.probe_residency().refusal(ctx.channels, 1, lay.sharing)
        ctx.cache[key] = reason
    return ctx.cache[key]


def unavailable(device: str) -> str | None:
    """Why the kernels cannot run on this device here (one line), or None; builds them first."""
    try:
        if device == "cuda":
            import torch

            gpu_function(*kernel_gpu.PROBE, torch.cuda.current_device())
        else:
            host_library()
    except KernelUnavailable as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - CuPy / NVRTC errors of any kind: the points are skipped
        first = (str(exc).strip().splitlines() or [""])[0]
        where = "the GPU" if device == "cuda" else "the CPU (the host build)"
        return f"ring_kernel and tree_kernel did not build for {where} ({type(exc).__name__}: {first})"
    return None
