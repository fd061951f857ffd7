"""ring_kernel and tree_kernel (their ring, tree and one-shot schedules) on a real GPU (skipped without one).

* One process, every rank in one launch (gridDim.y = ranks): the cheapest real test of the device
  protocol. Every rank's blocks run at once over regions in one allocation, so flags, fences,
  chunking and channels run on the hardware, for every dtype x op x collective, odd sizes and
  64 MB. Bandwidth there is HBM-bound, not NVLink-bound.
* Several processes sharing the GPU through `commbench run --backend gloo --device cuda`: the
  regions opened by CUDA IPC, the kernel on each rank's stream (MPS makes them run side by side;
  without it they take turns, which is correct and slow).
"""

import glob

import numpy as np
import pytest

from conftest import commbench, load_run
from sweep_checks import check_sweep

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
cupy = pytest.importorskip("cupy")

from commbench.kernels import abi as kernel_abi  # noqa: E402
from commbench.kernels.gpu import OneGpuNode  # noqa: E402
from commbench.kernels.reducers import CUDA_DTYPES, CUDA_OPS  # noqa: E402
from commbench.errors import OK

REFERENCE = {"sum": torch.add, "prod": torch.mul, "min": torch.minimum, "max": torch.maximum}


def _values(shape, dtype, seed):
    """Drawn on the GPU (on the CPU, 8 ranks' reduce-scatter inputs of 8 x 1000003 elements each for the
    64 largest calls: that one-launch case took 45 s on an H200, the all-gather ones 1-8)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    low, high = (-2, 3) if dtype != "uint8" else (0, 3)  # small integers: exact in every dtype and order
    return torch.randint(low, high, shape, generator=g, device="cuda").to(getattr(torch, dtype))


def _reduce(x, op):
    out = x[0].clone()
    for row in x[1:]:
        out = REFERENCE[op](out, row)
    return out


def _collective(node, algorithm, collective, dtype, op, count, channels, seed=0, direct=False):
    """One call for every rank at once, out of place (one launch takes one base and one stride
    per buffer; in place runs in the multi-process test): (every rank's output, the expected).
    direct: all-gather and the ring all-reduce read their neighbour's buffers instead of going through the FIFOs."""
    n = node.n
    in_count = count * n if collective == "reduce_scatter" else count
    out_count = count * n if collective == "all_gather" else count
    data = _values((n, in_count), dtype, seed)
    slab = max(in_count, out_count)  # each rank's buffers, one stride apart
    send = torch.zeros((n, slab), dtype=data.dtype, device="cuda")
    send[:, :in_count] = data
    recv = torch.full((n, slab), 7, dtype=data.dtype, device="cuda")
    item = send.element_size()
    units = count * item if collective == "all_gather" else count
    node.run(kernel_abi.entry(algorithm, collective, dtype, op), dtype, send.data_ptr(), recv.data_ptr(), units,
             slab * item, channels, direct=direct)
    torch.cuda.synchronize()
    assert node.error_words[0] == 0, kernel_abi.describe(node.error_words.tolist(), algorithm)
    if collective == "all_reduce":
        expected = _reduce(data, op).expand(n, -1)
    elif collective == "reduce_scatter":
        total = _reduce(data, op)
        expected = torch.stack([total[r * count:(r + 1) * count] for r in range(n)])
    else:
        expected = data.reshape(1, -1).expand(n, -1)
    return recv[:, :out_count], expected


# 25 float32: a tree's slice in two small messages (CB_INLINE_BYTES); one-shot: 1, 7 and 25 in its lines
# (alternating places: one call per size, channel count, dtype and op), 1000003 past them (the ring's schedule)
SIZES = [1, 7, 25, 1000003]


@pytest.mark.parametrize("n", [2, 3, 4, 8])
@pytest.mark.parametrize("algorithm,collective,direct", [
    ("ring", "all_reduce", False), ("ring", "all_reduce", True), ("tree", "all_reduce", False),
    ("ring", "reduce_scatter", False),
    ("ring", "all_gather", False), ("ring", "all_gather", True),
    ("oneshot", "all_reduce", False), ("oneshot", "reduce_scatter", False), ("oneshot", "all_gather", False)])
def test_every_rank_in_one_launch(n, algorithm, collective, direct):
    node = OneGpuNode(n, channels=4)
    for dtype in CUDA_DTYPES:
        for op in (CUDA_OPS if collective != "all_gather" else ["sum"]):
            for count in SIZES:
                for channels in (1, 3):
                    got, expected = _collective(node, algorithm, collective, dtype, op, count, channels,
                                                seed=count + channels, direct=direct)
                    assert torch.equal(got, expected.to(got.dtype)), (dtype, op, count, channels)


def test_64_mb_and_back_to_back_calls_of_varying_size():
    node = OneGpuNode(4, channels=8)
    rng = np.random.default_rng(1)
    for i in range(300):  # one-shot calls among them: up to 1000 float32, either side of its 3584 bytes
        algorithm = ("ring", "tree", "oneshot")[i % 3]
        count = int(rng.integers(1, 1000 if algorithm == "oneshot" else 1 << 16))
        got, expected = _collective(node, algorithm, "all_reduce", "float32", "sum", count,
                                    1 if algorithm == "oneshot" else int(rng.integers(1, 9)), seed=i)
        assert torch.equal(got, expected)
    got, expected = _collective(node, "ring", "all_reduce", "float32", "sum", 16 << 20, 8)  # 64 MB
    assert torch.equal(got, expected)


def test_a_wait_that_times_out_names_the_rank_and_the_step():
    node = OneGpuNode(2, channels=1, timeout_s=0.2)
    data = torch.ones(1024, device="cuda")
    node.run("cb_ring_all_reduce_float32_sum", "float32", data.data_ptr(), data.data_ptr(), 1024, 0, 1, ranks=1)
    torch.cuda.synchronize()  # only rank 0 of 2 ran: it waited for rank 1 until the timeout
    text = kernel_abi.describe(node.error_words.tolist(), "ring_all_reduce")
    assert node.error_words[0] == 1 and "rank 0 timed out at step" in text and "rank 1" in text, text


@pytest.mark.parametrize("world", [2, 4])
def test_ring_and_tree_kernels_in_separate_processes(job, tmp_path, world):
    before = set(glob.glob("/dev/shm/commbench-*"))
    out = tmp_path / "run"
    commbench("run", "-n", world, "--backend", "gloo", "--device", "cuda", "-a", "ring_kernel,tree_kernel",
              "-c", "all_reduce,all_gather,reduce_scatter", "--sizes", "8,1028,1M,16M",
              "-d", "float32,bfloat16,int8", "-o", "sum,avg", "--both", "--iters", 5, "--warmup", 2,
              "--out", out, "--quiet", check_rc=OK)
    rows, samples, meta = load_run(out)
    check_sweep(rows, samples, meta, world, meta["planned_points"] - len(meta["skipped"]))
    assert (rows.device == "cuda").all() and (rows.wrong == 0).all()
    assert set(rows[rows.algorithm == "ring_kernel"].collective) == {"all_reduce", "all_gather", "reduce_scatter"}
    assert set(rows[rows.algorithm == "tree_kernel"].collective) == {"all_reduce"}
    assert set(glob.glob("/dev/shm/commbench-*")) == before


def test_a_launch_that_cannot_be_resident_is_refused_not_hung():
    """More blocks than the GPU holds at once: refused in one line before launching (it would spin
    into the timeout); the channel count it names fits and runs."""
    from commbench.kernels.gpu import KernelUnavailable, residency

    fit = residency("cb_ring_all_reduce_float32_sum", "float32", torch.cuda.current_device())
    assert fit.blocks_per_sm >= 1 and fit.sms == torch.cuda.get_device_properties(0).multi_processor_count
    n = 8  # an H100 SXM: 132 // 8 = 16 channels fit, 17 do not
    most = fit.max_channels(n)
    node = OneGpuNode(n, channels=min(most + 1, kernel_abi.MAX_CHANNELS))
    if most + 1 <= kernel_abi.MAX_CHANNELS:  # (a GPU of more than 16 SMs x blocks per SM: 32 channels fit)
        with pytest.raises(KernelUnavailable, match=f"use --channels {most} or fewer"):
            _collective(node, "ring", "all_reduce", "float32", "sum", 1 << 20, most + 1)
    got, expected = _collective(node, "ring", "all_reduce", "float32", "sum", 1 << 20, min(most, kernel_abi.MAX_CHANNELS))
    assert torch.equal(got, expected)


def test_this_gpus_layout_has_no_peer_refusal():
    """One process, one GPU: nothing to map across GPUs; the identity is the UUID (per-rank
    CUDA_VISIBLE_DEVICES cannot make two GPUs look like one)."""
    from commbench.kernels.gpu import device_identity, layout

    class One:
        rank, size = 0, 1

        def allgather_object(self, obj):
            return [obj]

    identity, bus = device_identity(torch.cuda.current_device())
    assert len(identity) == 32 and ":" in bus  # 16 bytes of UUID in hex; a PCI bus id
    assert layout(One()).peer_reason is None
