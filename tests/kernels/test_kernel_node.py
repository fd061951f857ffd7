"""commbench.kernels.node: one communicator's ring and tree kernels. Its own logic with fake
nodes (the CbComm it fills, the channels of a call, the allocator's fallback, direct calls only
where every rank's buffers are in reach, closing); then the product's path on two thread ranks:
the host build over a real /dev/shm segment, the buffers its allocator shares, and exact results."""

import numpy as np
import pytest

from commbench.dtypes import DTYPES
from commbench.kernels import node as kernel_node
from commbench.kernels import abi as kernel_abi
from commbench.kernels.node import NodeKernels
from commbench.kernels.abi import KernelUnavailable
from conftest import pretend_machine
from kernel_threads import needs_compiler
from nccl_semantics import World

F32 = DTYPES["float32"]

PROBE = ("cb_ring_all_reduce_float32_sum", "float32")  # a kernel name and dtype (the host's channels do not depend on them)


class Comm:
    """What NodeKernels asks of a communicator, answered alone; allgather_object gives `others`
    for the other ranks' answers."""

    device = "cpu"

    def __init__(self, rank=0, size=2, others=None):
        self.rank, self.size, self.others, self.barriers = rank, size, others, 0

    def barrier(self):
        self.barriers += 1

    def allgather_object(self, obj):
        return [obj if self.others is None else self.others] * (self.size - 1) + [obj]

    def alloc(self, count, dtype):
        return np.zeros(count, dtype.numpy_name)


class FakeNode:
    """A HostNode / GpuNode that records what it is asked."""

    note = None

    def __init__(self, comm, nbytes):
        self.nbytes, self.calls = nbytes, []
        self.regions = [4096 * (r + 1) for r in range(comm.size)]
        self.error_address = 64
        self.stride = 8192

    def upload(self, struct):
        return ("uploaded", struct)

    def buffer(self, comm, count, dtype, arena=None):
        self.calls.append(("buffer", count, arena))
        if count > 100:
            raise KernelUnavailable("/dev/shm has no room for 4096 bytes")
        return np.zeros(count, dtype.numpy_name)

    def stride_of(self, send, recv):
        return self.stride

    def bind(self, *args):
        self.calls.append(("bind", *args))
        return lambda: None

    def close(self, *args):
        self.calls.append(("close", *args))


@pytest.fixture
def fake_nodes(monkeypatch):
    monkeypatch.setattr(kernel_node, "HostNode", FakeNode)
    monkeypatch.setattr(kernel_node, "GpuNode", type("GpuFake", (FakeNode,), {"note": "peer access is off"}))


def test_the_comm_struct_and_regions_it_builds(fake_nodes):
    comm = Comm(rank=1, size=4)
    k = NodeKernels(comm, "cpu", 2.5, 3)
    assert k.n == 4 and k.host_ranks == 4 and k.channels == 3 and k.note is None
    assert k.node.nbytes == kernel_abi.region_bytes(4, 3, kernel_abi.SLOT_BYTES["cpu"])
    s = k.struct
    assert (s.rank, s.nranks, s.channels, s.timeout_ns, s.slot_bytes) == (1, 4, 3, 2_500_000_000,
                                                                         kernel_abi.SLOT_BYTES["cpu"])
    assert list(s.region)[:4] == k.node.regions and s.error == 64
    assert s.spin_ns == int(kernel_abi.spin_time("cpu", 4) * 1e9)
    assert k.kernel_struct == ("uploaded", s) and comm.barriers == 1  # built collectively
    k.set_timeout(0.25)
    assert k.struct.timeout_ns == 250_000_000
    # more ranks share the host than the communicator holds (emulated nodes): the shorter spin
    crowded = NodeKernels(Comm(size=2), "cpu", 1.0, 1, host_ranks=10_000)
    assert crowded.host_ranks == 10_000 and crowded.struct.spin_ns == int(kernel_abi.SPIN_S["oversubscribed"] * 1e9)
    assert NodeKernels(Comm(size=4), "cpu", 1.0, 1, host_ranks=2).host_ranks == 4  # never fewer than its ranks
    gpu = NodeKernels(Comm(), "cuda", 1.0, 2)
    assert gpu.node.nbytes == kernel_abi.region_bytes(2, 2, kernel_abi.SLOT_BYTES["cuda"]) and gpu.note == "peer access is off"
    assert gpu.struct.spin_ns == int(kernel_abi.SPIN_S["cuda"] * 1e9)


