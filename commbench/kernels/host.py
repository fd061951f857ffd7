"""The host build of cuda/collectives.cu and the node's shared memory on the CPU.

The system C++ compiler builds the source once per machine and source text, at first use, into a
cached shared library (commbench.kernels.native_build). The regions are one
/dev/shm segment that rank 0 creates, every rank maps, and rank 0 unlinks as soon as all have
mapped it: a killed job leaves no name behind; a segment left by a job killed in that instant
carries a dead pid in its name and is removed by the next job. The harness' buffers for the
kernels are such segments too (HostNode.buffer): every rank's in every rank's reach, so
all-gather copies each block once, straight out of its neighbour's buffers. A call is
cb_host_call on a prepared CbCall: channels are threads, the first the caller's.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import platform
import re
import shutil
import uuid
import weakref

import numpy as np

from commbench.machine.facts import facts
from commbench.kernels.abi import (ERROR_WORDS, FIFO_OFFSET, SOURCE, CbCall, CbComm, KernelFault, KernelUnavailable,
                                    address, describe, what)
from commbench.kernels.native_build import BuildFailed, build, first_line
from commbench.kernels.reducers import cuda_source
from commbench.timers import Loop

SHM_DIR = "/dev/shm"
SEGMENT_PREFIX = "commbench-kernels-"
ALIAS_BYTES = 4096  # addresses this far apart look alike to the CPU's store forwarding (see CB_SKEW)
# -fvisibility=hidden: calls to hidden functions direct (CB_EXPORT in cuda/portable.h). -falign-functions=64
# -falign-loops=32: where a function lies in its cache lines no longer moves with every edit elsewhere (moved
# by one, the 2-rank 1-4 KB one-shot reduce-scatter took 1.18-1.34x its time and the 512 B-1 KB all-reduce
# 0.86x, same code; aligned, the old source's 512 B-1 KB all-reduce took 0.83x, nothing slower: commbench ab).
HOST_FLAGS = ("-std=c++17", "-O2", "-ffp-contract=off", "-fno-strict-aliasing", "-shared", "-fPIC", "-pthread",
              "-fvisibility=hidden", "-falign-functions=64", "-falign-loops=32")


def host_flags() -> tuple[str, ...]:
    """HOST_FLAGS and arch_flags()."""
    return HOST_FLAGS + arch_flags()


def arch_flags() -> tuple[str, ...]:
    """-mavx2 where this machine's CPU has AVX2 (32-byte streaming stores: cb_stream_line in cuda/portable.h,
    and the floor probe's streamed copy), else none. The flags are part of a build's key, so a cache shared
    with older CPUs keeps a build for each."""
    return ("-mavx2",) if "avx2" in cpu_flags() else ()


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them (/proc/cpuinfo), or none."""
    return facts().cpu_flags


def compiler() -> str | None:
    """The C++ compiler the host build uses: $CXX, else g++, c++ or clang++ on the PATH."""
    named = os.environ.get("CXX")
    if named:
        return shutil.which(named)
    return next((p for p in map(shutil.which, ("g++", "c++", "clang++")) if p), None)


@functools.lru_cache(maxsize=None)
def host_library() -> ctypes.CDLL:
    """cuda/collectives.cu built for this machine (cached by source text, compiler and flags)."""
    cxx = compiler()
    if cxx is None:
        where = (f"CXX={os.environ['CXX']} is not a program" if os.environ.get("CXX")
                 else "none of g++, c++, clang++ on the PATH; or set CXX")
        raise KernelUnavailable(f"ring_kernel and tree_kernel need a C++ compiler for their host build ({where})")
    try:
        lib = build("collectives", cuda_source(SOURCE.name), ".cc",
                    lambda src, out: [cxx, *host_flags(), str(src), "-o", str(out)],
                    [cxx, first_line([cxx, "--version"]), *host_flags(), platform.machine()],
                    f"the host build of cuda/{SOURCE.name}")
    except BuildFailed as exc:
        raise KernelUnavailable(str(exc)) from None
    return _prototypes(ctypes.CDLL(str(lib)))


def _prototypes(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.cb_host_call.argtypes, lib.cb_host_call.restype = [ctypes.POINTER(CbCall)], ctypes.c_int
    lib.cb_host_time.argtypes = [ctypes.POINTER(CbCall), ctypes.c_longlong, ctypes.c_longlong, ctypes.c_longlong,
                                 ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double)]
    lib.cb_host_time.restype = ctypes.c_int
    lib.cb_comm_bytes.restype = lib.cb_fifo_offset.restype = ctypes.c_longlong
    if lib.cb_comm_bytes() != ctypes.sizeof(CbComm) or lib.cb_fifo_offset() != FIFO_OFFSET:
        raise KernelUnavailable("commbench/kernels/abi.py's CbComm does not match cuda/collectives.cu")
    return lib


