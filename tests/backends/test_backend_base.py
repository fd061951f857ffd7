"""The Communicator interface (commbench/backends/base.py): the native-call lookup through a
backend's table of calling conventions and the reasons a native call is refused, the default
point-to-point calls built on isend / irecv, numpy buffers, and the defaults a backend inherits.
A toy backend over a toy library stands in for MPI and torch (tests/backends/test_mpi.py and
test_torch_dist.py run the real ones)."""

from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import pytest

from commbench.dtypes import DTYPES
from commbench.backends.base import (
    Communicator,
    Convention,
    NumpyBuffers,
    Request,
    Requests,
)
from commbench.collectives import COLLECTIVES, NativeCall


class Lib:
    """A toy library: an all-reduce (in place, one buffer) and a reduce-scatter (send, recv)."""

    calls: ClassVar[list] = []

    def one(self, buf, op):
        Lib.calls.append(("one", op))
        buf *= 2

    def two(self, out, inp):
        Lib.calls.append(("two",))
        out[...] = inp[:len(out)]


class Toy(NumpyBuffers, Communicator):
    backend, library, library_title = "toy", "toylib", "ToyLib"
    conventions: ClassVar[dict] = {
        "one": Convention(lambda comm, fn, send, recv, op, in_place, root: ((lambda: fn(recv, op)), recv), out_of_place=False),
        "two": Convention(lambda comm, fn, send, recv, op, in_place, root: ((lambda: fn(recv, send)), recv)),
    }

    def __init__(self):
        self.native_target, self.log = Lib(), []

    def isend(self, buf, dst, tag=0):
        self.log.append(("isend", dst, tag, len(buf)))
        return _Req(self.log, "send")

    def irecv(self, buf, src, tag=0):
        self.log.append(("irecv", src, tag, len(buf)))
        return _Req(self.log, "recv")

    def barrier(self):
        pass

    def reduce_host(self, values, op):
        return values

    def allgather_object(self, obj):
        return [obj]

    def split(self, color, key):
        return self


class _Req(Request):
    def __init__(self, log, what):
        self.log, self.what = log, what

    def wait(self):
        self.log.append(("wait", self.what))


@pytest.fixture
def toy(monkeypatch):
    """Toy, with the registry's collectives declaring their toylib calls for the test's length."""
    declared = {"all_reduce": NativeCall("one", "one"),
                "reduce_scatter": NativeCall(("missing", "two"), "two", in_place=False),
                "all_gather": NativeCall("absent", "two")}  # a function this library lacks
    for name, call in declared.items():
        monkeypatch.setitem(COLLECTIVES[name].native, "toylib", call)
    Lib.calls = []
    return Toy()


# --- native calls ----------------------------------------------------------------------------------------
def test_native_call_resolves_the_first_name_the_library_has(toy):
    call, fn = toy.native_call("reduce_scatter")
    assert call.name == "missing" and fn == toy.native_target.two
    assert toy.native_call("all_gather")[0] is not None and toy.native_call("all_gather")[1] is None


def test_native_call_needs_a_known_convention(toy, monkeypatch):
    monkeypatch.setattr(Toy, "conventions", {"two": Toy.conventions["two"]})
    assert toy.native_call("all_reduce") == (None, None)


def test_native_call_of_an_undeclared_library():
    class Other(Toy):
        library = "nobody"

    assert Other().native_call("all_reduce") == (None, None)
    assert Other().native_unsupported("all_reduce", True) == (
        "ToyLib has no all-reduce here (commbench's algorithms may run it)")


def test_native_unsupported_reasons(toy):
    assert toy.native_unsupported("all_reduce", True) is None
    assert toy.native_unsupported("all_reduce", False) == (
        "ToyLib.one works in place only (no out-of-place form to measure; in-place points measure it)")
    assert toy.native_unsupported("reduce_scatter", False) is None
    assert toy.native_unsupported("reduce_scatter", True) == (
        "ToyLib.missing gives wrong results in place (no in-place form to measure; out-of-place points measure it)")
    assert toy.native_unsupported("all_gather", True) == "ToyLib has no all-gather here (commbench's algorithms may run it)"
    # unsupported(): the native reasons, none for commbench's own algorithms
    assert toy.unsupported("all_gather", DTYPES["float32"], None, True) == toy.native_unsupported("all_gather", True)
    assert toy.unsupported("all_gather", DTYPES["float32"], None, True, native=False) is None