def test_only_kernels_beside_gloos_transfers_nap(fake_nodes):
    """hierarchical_kernel's node kernels (beside_backend) nap in a long wait beside gloo, whose
    transfers block in the OS; never beside MPI's, which poll, nor on a GPU; a job's own never."""
    gloo, mpi = Comm(), Comm()
    gloo.backend, mpi.backend = "gloo", "mpi"
    assert NodeKernels(gloo, "cpu", 1.0, 1, beside_backend=True).struct.nap_ns == int(kernel_abi.NAP_S * 1e9) > 0
    assert NodeKernels(gloo, "cpu", 1.0, 1).struct.nap_ns == 0
    assert NodeKernels(mpi, "cpu", 1.0, 1, beside_backend=True).struct.nap_ns == 0
    assert NodeKernels(gloo, "cuda", 1.0, 1, beside_backend=True).struct.nap_ns == 0


def test_a_calls_channels(fake_nodes):
    k = NodeKernels(Comm(), "cpu", 1.0, 2)
    assert k.call_channels(1 << 30, 1, *PROBE) == 1 and k.call_channels(8, 5, *PROBE) == 2  # asked for: at most the node's
    assert k.call_channels(8, None, *PROBE) == 1  # by size: small calls get one
    assert k.call_channels(1 << 30, None, *PROBE) == min(2, kernel_abi.auto_channels("cpu", 1 << 30, 2))


def test_small_calls_run_the_one_shot_schedule_on_one_channel(fake_nodes, monkeypatch):
    """Each peer's message up to ONESHOT_MAX (per collective; all-reduce per kernel) runs one-shot, on one
    channel whatever was asked; past it the kernel's own schedule; every one-shot message where the host's
    ranks outnumber its cores (all-gather: blocks up to 512 B); never on a GPU (unverified there) nor for one
    rank."""
    pretend_machine(monkeypatch, cpus=2)
    most = {c: kernel_abi.oneshot_max("cpu", c, "ring") for c in ("all_reduce", "reduce_scatter", "all_gather")}
    k = NodeKernels(Comm(size=2), "cpu", 1.0, 4)
    for kernel in ("ring", "tree"):
        limit = kernel_abi.oneshot_max("cpu", "all_reduce", kernel)
        assert k.entry_and_channels(kernel, "all_reduce", "float32", "max", limit, 1 << 30, 4) == (
            "cb_oneshot_all_reduce_float32_max", 1)
        assert k.entry_and_channels(kernel, "all_reduce", "float32", "max", limit + 4, 1 << 30, 4) == (
            f"cb_{kernel}_all_reduce_float32_max", 4)
    assert (kernel_abi.oneshot_max("cpu", "all_reduce", "tree"), most["all_reduce"]) == (256, 512)  # the tree's own sooner
    assert k.entry_and_channels("ring", "reduce_scatter", "int8", "sum", most["reduce_scatter"], 1, None) == (
        "cb_oneshot_reduce_scatter_int8_sum", 1)
    assert k.entry_and_channels("ring", "all_gather", None, None, most["all_gather"], 1, None) == ("cb_oneshot_all_gather", 1)
    assert k.entry_and_channels("ring", "all_gather", None, None, most["all_gather"] + 1, 1, None)[0] == "cb_ring_all_gather"
    crowded = NodeKernels(Comm(size=4), "cpu", 1.0, 1)  # 4 ranks, 2 cores: every one-shot message (all-gather 512 B)
    assert crowded.entry_and_channels("tree", "all_reduce", "float32", "sum", kernel_abi.ONESHOT_BYTES, 8,
                                      None)[0] == "cb_oneshot_all_reduce_float32_sum"
    assert crowded.entry_and_channels("tree", "all_reduce", "float32", "sum", kernel_abi.ONESHOT_BYTES + 4, 8,
                                      None)[0] == "cb_tree_all_reduce_float32_sum"
    assert crowded.entry_and_channels("ring", "all_gather", None, None, 512, 1, None)[0] == "cb_oneshot_all_gather"
    assert crowded.entry_and_channels("ring", "all_gather", None, None, 513, 1, None)[0] == "cb_ring_all_gather"
    assert kernel_abi.ONESHOT_BYTES == kernel_abi.ONESHOT_LINES * 56 and max(most.values()) <= kernel_abi.ONESHOT_BYTES
    gpu = NodeKernels(Comm(size=2), "cuda", 1.0, 1)
    assert gpu.entry_and_channels("ring", "all_reduce", "float32", "sum", 8, 8, 1)[0] == "cb_ring_all_reduce_float32_sum"
    alone = NodeKernels(Comm(size=1), "cpu", 1.0, 1)
    assert alone.entry_and_channels("tree", "all_reduce", "float32", "sum", 8, 8, None)[0] == "cb_tree_all_reduce_float32_sum"