def remove_stale_segments(prefix: str = SEGMENT_PREFIX) -> None:
    """Remove this user's /dev/shm files named `prefix`<pid>-... whose creator (that pid) no longer runs;
    another user's are theirs to remove (root would otherwise delete them, issue 67)."""
    for name in os.listdir(SHM_DIR) if os.path.isdir(SHM_DIR) else []:
        m = re.fullmatch(re.escape(prefix) + r"(\d+)-\w*", name)
        if m and not _alive(int(m.group(1))):
            path = os.path.join(SHM_DIR, name)
            try:
                if os.lstat(path).st_uid == os.getuid():
                    os.unlink(path)
            except OSError:
                pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def shared_segment(comm, nbytes: int) -> mmap.mmap:
    """nbytes of /dev/shm that every rank of comm maps (collective): rank 0 creates the segment and
    allocates its memory (a tmpfs too small says so here, as KernelUnavailable on every rank, not
    with a SIGBUS at the first write), every rank maps it, rank 0 unlinks its name once all have."""
    if not os.path.isdir(SHM_DIR):
        raise KernelUnavailable(f"the host kernels need {SHM_DIR} for shared memory")
    name = comm.allgather_object(f"{SEGMENT_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}")[0]
    path = os.path.join(SHM_DIR, name)
    failed = None
    if comm.rank == 0:
        remove_stale_segments()
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, nbytes)
            os.posix_fallocate(fd, 0, nbytes)
        except OSError as exc:
            os.unlink(path)
            failed = f"{SHM_DIR} has no room for {nbytes} bytes of the kernels' shared memory ({exc.strerror})"
        finally:
            os.close(fd)
    failed = comm.allgather_object(failed)[0]  # (also the barrier: the segment is there)
    if failed:
        raise KernelUnavailable(failed)
    try:
        fd = os.open(path, os.O_RDWR)
        segment = mmap.mmap(fd, nbytes)
        os.close(fd)
    finally:
        comm.barrier()  # every rank mapped it: the name can go
        if comm.rank == 0:
            os.unlink(path)
    return segment


def buffer_stride(nbytes: int, n: int) -> int:
    """Bytes from one rank's buffer to the next one's in a shared buffer segment: whole pages plus
    a skew of 4096/n bytes (whole lines), so that a copy out of a neighbour's buffer into the same
    place of one's own never reads 4 KiB from a store still in flight (see CB_SKEW)."""
    page = mmap.PAGESIZE
    return -(-max(nbytes, 1) // page) * page + max(64, ALIAS_BYTES // n // 64 * 64)


class HostNode:
    """Every rank's region in one /dev/shm segment, mapped by every rank of the node."""

    def __init__(self, comm, nbytes: int):
        self._map = shared_segment(comm, nbytes * comm.size)
        self._anchor = ctypes.c_char.from_buffer(self._map)
        base = ctypes.addressof(self._anchor)
        self.regions = [base + r * nbytes for r in range(comm.size)]
        self._error = (ctypes.c_longlong * ERROR_WORDS)()
        self.error_address = ctypes.addressof(self._error)
        self._buffers: list[tuple[weakref.ref, int, int, int]] = []  # buffer(): (it, its address, bytes, stride)

    def buffer(self, comm, count: int, dtype, arena=None) -> object:
        """count zeroed elements of dtype (a DType) for this rank, as comm's buffers are (comm.adopt),
        in a segment every rank of comm maps, rank q's at this one's + (q - rank)·stride
        (collective: every rank asks for the same). A direct call bound with its send and recv
        inside it gets that stride (stride_of): all-gather and the ring all-reduce then read their
        neighbour's buffers.
        arena: lay them in this commbench.rank.arena.Arena (its stride) instead of a new segment."""
        nbytes = count * dtype.itemsize
        if arena is not None:
            segment, stride = arena.map, arena.stride
        else:
            stride = buffer_stride(nbytes, comm.size)
            segment = shared_segment(comm, stride * comm.size)
        buf = comm.adopt(memoryview(segment)[comm.rank * stride:comm.rank * stride + nbytes], count, dtype)
        self._buffers = [b for b in self._buffers if b[0]() is not None]
        self._buffers.append((weakref.ref(buf), address(buf), nbytes, stride))
        return buf

    def stride_of(self, send: int, recv: int) -> int:
        """The stride of the live buffer() that holds both addresses, else 0. The caller vouches
        that every rank's send and recv are at the same places in theirs (harness.Buffers lays them
        out so; an in-place send, inside recv, the kernel finds itself)."""
        return next((stride for buf, start, nbytes, stride in self._buffers
                     if start <= min(send, recv) and max(send, recv) < start + nbytes and buf() is not None), 0)

    def error(self):
        return list(self._error)

    def upload(self, struct):
        """Where the kernel reads the rank's CbComm: the structure itself, in this process."""
        return struct

    def bind(self, struct, name: str, dtype: str | None, send: int, recv: int, count: int, channels: int,
             stride: int = 0):
        """cb_host_call on a prepared CbCall, as a zero-argument callable raising KernelFault when a
        wait timed out; it carries its own timer, the loop in C (harness.measure uses it). stride:
        the ranks' buffers in reach (stride_of), all-gather and the ring all-reduce direct; 0: through the
        FIFOs."""
        lib = host_library()
        call = CbCall(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value, ctypes.pointer(struct), send, recv,
                      count, channels, stride)
        run_host, error = lib.cb_host_call, self.error

        def run():
            if run_host(call):
                raise KernelFault(describe(error(), what(name)))

        def timer(fn, samples: int, batch: int = 1, delay_s: float = 0.0):
            out, late = (ctypes.c_double * samples)(), (ctypes.c_double * samples)()
            if lib.cb_host_time(call, samples, batch, round(delay_s * 1e9), out, late):
                raise KernelFault(describe(error(), what(name)))
            return (np.frombuffer(out, dtype=np.float64).copy() / batch,
                    np.frombuffer(late, dtype=np.float64).copy() / batch)
        run.timer = Loop("native", timer)
        return run

    def close(self) -> None:
        del self._anchor
        self._map.close()
