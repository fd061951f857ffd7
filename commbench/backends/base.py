"""The Communicator interface every backend implements.

Buffers are the backend's own objects (numpy arrays for MPI, torch tensors for gloo/NCCL);
harness and algorithms touch them only through these methods. Collectives are *bound* once
per point (`bind`) into a zero-argument callable, so the timed loop calls the library with no
commbench code in between.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable

import numpy as np

from commbench.dtypes import DType

Buffer = Any


class Request(ABC):
    @abstractmethod
    def wait(self) -> None: ...


class Communicator(ABC):
    backend: str = ""
    rank: int = 0
    size: int = 1
    device: str = "cpu"
    carries_device_buffers: bool = True  # its isend / irecv take this device's buffers

    # --- what this backend can do -------------------------------------------------------
    reducer: Any = None  # the arithmetic on this backend's buffers (commbench.kernels)

    def unsupported(self, collective: str, dtype: DType, op: str | None, in_place: bool,
                    native: bool = True) -> str | None:
        """None if the combination runs, else the reason it is skipped (shown to the user).
        native=False asks for commbench's own algorithms, which need buffers and a Reducer only."""
        return None

    # --- buffers ----------------------------------------------------------------------------
    @abstractmethod
    def alloc(self, count: int, dtype: DType) -> Buffer: ...

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
    @abstractmethod
    def bind(self, collective: str, send: Buffer, recv: Buffer, op: str | None, in_place: bool
             ) -> tuple[Callable[[], Any], Buffer]:
        """A zero-argument callable running the library's collective once, and the buffer
        that holds this rank's output. In place: all_reduce has send is recv; all_gather's
        send is this rank's block of recv; reduce_scatter's recv is this rank's block of send."""

    # --- control -----------------------------------------------------------------------------
    @abstractmethod
    def barrier(self) -> None: ...

    def synchronize(self) -> None:
        """Wait for the device to finish queued work (no-op on CPU)."""

    @abstractmethod
    def reduce_host(self, values: np.ndarray, op: str) -> np.ndarray:
        """All-reduce a small float64 numpy array (op 'max' or 'sum'); for control data."""

    @abstractmethod
    def allgather_object(self, obj: Any) -> list[Any]: ...

    # --- point-to-point (the building blocks of commbench's own algorithms) -----------------
    @abstractmethod
    def isend(self, buf: Buffer, dst: int, tag: int = 0) -> Request: ...

    @abstractmethod
    def irecv(self, buf: Buffer, src: int, tag: int = 0) -> Request: ...

    def send(self, buf: Buffer, dst: int, tag: int = 0) -> None:
        self.isend(buf, dst, tag).wait()

    def recv(self, buf: Buffer, src: int, tag: int = 0) -> None:
        self.irecv(buf, src, tag).wait()

    def sendrecv(self, sendbuf: Buffer, dst: int, recvbuf: Buffer, src: int, tag: int = 0) -> None:
        """Send to dst while receiving from src, without deadlock."""
        reqs = [self.irecv(recvbuf, src, tag), self.isend(sendbuf, dst, tag)]
        for r in reqs:
            r.wait()

    @abstractmethod
    def split(self, color: int, key: int) -> "Communicator":
        """Sub-communicator of the ranks with the same color, ordered by key (collective call)."""

    # --- description ---------------------------------------------------------------------------
    def library_info(self) -> dict:
        """Versions of the library under this backend, for run.json."""
        return {}

    def close(self) -> None:
        pass