def test_the_allocator_falls_back_to_the_communicators_buffers(fake_nodes):
    k = NodeKernels(Comm(), "cpu", 1.0, 1)
    notes = []
    alloc = k.allocator(notes, arena="the arena")
    assert len(alloc(10, F32)) == 10 and notes == []
    assert k.node.calls[-1] == ("buffer", 10, "the arena")
    big = alloc(1000, F32)
    assert len(big) == 1000 and not big.any()
    assert notes == ["/dev/shm has no room for 4096 bytes: these buffers stay the communicator's (ring_kernel "
                     "all-gather and all-reduce through the FIFOs)"]
    assert NodeKernels(Comm(), "cuda", 1.0, 1).allocator([]) is None  # a GPU: the communicator's buffers


def test_direct_only_where_every_rank_has_its_buffers_in_reach(fake_nodes):
    x = np.zeros(8, np.float32)
    args = ("cb_ring_all_gather", None, x, x, 32, 1)
    alike = NodeKernels(Comm(others=8192), "cpu", 1.0, 1)
    alike.bind(*args, direct=True)
    alike.bind(*args)
    assert [c[-1] for c in alike.node.calls] == [8192, 0]  # not direct: through the FIFOs
    assert alike.node.calls[0][1:-1] == (alike.kernel_struct, "cb_ring_all_gather", None, x.ctypes.data,
                                         x.ctypes.data, 32, 1)
    differ = NodeKernels(Comm(others=0), "cpu", 1.0, 1)  # another rank's buffers are not the allocator's
    differ.bind(*args, direct=True)
    assert differ.node.calls[-1][-1] == 0
    gpu = NodeKernels(Comm(), "cuda", 1.0, 1)
    gpu.bind(*args, direct=True)
    assert len(gpu.node.calls[-1]) == 8  # a GPU's bind takes no stride


def test_close(fake_nodes):
    comm = Comm()
    cpu = NodeKernels(comm, "cpu", 1.0, 1)
    cpu.close()
    assert comm.barriers == 2 and cpu.node.calls == [("close",)]  # every rank is done before the memory goes
    gpu_comm = Comm()
    gpu = NodeKernels(gpu_comm, "cuda", 1.0, 1)
    gpu.close()
    assert gpu.node.calls == [("close", gpu_comm)] and gpu_comm.barriers == 1


def test_why_the_kernels_are_unavailable(monkeypatch):
    def refuse():
        raise KernelUnavailable("ring_kernel and tree_kernel need a C++ compiler")

    monkeypatch.setattr(kernel_node, "host_library", refuse)
    assert kernel_node.unavailable("cpu") == "ring_kernel and tree_kernel need a C++ compiler"
    monkeypatch.setattr(kernel_node, "host_library", lambda: (_ for _ in ()).throw(FileNotFoundError("collectives.cu")))
    assert kernel_node.unavailable("cpu") == ("ring_kernel and tree_kernel did not build for the CPU (the host build) "
                                              "(FileNotFoundError: collectives.cu)")  # not "for the GPU" on a CPU run
    monkeypatch.setattr(kernel_node, "host_library", lambda: "built")
    assert kernel_node.unavailable("cpu") is None
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    asked = []

    def nvrtc_fails(name, dtype, device):
        asked.append((name, dtype, device))
        raise RuntimeError("NVRTC_ERROR_COMPILATION\nline 2 of the log")

    monkeypatch.setattr(kernel_node, "gpu_function", nvrtc_fails)
    assert kernel_node.unavailable("cuda") == ("ring_kernel and tree_kernel did not build for the GPU "
                                               "(RuntimeError: NVRTC_ERROR_COMPILATION)")
    assert asked == [("cb_ring_all_reduce_float32_sum", "float32", 0)]
    monkeypatch.setattr(kernel_node, "gpu_function", lambda *a: (_ for _ in ()).throw(KernelUnavailable("no cupy")))
    assert kernel_node.unavailable("cuda") == "no cupy"