def test_bind_calls_through_the_convention(toy):
    buf = np.array([1.0, 2.0])
    fn, out = toy.bind("all_reduce", buf, buf, "max", True)
    assert out is buf and Lib.calls == []  # bound, not yet called
    fn()
    assert buf.tolist() == [2.0, 4.0] and Lib.calls == [("one", "max")]
    send, recv = np.array([5.0, 6.0, 7.0, 8.0]), np.zeros(2)
    fn, out = toy.bind("reduce_scatter", send, recv, "sum", False)
    fn()
    assert out is recv and recv.tolist() == [5.0, 6.0]
    with pytest.raises(ValueError, match="toy backend has no collective 'all_gather'"):
        toy.bind("all_gather", send, recv, None, False)


# --- point to point ---------------------------------------------------------------------------------------
def test_exchange_posts_the_receives_first_and_waits_all():
    toy = Toy()
    req = toy.exchange([(np.zeros(2), 1, 7), (np.zeros(3), 2, 8)], [(np.zeros(4), 3, 9)])
    assert toy.log == [("irecv", 3, 9, 4), ("isend", 1, 7, 2), ("isend", 2, 8, 3)]
    req.wait()
    assert toy.log[3:] == [("wait", "recv"), ("wait", "send"), ("wait", "send")]


def test_send_recv_and_sendrecv_are_exchanges_waited():
    toy = Toy()
    toy.send(np.zeros(2), 1, tag=4)
    toy.recv(np.zeros(3), 2, tag=5)
    toy.sendrecv(np.zeros(1), 3, np.zeros(6), 0, tag=6)
    assert toy.log == [("isend", 1, 4, 2), ("wait", "send"), ("irecv", 2, 5, 3), ("wait", "recv"),
                       ("irecv", 0, 6, 6), ("isend", 3, 6, 1), ("wait", "recv"), ("wait", "send")]


def test_requests_wait_each_in_order():
    log = []
    Requests([_Req(log, "a"), _Req(log, "b")]).wait()
    assert log == [("wait", "a"), ("wait", "b")]


# --- buffers ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [d for d in DTYPES.values() if d.numpy_name])
def test_numpy_buffers_alloc_view_write_read(dtype):
    toy = Toy()
    buf = toy.alloc(6, dtype)
    assert buf.dtype == np.dtype(dtype.numpy_name) and len(buf) == 6 and not buf.any()
    toy.write(buf, 2, np.array([3.0, 100.0]))
    assert toy.read(buf, 0, 6).tolist() == [0.0, 0.0, 3.0, 100.0, 0.0, 0.0]
    assert toy.read(buf, 0, 6).dtype == np.float64
    view = toy.view(buf, 3, 2)
    view[1] = 7
    assert buf[4] == 7 and len(view) == 2
    like = toy.alloc_like(buf, 4)
    assert like.dtype == buf.dtype and len(like) == 4 and not like.any()


def test_adopt_shares_the_given_memory():
    toy, memory = Toy(), bytearray(16)
    buf = toy.adopt(memoryview(memory), 4, DTYPES["int32"])
    buf[1] = 5
    assert memory[4:8] == (5).to_bytes(4, "little")
    with pytest.raises(ValueError, match="numpy has no bfloat16"):
        toy.adopt(memoryview(memory), 4, DTYPES["bfloat16"])


def test_alloc_like_reads_a_torch_dtype_name():
    toy = Toy()
    made = toy.alloc_like(SimpleNamespace(dtype="torch.float16"), 3)
    assert made.dtype == np.float16 and len(made) == 3


def test_defaults_of_a_backend():
    class Bare(Toy):
        pass

    bare = Bare()
    assert bare.library_info() == {}
    assert bare.enter_thread() is None and bare.synchronize() is None and bare.close() is None
    assert Communicator.carries_device_buffers and Communicator.device == "cpu"
    with pytest.raises(NotImplementedError, match="toy cannot place buffers"):
        Communicator.adopt(bare, memoryview(bytearray(8)), 2, DTYPES["int32"])
