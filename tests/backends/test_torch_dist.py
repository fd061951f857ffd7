"""The torch.distributed backend (commbench/backends/torch_dist.py) with gloo at world size 1,
in this process (a TCPStore on a free local port; no launcher), destroyed at the end: its native
calls and their conventions, its refusals, tensor buffers, control calls, split and library_info."""

import socket

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist

from commbench.dtypes import DTYPES
from commbench.backends import torch_dist as T
from commbench.collectives import COLLECTIVES


@pytest.fixture(scope="module")
def comm():
    """One gloo world of one for the module; the process group is destroyed afterwards."""
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp = pytest.MonkeyPatch()
    mp.setenv("MASTER_ADDR", "127.0.0.1")
    mp.setenv("MASTER_PORT", str(port))
    try:
        c = T.TorchCommunicator("gloo", 0, 1, 0, 30.0)
        yield c
        c.close()
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        mp.undo()


def test_a_gloo_world_of_one(comm):
    assert (comm.rank, comm.size, comm.backend, comm.device, comm.ranks) == (0, 1, "gloo", "cpu", [0])
    assert comm.carries_device_buffers and comm.group is None
    assert type(comm.reducer).__name__ == "TorchReducer"


def test_the_native_call_table(comm):
    table = {c: comm.native_call(c) for c in COLLECTIVES}
    assert table["all_reduce"][1] is dist.all_reduce and table["all_reduce"][0].convention == "tensor_op"
    for c in ("all_gather", "reduce_scatter"):
        call, fn = table[c]
        assert fn is getattr(dist, next(n for n in call.function if hasattr(dist, n)))  # the first name torch has
    assert not T.CONVENTIONS["tensor_op"].out_of_place
    assert T.CONVENTIONS["output_input"].out_of_place and T.CONVENTIONS["output_input_op"].out_of_place
    assert set(T._OPS) == {"sum", "prod", "min", "max", "avg"}


def test_unsupported_reasons(comm):
    f32, i32 = DTYPES["float32"], DTYPES["int32"]
    assert comm.unsupported("all_reduce", f32, "sum", False) == (
        "torch.distributed.all_reduce works in place only (no out-of-place form to measure; in-place points measure it)")
    assert comm.unsupported("all_reduce", f32, "sum", False, native=False) is None
    assert comm.unsupported("all_reduce", f32, "sum", True) is None
    avg_int = "avg of integers truncates; commbench checks avg on floating-point types only"
    assert comm.unsupported("all_reduce", i32, "avg", True) == avg_int
    assert comm.unsupported("reduce_scatter", i32, "avg", False, native=False) == avg_int
    assert comm.unsupported("all_gather", DTYPES["bfloat16"], None, False) is None


def test_gloo_with_cuda_buffers_runs_the_peer_algorithms_only():
    """A gloo communicator on CUDA tensors (no process group needed to ask it)."""
    cuda_gloo = object.__new__(T.TorchCommunicator)
    cuda_gloo.carries_device_buffers = False
    assert cuda_gloo.unsupported("all_reduce", DTYPES["float32"], "sum", True) == (
        "gloo with --device cuda runs the peer algorithms only (gloo's own CUDA support is partial)")
    assert cuda_gloo.unsupported("all_reduce", DTYPES["float32"], "sum", True, native=False) is None


@pytest.mark.parametrize("op", ["sum", "prod", "min", "max", "avg"])
def test_all_reduce_in_place(comm, op):
    buf = torch.tensor([3.0, -1.0, 2.5])
    fn, out = comm.bind("all_reduce", buf, buf, op, True)
    assert out is buf and fn.capturable is False  # only NCCL's calls go into a CUDA graph
    fn()
    assert buf.tolist() == [3.0, -1.0, 2.5]


@pytest.mark.parametrize("in_place", [True, False])
def test_all_gather_and_reduce_scatter(comm, in_place):
    send = torch.tensor([4, 5, 6], dtype=torch.int64)
    for collective, op in (("all_gather", None), ("reduce_scatter", "max")):
        recv = send if in_place else torch.full((3,), -7, dtype=torch.int64)
        fn, out = comm.bind(collective, send, recv, op, in_place)
        fn()
        assert out is recv and recv.tolist() == [4, 5, 6]
        assert fn.args == (recv, send) + ((T._OPS[op],) if op else ()) and fn.keywords == {"group": None}


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8"])
def test_tensor_buffers(comm, name):
    dtype = DTYPES[name]
    buf = comm.alloc(5, dtype)
    assert buf.dtype == getattr(torch, dtype.torch_name) and buf.device.type == "cpu" and not buf.any()
    comm.write(buf, 1, np.array([3.0, 100.0]))
    got = comm.read(buf, 0, 5)
    assert got.dtype == np.float64 and got.tolist() == [0.0, 3.0, 100.0, 0.0, 0.0]
    comm.view(buf, 4, 1).fill_(2)
    assert buf[4].item() == 2
    like = comm.alloc_like(buf, 2)
    assert like.dtype == buf.dtype and like.tolist() == [0, 0]


def test_adopt_shares_host_memory(comm):
    memory = bytearray(8)
    buf = comm.adopt(memoryview(memory), 2, DTYPES["int32"])
    buf[1] = 7
    assert memory[4:8] == (7).to_bytes(4, "little")
    assert len(comm.adopt(memoryview(memory), 0, DTYPES["int32"])) == 0


def test_control_calls_of_one_rank(comm):
    comm.barrier()
    comm.enter_thread()
    comm.synchronize()
    assert comm.allgather_object(("x", 1)) == [("x", 1)]
    assert comm.reduce_host(np.array([1.5, -2.0]), "max").tolist() == [1.5, -2.0]
    assert comm.reduce_host(np.array([1.5, -2.0]), "sum").tolist() == [1.5, -2.0]


def test_split_makes_a_group_sharing_the_reducer(comm):
    sub = comm.split(0, 0)
    assert (sub.rank, sub.size, sub.ranks) == (0, 1, [0]) and sub.group is not None
    assert sub.reducer is comm.reducer and sub.backend == "gloo"
    buf = torch.tensor([2.0, 3.0])
    fn, _ = sub.bind("all_reduce", buf, buf, "sum", True)
    assert fn.keywords == {"group": sub.group}
    fn()
    assert buf.tolist() == [2.0, 3.0]
    sub.close()  # a sub-communicator leaves the process group alone
    assert dist.is_initialized()


def test_library_info(comm):
    assert comm.library_info() == {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
                                   "reducer": "TorchReducer"}


def test_gloo_registers_no_buffers_and_takes_none(comm):
    """--registration is NCCL's (commbench.backends.registration): gloo's communicator allocates plain
    buffers at none and refuses anything else (spec.validate refuses it first, this is the guard)."""
    comm.register_buffers("none")
    buf = comm.alloc_point(4, DTYPES["float32"])
    assert buf.device.type == "cpu" and buf.tolist() == [0.0] * 4
    with pytest.raises(RuntimeError, match="--registration local: gloo registers no buffers"):
        comm.register_buffers("local")
    assert comm.registration == "none"
