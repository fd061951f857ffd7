"""The timed batch of a `native` MPI point as a loop in C (mpi_loop.c), so the row measures the
MPI library, not mpi4py and Python (about 2 µs of them per call at 8 B on this machine).

The source is built at first use by the MPI's own compiler wrapper (mpicc beside mpirun, or
$MPICC) into a cached library keyed by the source, the wrapper's command line and the MPI's
version (commbench.kernels.native_build), and loaded into the rank, where it calls the MPI that
mpi4py initialised (checked: another MPI would not be initialised). Handles go over as Fortran
integers. Warm-up, batching, the maximum over ranks and the correctness check stay in harness.
Where the loop cannot be built or does not cover a call (a collective without an entry, a count
beyond int), the Python loop times the point, and the run says why once.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np
from mpi4py import MPI

from commbench.binaries import find_binary
from commbench.kernels.native_build import BuildFailed, build, first_line
from commbench.timers import Loop

SOURCE = Path(__file__).with_name("mpi_loop.c")
FLAGS = ("-O2", "-shared", "-fPIC")
INT_MAX = 2**31 - 1
_double_p = ctypes.POINTER(ctypes.c_double)


class LoopUnavailable(Exception):
    """The C loop cannot run here; the message is one line for the user."""


def library_version() -> str:
    """MPI_Get_library_version's text (mpi4py keeps the C string's NUL; it is dropped here)."""
    return MPI.Get_library_version().replace("\x00", "").strip()


def wrapper() -> str | None:
    """The MPI compiler wrapper: $MPICC, else mpicc on the PATH or beside this Python."""
    named = os.environ.get("MPICC")
    return find_binary(named) if named else find_binary("mpicc")


_LOADED: dict[str, ctypes.CDLL | LoopUnavailable] = {}  # one build attempt per process, failures too


def library() -> ctypes.CDLL:
    """mpi_loop.c built against this MPI, loaded and checked (LoopUnavailable otherwise, every
    time after the first attempt too: a failing mpicc is run once, not at every point)."""
    if "lib" not in _LOADED:
        try:
            _LOADED["lib"] = _load()
        except LoopUnavailable as exc:
            _LOADED["lib"] = exc
    if isinstance(_LOADED["lib"], LoopUnavailable):
        raise _LOADED["lib"]
    return _LOADED["lib"]


def _load() -> ctypes.CDLL:
    mpicc = wrapper()
    if mpicc is None:
        where = f"MPICC={os.environ['MPICC']} is not a program" if os.environ.get("MPICC") else "no mpicc found"
        raise LoopUnavailable(f"the C timing loop needs the MPI's compiler wrapper ({where})")
    version = library_version()
    command = first_line([mpicc, "-showme"]) or first_line([mpicc, "-show"])  # Open MPI, MPICH
    try:
        path = build("mpi_loop", SOURCE.read_text(), ".c", lambda src, out: [mpicc, *FLAGS, str(src), "-o", str(out)],
                     [mpicc, command, version, *FLAGS], f"the C timing loop (mpicc {SOURCE.name})")
        lib = ctypes.CDLL(str(path))
    except (BuildFailed, OSError) as exc:
        raise LoopUnavailable(str(exc).splitlines()[0]) from None
    lib.cb_time_floor.argtypes, lib.cb_time_floor.restype = [ctypes.c_longlong, ctypes.c_longlong, _double_p], ctypes.c_int
    lib.cb_mpi_identity.argtypes, lib.cb_mpi_identity.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_int
    text = ctypes.create_string_buffer(MPI.MAX_LIBRARY_VERSION_STRING + 1)
    if not lib.cb_mpi_identity(text, len(text)) or text.value.decode(errors="replace").strip() != version:
        raise LoopUnavailable(f"{mpicc} builds against another MPI than the one mpi4py loaded ({version.splitlines()[0]})")
    return lib


def entry(function: str):
    """The C loop of an mpi4py function (NativeCall.name), or None where mpi_loop.c has none."""
    fn = getattr(library(), f"cb_time_{function}", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_longlong,
                       ctypes.c_double, _double_p, _double_p]
        fn.restype = ctypes.c_int
    return fn


def bind_loop(comm: MPI.Comm, function: str, send: np.ndarray, recv: np.ndarray, op: MPI.Op | None,
              in_place: bool, root: int = 0, layout: tuple[list[int], ...] | None = None) -> Loop | None:
    """The C loop of `function` on the harness' buffers, as harness.measure's `fn.timer`; None where
    the Python loop must time it (raises LoopUnavailable where the C loop cannot be built). layout: the
    uneven all-to-all's counts and displacements (collectives.all_to_allv.layout)."""
    call = entry(function)
    count = min(len(send), len(recv))  # the call's per-rank count, in place or not (mpi_loop.c)
    datatype = MPI._typedict.get(recv.dtype.char)
    if call is None or datatype is None or max(count, 0 if layout is None else max(len(send), len(recv))) > INT_MAX:
        return None  # (the uneven layout's counts and displacements lie within the buffers)
    v = None if layout is None else np.ascontiguousarray(np.concatenate(layout), dtype=np.intc)
    whole = (send if len(send) >= len(recv) else recv).ctypes.data if in_place else None  # the one buffer
    sendp, recvp = send.ctypes.data, recv.ctypes.data
    handles = (datatype.py2f(), (op or MPI.OP_NULL).py2f(), comm.py2f())
    keep = (send, recv, v)  # the buffers live as long as the loop
    arrays = None if v is None else v.ctypes.data

    def run(fn, samples: int, batch: int = 1, delay_s: float = 0.0):
        out, late = (ctypes.c_double * samples)(), (ctypes.c_double * samples)()
        rc = call(sendp, recvp, whole, count, *handles, root, arrays, samples, batch, delay_s, out, late)
        if rc:
            raise MPI.Exception(rc)
        return (np.frombuffer(out, dtype=np.float64).copy() / batch, np.frombuffer(late, dtype=np.float64).copy() / batch)

    run.buffers = keep
    return Loop("native", run)


HAN_PRIORITY = 100  # above every coll component's own (Open MPI 5.0: han 35, tuned 30)


def han_dup(comm: MPI.Comm) -> MPI.Intracomm:
    """A duplicate of `comm` on which Open MPI runs coll/han (mpi_loop.c's cb_han_dup); collective.
    LoopUnavailable where the library cannot be built, or where coll_han_priority is missing or could
    not be set on some rank (then no rank makes the duplicate)."""
    fn = library().cb_han_dup
    fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int)], ctypes.c_int
    out = ctypes.c_int()
    rc = fn(comm.py2f(), HAN_PRIORITY, ctypes.byref(out))
    if rc == -1:
        raise LoopUnavailable("this MPI has no coll_han_priority: it is not an Open MPI with coll/han")
    if rc == -2:
        raise LoopUnavailable("another rank's MPI could not set coll_han_priority through MPI_T")
    if rc:  # (no rank made the duplicate)
        raise LoopUnavailable(f"this MPI could not set coll_han_priority through MPI_T (error {rc}; Open MPI "
                              "makes it settable from 5.0.7)")
    return MPI.Intracomm.f2py(out.value)


def floor_us(samples: int = 50, batch: int = 100) -> float:
    """The C loop's own time per call (an empty call), in µs: run.json's harness floor."""
    out = (ctypes.c_double * samples)()
    library().cb_time_floor(samples, batch, out)
    return float(np.median(np.frombuffer(out, dtype=np.float64))) / batch * 1e6
