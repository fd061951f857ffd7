"""Where CudaReducer launches, checked on the CPU: the kernels built for the host (tests/host_cuda.py)
stand in for the GPU, torch.cuda's current device and stream are per-thread fakes, and a rank whose
GPU is 1 runs hierarchical (its pipeline's thread) on the NCCL-semantics communicator. Every launch must
go to device 1 and to device 1's stream, and the pipeline's thread must enter device 1 first; a
reducer whose kernels do not build falls back to torch's arithmetic with one line saying why."""

import re
import sys
import threading
import types

import pytest

torch = pytest.importorskip("torch")

import host_cuda  # noqa: E402
from commbench.dtypes import DTYPES  # noqa: E402
from commbench.kernels import reducers as kernels  # noqa: E402
from commbench.algorithms import ALGORITHMS, Context  # noqa: E402
from host_cuda import HostReducer  # noqa: E402
from nccl_semantics import World  # noqa: E402

if host_cuda.missing():
    pytest.skip(host_cuda.missing(), allow_module_level=True)

RANK_GPU = 1


class FakeCuda:
    """torch.cuda's thread-local current device (0 in a new thread) and per-device streams."""

    def __init__(self):
        self.local, self.entered = threading.local(), []

    def current_stream(self, device=None):
        index = getattr(self.local, "device", 0) if device is None else device
        return types.SimpleNamespace(cuda_stream=1000 + index)

    def enter(self, rank):
        self.local.device = RANK_GPU
        self.entered.append(rank)


class RealStreamReducer(HostReducer):
    """HostReducer asking torch for the stream the way CudaReducer does (not HostReducer's 0)."""

    _stream = kernels.CudaReducer._stream


@pytest.fixture(scope="module")
def host_kernels(tmp_path_factory):
    return host_cuda.build(kernels.REDUCE_SOURCE, tmp_path_factory.mktemp("host-kernels"))


@pytest.mark.parametrize("threads_enter", [True, False], ids=["threads-enter-the-gpu", "threads-on-gpu-0"])
def test_hierarchical_threads_launch_on_the_ranks_gpu(host_kernels, monkeypatch, threads_enter):
    """With or without the pipeline's thread entering the rank's GPU (its current device is 0
    if it does not), every launch goes to device 1 and its stream."""
    fake = FakeCuda()
    monkeypatch.setattr(torch.cuda, "current_stream", fake.current_stream)
    reducers = {}
    world, count = 4, 101  # two nodes of two ranks; 101 elements: several pipeline chunks of 4-element segments

    def make(rank):
        reducers[rank] = RealStreamReducer(host_kernels, device=RANK_GPU)
        return reducers[rank]

    def rank_main(comm):
        fake.local.device = RANK_GPU  # the rank's main thread: torch.cuda.set_device(1) at start-up
        ctx = Context(comm, [0, 0, 1, 1], segment_elems=4)
        buf = comm.alloc(count, DTYPES["float32"])
        buf[:] = torch.arange(count, dtype=torch.float32) * (comm.rank + 1)
        ALGORITHMS["hierarchical"].all_reduce(ctx, buf, "sum")
        return buf

    out = World(world, buffers="torch", reducer=make,
                on_thread=fake.enter if threads_enter else None).run(rank_main)
    expected = torch.arange(count, dtype=torch.float32) * sum(range(1, world + 1))
    assert all(torch.equal(b, expected) for b in out)
    targets = {t for r in reducers.values() for t in r.targets}
    assert targets == {(RANK_GPU, 1000 + RANK_GPU)}, targets
    if threads_enter:  # each rank's pipeline thread (the crossing's) entered its GPU
        assert sorted(fake.entered) == list(range(world))


def test_a_reducer_whose_kernels_do_not_build_falls_back(monkeypatch):
    """An NVRTC failure (here: a header NVRTC cannot find) is one line, and torch reduces."""
    def broken(source):
        raise RuntimeError("NVRTC_ERROR_COMPILATION (6)\ncuda_bf16.h(10): catastrophic error: cannot open source file")

    fake_cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(Device=lambda i: threading.Lock()))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setattr(kernels, "cuda_module", broken)
    red = kernels.gpu_reducer(0)  # nothing is built yet: opening a NCCL backend cannot fail here
    assert red.fallback is None
    a, b = torch.tensor([1.0, 5.0, -2.0]), torch.tensor([4.0, 2.0, 3.0])
    red.reduce(a, b, "max")
    many = torch.zeros(3)
    red.reduce_many(many, [torch.ones(3), b, b], "sum")
    assert a.tolist() == [4.0, 5.0, 3.0] and many.tolist() == [9.0, 5.0, 7.0]
    assert red.fallback == ("commbench's CUDA reduction kernels did not build (RuntimeError: NVRTC_ERROR_COMPILATION (6)); "
                            "torch's arithmetic reduces instead")


def test_without_cupy_the_reducer_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    red = kernels.gpu_reducer(0)
    x = torch.tensor([2, 3], dtype=torch.int32)
    red.reduce(x, torch.tensor([5, 7], dtype=torch.int32), "prod")
    assert x.tolist() == [10, 21]
    assert re.match(r"commbench's CUDA reduction kernels did not build \((ModuleNotFound|Import)Error: ", red.fallback)
