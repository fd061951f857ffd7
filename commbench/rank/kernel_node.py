"""One communicator's ring and tree kernels: its regions (kernel_host.HostNode on the CPU,
kernel_gpu.GpuNode on a GPU), its CbComm, and calls bound to the harness' buffers. Built once per
communicator, collectively, at bind time (not in a timed loop), and kept in the algorithm
context's cache.
"""

from __future__ import annotations

from commbench.rank.kernel_gpu import GpuNode, gpu_function
from commbench.rank.kernel_host import HostNode, host_library
from commbench.rank.kernels import (SLOT_BYTES, KernelUnavailable, address, auto_channels, comm_struct, region_bytes,
                                    spin_time)


class NodeKernels:
    """One communicator's kernels: its regions, its CbComm, and bound calls (see the module)."""

    def __init__(self, comm, device: str, timeout_s: float, channels: int, host_ranks: int | None = None):
        """host_ranks: the ranks of the job on this host (they share its cores), comm's by default;
        more where comm is a node's sub-communicator and several emulated nodes share the host."""
        self.comm, self.device, self.n, self.channels = comm, device, comm.size, channels
        self.host_ranks = max(host_ranks or 0, self.n)
        slot_bytes = SLOT_BYTES[device]
        self.node = (GpuNode if device == "cuda" else HostNode)(comm, region_bytes(self.n, channels, slot_bytes))
        self.note = getattr(self.node, "note", None)
        self.struct = comm_struct(comm.rank, self.n, channels, timeout_s, self.node.regions, self.node.error_address,
                                  slot_bytes, spin_time(device, self.host_ranks))
        self.kernel_struct = self.node.upload(self.struct)  # where the kernel reads it
        comm.barrier()

    def set_timeout(self, seconds: float) -> None:
        """A wait's timeout from the next call on (the host's; a GPU keeps the first point's)."""
        self.struct.timeout_ns = int(seconds * 1e9)

    def call_channels(self, nbytes: int, wanted: int | None) -> int:
        return min(self.channels, wanted or auto_channels(self.device, nbytes, self.host_ranks))

    def allocator(self):
        """Where the harness' buffers go for these kernels: on the CPU the node's shared memory
        (HostNode.buffer: all-gather then reads its neighbour's output directly), collectively,
        as (count, DType) -> buffer; None on a GPU (the communicator's own)."""
        if self.device == "cuda":
            return None
        return lambda count, dtype: self.node.buffer(self.comm, count, dtype)

    def bind(self, name: str, dtype: str | None, send, recv, count: int, channels: int):
        """A zero-argument callable running kernel `name` once on these buffers."""
        return self.node.bind(self.kernel_struct, name, dtype, address(send), address(recv), count, channels)

    def close(self) -> None:
        if self.device == "cuda":
            self.node.close(self.comm)
        else:
            self.comm.barrier()
            self.node.close()


def unavailable(device: str) -> str | None:
    """Why the kernels cannot run on this device here (one line), or None; builds them first."""
    try:
        if device == "cuda":
            import torch

            gpu_function("cb_ring_all_reduce_float32_sum", "float32", torch.cuda.current_device())
        else:
            host_library()
    except KernelUnavailable as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - CuPy / NVRTC errors of any kind: the points are skipped
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"ring_kernel and tree_kernel did not build for the GPU ({type(exc).__name__}: {first})"
    return None