# --- the product's path: two thread ranks, the host build, /dev/shm ----------------------------------

@needs_compiler
def test_two_ranks_reduce_and_gather_exactly_through_the_host_kernels():
    n = 1000

    def rank(comm):
        k = NodeKernels(comm, "cpu", 20.0, 2)
        notes = []
        alloc = k.allocator(notes)
        # all-gather in place, in the allocator's shared buffers: direct (each reads its neighbour's)
        gathered = alloc(2 * n, F32)
        mine = gathered[comm.rank * n:(comm.rank + 1) * n]
        mine[:] = np.arange(n) + 1000 * comm.rank
        stride = k.node.stride_of(mine.ctypes.data, gathered.ctypes.data)
        k.bind(kernel_abi.entry("ring", "all_gather", "float32", None), "float32", mine, gathered, n * 4,
               k.call_channels(2 * n * 4, None, *PROBE), direct=True)()
        # all-reduce out of place in the communicator's own buffers: through the FIFOs
        send, recv = comm.alloc(3 * n, F32), comm.alloc(3 * n, F32)
        send[:] = np.arange(3 * n) * (comm.rank + 1)
        k.set_timeout(10.0)
        k.bind(kernel_abi.entry("ring", "all_reduce", "float32", "sum"), "float32", send, recv, 3 * n, 2)()
        result = gathered.copy(), recv.copy(), notes, stride
        k.close()
        return result

    for gathered, reduced, notes, stride in World(2).run(rank):
        assert notes == [] and stride > 0
        assert np.array_equal(gathered, np.concatenate([np.arange(n), np.arange(n) + 1000]))
        assert np.array_equal(reduced, np.arange(3 * n) * 3.0)


def test_the_tuning_variables_reach_the_comm_struct(fake_nodes, monkeypatch):
    """Issue 64: COMMBENCH_KERNEL_SLOT_BYTES, _SPIN_US, _NAP_US, _CACHED_BYTES, _DIRECT_SLOTS and
    _TREE_SPLIT_BYTES set what each CbComm carries (and the
    regions' size follows the slot); unset, the defaults above."""
    monkeypatch.setenv("COMMBENCH_KERNEL_SLOT_BYTES", "8192")
    monkeypatch.setenv("COMMBENCH_KERNEL_SPIN_US", "7.5")
    monkeypatch.setenv("COMMBENCH_KERNEL_NAP_US", "0")
    monkeypatch.setenv("COMMBENCH_KERNEL_CACHED_BYTES", "1000")
    monkeypatch.setenv("COMMBENCH_KERNEL_DIRECT_SLOTS", "2")
    monkeypatch.setenv("COMMBENCH_KERNEL_TREE_SPLIT_BYTES", "512")
    gloo = Comm()
    gloo.backend = "gloo"
    k = NodeKernels(gloo, "cpu", 1.0, 2, beside_backend=True)
    assert k.struct.slot_bytes == 8192 and k.node.nbytes == kernel_abi.region_bytes(2, 2, 8192)
    assert k.struct.spin_ns == 7500 and k.struct.nap_ns == 0
    gpu = NodeKernels(Comm(), "cuda", 1.0, 2)
    assert gpu.struct.slot_bytes == 8192 and gpu.struct.spin_ns == 7500
    assert {(s.cached_bytes, s.direct_slots, s.tree_split_bytes) for s in (k.struct, gpu.struct)} == {(1000, 2, 512)}
