"""The MPI backend (commbench/backends/mpi.py) on mpi4py's COMM_WORLD as a singleton (a world
of one, in this process; no launcher): its native-call table, its refusals, the in-place layout it
hands MPI, numpy buffers, the C timing loop's note, and library_info."""

import re
import subprocess

import numpy as np
import pytest

pytest.importorskip("mpi4py")

from mpi4py import MPI

from commbench.binaries import find_binary
from commbench.dtypes import DTYPES
from commbench.kernels import mpi_loop
from commbench.backends import mpi as M
from commbench.collectives import COLLECTIVES

F32 = DTYPES["float32"]


@pytest.fixture
def comm():
    return M.MPICommunicator()


@pytest.fixture
def python_loop(monkeypatch):
    """The C loop unavailable: bind keeps the Python call alone and notes why, once."""
    def unavailable(*args):
        raise mpi_loop.LoopUnavailable("no loop here")

    monkeypatch.setattr(mpi_loop, "bind_loop", unavailable)


def test_a_singleton_world(comm):
    assert (comm.rank, comm.size, comm.backend, comm.device) == (0, 1, "mpi", "cpu")
    assert comm.comm is MPI.COMM_WORLD and comm.native_target is MPI.COMM_WORLD
    assert type(comm.reducer).__name__ == "NumpyReducer" and comm.notes == []


def test_the_native_call_table(comm):
    """Each collective's declared mpi4py function, resolved on the communicator, through a
    convention this backend knows."""
    names = {c: comm.native_call(c)[0].name for c in COLLECTIVES}
    assert names == {"all_reduce": "Allreduce", "all_gather": "Allgather", "reduce_scatter": "Reduce_scatter_block",
                     "broadcast": "Bcast", "reduce": "Reduce", "all_to_all": "Alltoall", "all_to_allv": "Alltoallv", "gather": "Gather",
                     "scatter": "Scatter", "send_recv": "Sendrecv"}
    for c in COLLECTIVES:
        call, fn = comm.native_call(c)
        assert fn == getattr(MPI.COMM_WORLD, names[c]) and call.convention in M.CONVENTIONS
        assert M.CONVENTIONS[call.convention].out_of_place == (c != "broadcast")  # MPI_Bcast: one buffer
    assert set(M._OPS) == {"sum", "prod", "min", "max"}


def test_unsupported_reasons(comm):
    assert comm.unsupported("all_reduce", DTYPES["bfloat16"], "sum", True) == "MPI has no bfloat16 datatype"
    assert comm.unsupported("all_reduce", DTYPES["bfloat16"], "sum", True, native=False) == "MPI has no bfloat16 datatype"
    avg_int = "avg of integers truncates; commbench checks avg on floating-point types only"
    assert comm.unsupported("all_reduce", DTYPES["int32"], "avg", False) == avg_int
    assert comm.unsupported("reduce_scatter", DTYPES["int8"], "avg", True, native=False) == avg_int
    assert comm.unsupported("all_reduce", F32, "avg", True) == "MPI has no avg reduction"
    assert comm.unsupported("all_reduce", F32, "avg", True, native=False) is None  # the algorithms divide
    for c in COLLECTIVES:
        for in_place in (True, False):
            op = "sum" if COLLECTIVES[c].reduces else None
            reason = comm.unsupported(c, DTYPES["float64"], op, in_place)
            if c == "broadcast" and not in_place:
                assert reason == "MPI.Bcast works in place only (no out-of-place form to measure; in-place points measure it)"
            elif c == "all_to_allv" and in_place:
                assert reason.startswith("MPI.Alltoallv has no in-place form here")
            else:
                assert reason is None, (c, in_place)


@pytest.mark.parametrize("op", ["sum", "prod", "min", "max"])
@pytest.mark.parametrize("in_place", [True, False])
def test_all_reduce_of_one_rank_is_its_input(comm, python_loop, op, in_place):
    send = np.array([3.0, -1.0, 2.5], dtype=np.float32)
    recv = send if in_place else np.full(3, -7.0, dtype=np.float32)
    fn, out = comm.bind("all_reduce", send, recv, op, in_place)
    fn()
    assert out.tolist() == [3.0, -1.0, 2.5] and out.dtype == np.float32


def test_in_place_reduce_scatter_hands_mpi_the_whole_buffer(comm, python_loop):
    """In place MPI gets MPI_IN_PLACE and the larger buffer; the output is its start."""
    whole = np.arange(4, dtype=np.int64)
    fn, out = comm.bind("reduce_scatter", whole, whole[:4], "sum", True)
    fn()
    assert np.shares_memory(out, whole) and out.tolist() == [0, 1, 2, 3]
    assert fn.func == MPI.COMM_WORLD.Reduce_scatter_block and fn.args[0] is MPI.IN_PLACE and fn.args[1] is whole


def test_out_of_place_gather_and_scatter(comm, python_loop):
    send, recv = np.array([4, 5], dtype=np.int32), np.zeros(2, dtype=np.int32)
    for collective, op in (("all_gather", None), ("reduce_scatter", "max")):
        recv[:] = -7
        fn, out = comm.bind(collective, send, recv, op, False)
        fn()
        assert out is recv and recv.tolist() == [4, 5]
        assert fn.args[0] is send and fn.args[1] is recv


