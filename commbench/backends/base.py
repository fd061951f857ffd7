"""The Communicator interface every backend implements.

Buffers are the backend's own objects (numpy arrays for MPI, torch tensors for gloo/NCCL);
harness and algorithms touch them only through these methods. Collectives are *bound* once
per point (`bind`) into a zero-argument callable, so the timed loop calls the library with no
commbench code in between. Which library function a collective is, and how it is called, the
collective declares (`Collective.native`); a backend holds only its table of calling conventions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from commbench.dtypes import DTYPES, DType
from commbench.collectives import COLLECTIVES, Counts, NativeCall

Buffer = Any


@dataclass(frozen=True)
class Convention:
    """How a backend calls the library functions of one calling convention (NativeCall.convention).
    call(comm, function, send, recv, op, in_place, counts) gives the zero-argument call and the buffer
    holding the rank's output (counts: the point's Counts; its root for the rooted collectives, its peers
    for the uneven all-to-all)."""

    call: Callable[..., tuple[Callable[[], Any], Any]]
    out_of_place: bool = True  # takes separate input and output buffers (else in place only)


class Request(ABC):
    @abstractmethod
    def wait(self) -> None: ...


class Requests(Request):
    """Several requests waited on as one."""

    def __init__(self, requests: list[Request]):
        self._requests = requests

    def wait(self) -> None:
        for r in self._requests:
            r.wait()


class Communicator(ABC):
    backend: str = ""
    rank: int = 0
    size: int = 1
    device: str = "cpu"
    carries_device_buffers: bool = True  # its isend / irecv take this device's buffers

    # --- what this backend can do -------------------------------------------------------
    reducer: Any = None  # the arithmetic on this backend's buffers (commbench.kernels.reducers)
    library: str = ""  # the key of Collective.native its calls are declared under
    library_title: str = ""  # the library, in messages
    conventions: Mapping[str, Convention] = {}  # the calling conventions it knows
    native_target: Any = None  # where the collectives' functions are looked up (NativeCall.resolve)
    notes: Sequence[str] = ()  # one-line notes for the user (a loop that could not be built); a list per instance
    # the largest message the library sends between hosts without waiting for the receiver's answer,
    # where a larger one can stall an exchange both ways over one connection (None: no such limit)
    unanswered_message_bytes: int | None = None

    def unsupported(self, collective: str, dtype: DType, op: str | None, in_place: bool,
                    native: bool = True) -> str | None:
        """None if the combination runs, else the reason it is skipped (shown to the user).
        native=False asks for commbench's own algorithms, which need buffers and a Reducer only."""
        return self.native_unsupported(collective, in_place) if native else None

    def native_call(self, collective: str) -> tuple[NativeCall | None, Callable | None]:
        """The collective's declared call in this library, and the function itself (None, None
        where it declares none, or where this version of the library lacks it)."""
        call = COLLECTIVES[collective].native.get(self.library)
        if call is None or call.convention not in self.conventions:
            return None, None
        return call, call.resolve(self.native_target)

    def native_unsupported(self, collective: str, in_place: bool) -> str | None:
        """Why the library's own collective does not run in this buffer mode, else None."""
        call, fn = self.native_call(collective)
        if fn is None:
            return f"{self.library_title} has no {collective.replace('_', '-')} here (commbench's algorithms may run it)"
        if not in_place and not self.conventions[call.convention].out_of_place:
            return (f"{self.library_title}.{call.name} works in place only (no out-of-place form to measure; "
                    "in-place points measure it)")
        if in_place and not call.in_place:
            return (f"{self.library_title}.{call.name} {call.no_in_place} (no in-place form to measure; "
                    "out-of-place points measure it)")
        return None

    # --- buffers ----------------------------------------------------------------------------
    @abstractmethod
    def alloc(self, count: int, dtype: DType) -> Buffer: ...

    def alloc_point(self, count: int, dtype: DType) -> Buffer:
        """A point's send or receive buffer (every rank allocates its own, in the same order): alloc, or
        where the library registers buffers (NCCL's --registration), a registered one."""
        return self.alloc(count, dtype)

    def register_buffers(self, mode: str) -> None:
        """Register the points' buffers with the library from now on (commbench.backends.registration);
        only NCCL's communicator does (spec.validate refuses it elsewhere)."""
        if mode != "none":
            raise RuntimeError(f"--registration {mode}: {self.backend} registers no buffers")

    def adopt(self, memory: memoryview, count: int, dtype: DType) -> Buffer:
        """count elements of dtype over host memory (writable, zeroed), sharing it: buffers in
        memory of an algorithm's own (the kernels' shared segments)."""
        raise NotImplementedError(f"{self.backend} cannot place buffers in given memory")

    def alloc_like(self, like: Buffer, count: int) -> Buffer:
        """count zeroed elements of like's dtype (scratch next to a harness buffer)."""
        return self.alloc(count, DTYPES[str(like.dtype).replace("torch.", "")])

    @abstractmethod
    def view(self, buf: Buffer, offset: int, count: int) -> Buffer:
        """Elements offset .. offset+count-1 of buf, sharing its memory."""

    @abstractmethod
    def write(self, buf: Buffer, offset: int, values: np.ndarray) -> None:
        """Store float64 `values` (exactly representable in buf's dtype) at offset."""

    @abstractmethod
    def read(self, buf: Buffer, offset: int, count: int) -> np.ndarray:
        """Elements of buf as float64 (exact for the values commbench writes)."""

    # --- collectives --------------------------------------------------------------------------
    def bind(self, collective: str, send: Buffer, recv: Buffer, op: str | None, in_place: bool,
             counts: Counts | None = None) -> tuple[Callable[[], Any], Buffer]:
        """A zero-argument callable running the library's collective once, and the buffer
        that holds this rank's output. In place, send and recv share one buffer, laid out as
        harness.Buffers does (Collective.in_place_offset). counts: the point's (its root: where a
        rooted collective starts or ends, this communicator's rank; its peers: the uneven all-to-all's; None:
        root 0, even blocks)."""
        counts = counts if counts is not None else Counts(len(send), len(recv), 0)
        call, fn = self.native_call(collective)
        if fn is None:
            raise ValueError(f"{self.backend} backend has no collective {collective!r}")
        return self.conventions[call.convention].call(self, fn, send, recv, op, in_place, counts)

    # --- control -----------------------------------------------------------------------------
    @abstractmethod
    def barrier(self) -> None: ...

    def idle_barrier(self, nap_s: float = 0.0005) -> None:
        """A barrier whose waiting ranks sleep between looks instead of spinning (ranks left out of a
        measurement on a machine whose cores others are measuring on); a library without a test-able
        barrier keeps its own."""
        self.barrier()

    def enter_thread(self) -> None:
        """Called first in every thread an algorithm starts (hierarchical's pipeline): make this
        rank's device the thread's current one (a new thread's is device 0)."""

    def synchronize(self) -> None:
        """Wait for the device to finish queued work (no-op on CPU)."""

    @abstractmethod
    def reduce_host(self, values: np.ndarray, op: str) -> np.ndarray:
        """All-reduce a small float64 numpy array (op 'max' or 'sum'); for control data."""

    @abstractmethod
    def allgather_object(self, obj: Any) -> list[Any]: ...

    # --- point-to-point (the building blocks of commbench's own algorithms) -----------------
    # Algorithms issue every step as one group (exchange): on NCCL a point-to-point call issued
    # alone runs in issue order on its pair's stream, so a receive queued ahead of a send blocks
    # that send until the peer's matching send arrives (two ranks each receiving first deadlock),
    # and the first lone call to a peer creates that pair's communicator, collectively with the
    # peer. A group progresses all its calls together on the group's communicator.
    @abstractmethod
    def isend(self, buf: Buffer, dst: int, tag: int = 0) -> Request: ...

    @abstractmethod
    def irecv(self, buf: Buffer, src: int, tag: int = 0) -> Request: ...

    def exchange(self, sends: list[tuple[Buffer, int, int]], recvs: list[tuple[Buffer, int, int]]) -> Request:
        """Start one group of point-to-point calls, (buffer, peer, tag) each, that progress
        together; the request completes when all have. Here: nonblocking calls, receives first."""
        reqs = [self.irecv(b, src, tag) for b, src, tag in recvs] + [self.isend(b, dst, tag) for b, dst, tag in sends]
        return Requests(reqs)

    def send(self, buf: Buffer, dst: int, tag: int = 0) -> None:
        self.exchange([(buf, dst, tag)], []).wait()

    def recv(self, buf: Buffer, src: int, tag: int = 0) -> None:
        self.exchange([], [(buf, src, tag)]).wait()

    def sendrecv(self, sendbuf: Buffer, dst: int, recvbuf: Buffer, src: int, tag: int = 0) -> None:
        """Send to dst while receiving from src, without deadlock."""
        self.exchange([(sendbuf, dst, tag)], [(recvbuf, src, tag)]).wait()

    @abstractmethod
    def split(self, color: int, key: int) -> "Communicator":
        """Sub-communicator of the ranks with the same color, ordered by key (collective call)."""

    # --- description ---------------------------------------------------------------------------
    def library_info(self) -> dict:
        """Versions of the library under this backend, for run.json."""
        return {}

    def close(self) -> None:
        pass


class NumpyBuffers:
    """Buffers as numpy arrays (the MPI backend's): alloc, view, write and read."""

    def alloc(self, count: int, dtype: DType) -> np.ndarray:
        return np.zeros(count, dtype=dtype.numpy_name)

    def adopt(self, memory, count, dtype):
        if dtype.numpy_name is None:
            raise ValueError(f"numpy has no {dtype.name}: no buffer of it can be placed in given memory")
        return np.frombuffer(memory, dtype=dtype.numpy_name, count=count)

    def view(self, buf, offset, count):
        return buf[offset:offset + count]

    def write(self, buf, offset, values):
        buf[offset:offset + len(values)] = values

    def read(self, buf, offset, count):
        return buf[offset:offset + count].astype(np.float64)
