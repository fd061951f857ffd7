"""The GPU kernels' guards, driven on the CPU by fake device properties (commbench/kernels/gpu.py):
a launch whose blocks cannot all be resident at once is refused in one line (SMs, blocks per SM,
MPS's active-thread share, processes sharing the GPU), the automatic channel count stays within
it, and GPUs without peer access skip the kernel algorithms with the reason (native points run).
What only a GPU can show (the occupancy CUDA reports, IPC) is for tests/gpu/test_kernels_cuda.py."""

import sys
from types import SimpleNamespace

import pytest

from commbench.kernels import gpu as kernel_gpu
from commbench.kernels import node as kernel_node
from commbench.algorithms import ALGORITHMS, Context
from commbench.kernels.gpu import Layout, Residency, peer_refusal

H100_SXM, H100_PCIE, A100 = 132, 114, 108  # SMs; every ring / tree kernel: one 512-thread block per SM


def test_benchmark_default_fits_an_h100_sxm_but_not_a_pcie_card_or_an_a100():
    """benchmarks/kernels_one_gpu.py's 8 ranks x 16 channels in one launch: 128 blocks."""
    assert Residency(1, H100_SXM).refusal(16, ranks_per_launch=8) is None
    for sms in (H100_PCIE, A100):
        line = Residency(1, sms).refusal(16, ranks_per_launch=8)
        assert line == (f"ring_kernel / tree_kernel need 16 channels x 8 ranks = 128 blocks resident at once; this GPU "
                        f"holds 1 per SM x {sms} SMs: use --channels {sms // 8} or fewer")
        assert Residency(1, sms).refusal(sms // 8, ranks_per_launch=8) is None  # what it says fits


def test_two_blocks_per_sm_double_what_fits():
    assert Residency(2, H100_PCIE).max_channels(ranks_per_launch=8) == 28
    assert Residency(2, H100_PCIE).refusal(29, ranks_per_launch=8) is not None


def test_mps_active_thread_share_limits_one_client():
    r = Residency(1, H100_SXM, mps=True, mps_percent=50)
    assert r.client_sms() == 66 and r.max_channels() == 66
    line = r.refusal(67)
    assert "67 channels = 67 blocks" in line and "1 per SM x 66 SMs, MPS active threads 50 % of 132" in line
    assert Residency(1, H100_SXM, mps=False, mps_percent=50).max_channels() == H100_SXM  # no MPS: no share


def test_processes_sharing_a_gpu_under_mps_must_all_be_resident():
    """Under MPS the processes' kernels run side by side and wait on one another's blocks: all of
    them at once. Without MPS they take turns (time slices): each process's own blocks only."""
    assert Residency(1, H100_SXM, mps=True).max_channels(sharing=4) == 33
    line = Residency(1, H100_SXM, mps=True).refusal(40, sharing=4)
    assert "40 channels x 4 processes under MPS = 160 blocks" in line and "--channels 33 or fewer" in line
    assert Residency(1, H100_SXM, mps=False).refusal(40, sharing=4) is None


def test_a_kernel_that_fits_no_block_is_refused_at_any_channel_count():
    line = Residency(0, H100_SXM).refusal(1)
    assert "0 per SM" in line and "not even one channel" in line


# --- peer access ---------------------------------------------------------------------------------------------
BUSES = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"]


def _ordinals(visible=BUSES):
    return lambda bus: visible.index(bus) if bus in visible else None


def test_every_pair_with_peer_access_passes():
    assert peer_refusal(0, BUSES, ["a", "b", "c", "d"], _ordinals(), lambda a, b: True) is None


def test_a_pair_without_peer_access_is_named():
    matrix = lambda a, b: {a, b} != {0, 2}  # noqa: E731 - GPUs 0 and 2: no P2P between them
    assert peer_refusal(1, BUSES, list("abcd"), _ordinals(), matrix) is None  # rank 1 reaches everyone
    line = peer_refusal(2, BUSES, list("abcd"), _ordinals(), matrix)
    assert line == ("rank 2's GPU (0000:3a:00.0) has no peer access to rank 0's (0000:18:00.0): "
                    "cudaDeviceCanAccessPeer says no (no NVLink or PCIe P2P between them)")


def test_ranks_on_one_gpu_and_ranks_on_other_nodes_need_no_peer_access():
    """Two ranks sharing a GPU (same UUID); ranks 2 and 3 on another node whose bus ids are the
    same numbers as this node's (PCI addresses repeat across machines)."""
    never = lambda a, b: False  # noqa: E731
    buses = [BUSES[0], BUSES[0], BUSES[0], BUSES[1]]
    assert peer_refusal(0, buses, ["u0", "u0", "x", "y"], _ordinals(), never, [True, True, False, False]) is None


def test_a_gpu_hidden_by_cuda_visible_devices_cannot_be_opened():
    line = peer_refusal(0, BUSES[:2], ["a", "b"], _ordinals(visible=BUSES[:1]), lambda a, b: True)
    assert "rank 1's GPU (0000:2a:00.0) is not visible to rank 0 (CUDA_VISIBLE_DEVICES)" in line


# --- wired into the algorithms and the channel count ----------------------------------------------------------
class GpuComm:
    """What the kernels' checks ask of a communicator of two ranks on one node's GPUs."""

    rank, size, device, carries_device_buffers, backend = 0, 2, "cuda", True, "nccl"

    def allgather_object(self, obj):
        return [obj, obj]


@pytest.fixture
def gpu(monkeypatch):
    """kernel_gpu's view of the GPUs, faked: the layout and the probe kernel's residency; the
    kernels build (no NVRTC here)."""
    state = SimpleNamespace(layout=Layout(sharing=1, peer_reason=None), residency=Residency(1, H100_PCIE), calls=0)

    def layout(comm, node_of_rank=None):
        state.calls += 1
        return state.layout
    monkeypatch.setattr(kernel_gpu, "layout", layout)
    monkeypatch.setattr(kernel_gpu, "probe_residency", lambda: state.residency)
    monkeypatch.setattr(kernel_node, "unavailable", lambda device: None)
    return state


@pytest.mark.parametrize("algorithm", ["ring_kernel", "tree_kernel", "hierarchical_kernel"])
def test_no_peer_access_skips_the_kernel_algorithms_with_the_reason(gpu, algorithm):
    gpu.layout = Layout(sharing=1, peer_reason="rank 1's GPU has no peer access to rank 0's")
    ctx = Context(GpuComm(), [0, 0])
    reason = ALGORITHMS[algorithm].unsupported(ctx, "all_reduce")
    assert reason and "rank 1's GPU has no peer access to rank 0's" in reason
    assert ALGORITHMS[algorithm].unsupported(ctx, "all_reduce") == reason and gpu.calls == 1  # asked once a job
    assert ALGORITHMS["ring"].unsupported(ctx, "all_reduce") is None  # the others still run


def test_channels_asked_for_beyond_residency_are_refused_up_front(gpu):
    ctx = Context(GpuComm(), [0, 0], channels=200)
    assert "use --channels 114 or fewer" in ALGORITHMS["ring_kernel"].unsupported(ctx, "all_reduce")
    fits = Context(GpuComm(), [0, 0], channels=114)
    assert ALGORITHMS["ring_kernel"].unsupported(fits, "all_reduce") is None


def test_automatic_channels_stay_within_residency():
    """A GPU call gets a channel per 512 KB up to 16, and never more than can be resident (kept
    apart from its cap of 32 for the regions); asked for explicitly, the bind refuses instead."""
    node = kernel_node.NodeKernels.__new__(kernel_node.NodeKernels)
    node.device, node.channels, node.host_ranks = "cuda", 32, 2
    node.node = SimpleNamespace(max_channels=lambda name, dtype: 5)
    assert node.call_channels(1 << 30, None, "cb_ring_all_reduce_float32_sum", "float32") == 5
    assert node.call_channels(1 << 20, None, "cb_ring_all_reduce_float32_sum", "float32") == 2  # by size
    assert node.call_channels(1 << 30, 12, "cb_ring_all_reduce_float32_sum", "float32") == 12
    node.node = SimpleNamespace(max_channels=lambda name, dtype: 0)
    assert node.call_channels(1 << 30, None, "x", "float32") == 1  # (the bind refuses it in one line)


def test_the_layout_is_asked_even_where_this_rank_cannot_build(monkeypatch, gpu):
    """Every rank joins the GPU comparison (collective) whatever its own build says, so no rank
    waits for another in it; the build's reason comes first."""
    monkeypatch.setattr(kernel_node, "unavailable", lambda device: "NVRTC failed")
    assert ALGORITHMS["ring_kernel"].unsupported(Context(GpuComm(), [0, 0]), "all_reduce") == "NVRTC failed"
    assert gpu.calls == 1


def test_layout_without_a_gpu_stack_is_one_line_on_every_rank():
    """No CuPy or torch.cuda here: the identity cannot be read; the ranks still gather (collective)
    and every one returns the same reason."""
    lay = kernel_gpu.layout(GpuComm())
    assert lay.sharing == 1 and lay.peer_reason.startswith("the GPU's identity cannot be read (")
    assert "\n" not in lay.peer_reason


# --- residency from CuPy ----------------------------------------------------------------------------------
class RawKernel:
    """CuPy's RawModule.get_function result (cupy._core.raw.RawKernel): no .ptr of its own; the
    CUfunction is .kernel.ptr (a cupy.cuda.function.Function). Its .ptr is what an H200 run found missing."""

    def __init__(self, handle):
        self.kernel = SimpleNamespace(ptr=handle)


def _cupy(monkeypatch, occupancy):
    asked = []
    attrs = {"MultiProcessorCount": H100_SXM, "MaxThreadsPerMultiProcessor": 2048,
             "MaxRegistersPerMultiprocessor": 65536}

    class Device:
        def __init__(self, ordinal):
            self.attributes = attrs

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    driver = SimpleNamespace(funcGetAttribute=lambda attr, fn: asked.append(("regs", attr, fn)) or 88)
    if occupancy:
        driver.occupancyMaxActiveBlocksPerMultiprocessor = lambda fn, threads, smem: asked.append(
            ("occupancy", fn, threads)) or 1
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=SimpleNamespace(Device=Device, driver=driver)))
    monkeypatch.setattr(kernel_gpu, "gpu_function", lambda name, dtype, device: RawKernel(0xC0FFEE))
    kernel_gpu.residency.cache_clear()
    return asked


@pytest.mark.parametrize("occupancy", [True, False])
def test_residency_asks_cuda_about_the_kernels_cufunction(monkeypatch, occupancy):
    """By CUDA's occupancy call where CuPy has it, else from the kernel's registers: 88 x 512 threads
    leave one block per SM of 65,536 registers."""
    asked = _cupy(monkeypatch, occupancy)
    fit = kernel_gpu.residency("cb_ring_all_reduce_float32_sum", "float32", 0)
    kernel_gpu.residency.cache_clear()
    assert (fit.blocks_per_sm, fit.sms) == (1, H100_SXM)
    assert asked == ([("occupancy", 0xC0FFEE, kernel_gpu.GPU_THREADS)] if occupancy else
                     [("regs", kernel_gpu.CU_FUNC_ATTRIBUTE_NUM_REGS, 0xC0FFEE)])