def test_call_layout_in_place_takes_the_larger_buffer():
    calls = []
    fn, out = M._call(lambda *a: calls.append(a), np.zeros(6), np.zeros(2), True, "op")
    assert len(out) == 2
    fn()
    assert calls[0][0] is MPI.IN_PLACE and len(calls[0][1]) == 6 and calls[0][2] == "op"
    gather_send, gather_recv = np.zeros(2), np.zeros(6)  # all-gather: the output is the larger
    fn, out = M._call(lambda *a: calls.append(a), gather_send, gather_recv, True)
    assert out is not gather_recv and np.shares_memory(out, gather_recv) and len(out) == 6


def test_the_c_loop_is_noted_once_when_it_cannot_be_built(comm, python_loop):
    buf = np.zeros(2)
    for _ in range(2):
        fn, _ = comm.bind("all_reduce", buf, buf, "sum", True)
        assert not hasattr(fn, "timer")
    assert comm.notes == ["no loop here: native MPI points are timed by the Python loop (timer column: python)"]


def test_the_c_loop_times_the_same_call(comm):
    try:
        mpi_loop.library()
    except mpi_loop.LoopUnavailable as exc:
        pytest.skip(f"the C loop cannot be built here: {exc}")
    send, recv = np.arange(5, dtype=np.float64), np.zeros(5)
    fn, out = comm.bind("all_reduce", send, recv, "max", False)
    seconds = fn.timer(fn, 3, 2)
    assert fn.timer.name == "native" and seconds.shape == (3,) and (seconds >= 0).all()
    assert out.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]  # the C loop ran MPI_Allreduce on the buffers


def test_numpy_buffers(comm):
    buf = comm.alloc(5, DTYPES["uint8"])
    assert buf.dtype == np.uint8 and not buf.any()
    comm.write(buf, 1, np.array([254.0, 7.0]))
    assert comm.read(buf, 0, 4).tolist() == [0.0, 254.0, 7.0, 0.0]
    comm.view(buf, 4, 1)[0] = 9
    assert buf[4] == 9


def test_control_calls_of_one_rank(comm):
    comm.barrier()
    assert comm.allgather_object({"a": 1}) == [{"a": 1}]
    assert comm.reduce_host(np.array([1.5, -2.0]), "max").tolist() == [1.5, -2.0]
    assert comm.reduce_host(np.array([3, 4]), "sum").dtype == np.float64
    sub = comm.split(0, 0)
    assert isinstance(sub, M.MPICommunicator) and (sub.size, sub.rank) == (1, 0) and sub.comm is not comm.comm
    sub.comm.Free()


def test_point_to_point_with_itself(comm):
    got = np.zeros(3)
    comm.sendrecv(np.array([1.0, 2.0, 3.0]), 0, got, 0, tag=5)
    assert got.tolist() == [1.0, 2.0, 3.0]
    got2 = np.zeros(2)
    comm.exchange([(np.array([8.0, 9.0]), 0, 1)], [(got2, 0, 1)]).wait()
    assert got2.tolist() == [8.0, 9.0]


def test_library_info(comm):
    import mpi4py

    info = comm.library_info()
    assert info["mpi4py"] == mpi4py.__version__
    assert info["mpi_standard"] == "{}.{}".format(*MPI.Get_version())
    assert info["mpi_library"] == MPI.Get_library_version().replace("\x00", "").strip().splitlines()[0]
    assert info["mpi_thread_level"] in ("single", "funneled", "serialized", "multiple")
    assert info["mpi_thread_level"] == M.THREAD_LEVELS[MPI.Query_thread()]


def test_under_open_mpi_the_unanswered_message_fits_its_tcp_transport_s_eager_limit(comm, monkeypatch):
    """hierarchical.inter_segment cuts an exchange between two nodes into messages Open MPI's TCP
    transport sends without waiting for the receiver: below btl_tcp_eager_limit, which counts the
    headers (its default as ompi_info reports it, or the limit the user set)."""
    if not MPI.Get_library_version().startswith("Open MPI"):
        assert comm.unanswered_message_bytes is None
        return
    ompi_info = find_binary("ompi_info")
    if ompi_info is None:
        pytest.skip("ompi_info is not installed beside this Open MPI")
    out = subprocess.run([ompi_info, "--param", "btl", "tcp", "--level", "9", "--parsable"], capture_output=True,
                         text=True, timeout=60).stdout
    found = re.search(r"^mca:btl:tcp:param:btl_tcp_eager_limit:value:(\d+)$", out, re.M)
    if found is None:
        pytest.skip("this Open MPI has no TCP transport")
    limit = int(found.group(1))
    assert limit - (8 << 10) <= comm.unanswered_message_bytes <= limit - 1024  # room for the headers, not much more
    monkeypatch.setenv("OMPI_MCA_btl_tcp_eager_limit", str(32 << 10))
    assert M.open_mpi_unanswered() == 28 << 10
    monkeypatch.setenv("OMPI_MCA_btl_tcp_eager_limit", "4096")
    assert M.open_mpi_unanswered() == 2048
    monkeypatch.setenv("OMPI_MCA_btl_tcp_eager_limit", "lots")
    assert M.open_mpi_unanswered() == comm.unanswered_message_bytes
