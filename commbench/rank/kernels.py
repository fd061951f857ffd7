"""The Python side of cuda/collectives.cu: build it, give the ranks of a node their shared
regions, and bind one call of a ring or tree kernel to the harness' buffers.

* Host (numpy arrays or CPU tensors): the system C++ compiler builds the source once per machine
  and source text, at first use, into a cached shared library (one rank compiles, the others wait
  on a lock); the regions are one /dev/shm segment that rank 0 creates, every rank maps, and rank
  0 unlinks as soon as all have mapped it (a killed job leaves no name behind; a segment left by a
  job killed in that instant carries a dead pid in its name and is removed by the next job).
  A call is cb_host_call on a prepared CbCall: channels are threads, the first the caller's.
* GPU (torch CUDA tensors, CuPy): NVRTC compiles one module per dtype; every rank's region is a
  cudaMalloc whose CUDA IPC handle the others open; a call is one launch of `channels` blocks on
  the rank's current stream. A wait that times out is reported in pinned host memory, which the
  next call reads without waiting for the GPU.

The regions, counters and trees are built once per communicator (collectively, at bind time, so
not in a timed loop) and kept in the algorithm context's cache.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import mmap
import os
import platform
import re
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import numpy as np

from commbench.rank.reducers import CUDA_DIR, NVRTC_OPTIONS, cuda_source

SOURCE = CUDA_DIR / "collectives.cu"
MAX_RANKS, MAX_CHANNELS, MAX_CONNS = 64, 32, 8  # as cuda/collectives.cu
FIFO_OFFSET = 2 * MAX_CHANNELS * MAX_CONNS * 64
SKEW_BYTES = 16 * 256  # CB_SKEWS * CB_SKEW
GPU_THREADS = 512  # CB_THREADS
SLOTS = 8  # FIFO depth per connection and channel
SLOT_BYTES = {"cpu": 1 << 16, "cuda": 1 << 18}  # one chunk
CHANNEL_BYTES = {"cpu": 1 << 20, "cuda": 1 << 19}  # a call gets a channel per this many bytes ...
MAX_AUTO_CHANNELS = {"cpu": 8, "cuda": 16}  # ... up to this many (the CPU: also cores / local ranks)
SPIN_S = {"cpu": 200e-6, "oversubscribed": 2e-6, "cuda": 20e-6}
SHM_DIR = "/dev/shm"
SEGMENT_PREFIX = "commbench-kernels-"
HOST_FLAGS = ("-std=c++17", "-O2", "-ffp-contract=off", "-fno-strict-aliasing", "-shared", "-fPIC", "-pthread")
DTYPE_CODES = {"float32": 1, "float64": 2, "float16": 3, "bfloat16": 4, "int32": 5, "int64": 6, "int8": 7, "uint8": 8}
ERROR_WORDS = 6


class KernelUnavailable(RuntimeError):
    """The kernels cannot be built or run here; the message is the one line the user sees."""


class KernelFault(RuntimeError):
    """A kernel's wait timed out (a peer died or stalled)."""


class CbComm(ctypes.Structure):
    """struct CbComm of cuda/collectives.cu, field for field."""

    _fields_ = [(n, ctypes.c_longlong) for n in ("rank", "nranks", "nslots", "slot_bytes", "channels", "conns",
                                                  "timeout_ns", "spin_ns")] + [
        ("error", ctypes.c_void_p),
        ("region", ctypes.c_void_p * MAX_RANKS),
        ("in_conn", ctypes.c_int * MAX_RANKS), ("out_conn", ctypes.c_int * MAX_RANKS),
        ("peer_in_conn", ctypes.c_int * MAX_RANKS), ("peer_out_conn", ctypes.c_int * MAX_RANKS),
        ("tree_parent", ctypes.c_int * 2), ("tree_child", (ctypes.c_int * 2) * 2),
        ("in_seq", (ctypes.c_ulonglong * MAX_CONNS) * MAX_CHANNELS),
        ("out_seq", (ctypes.c_ulonglong * MAX_CONNS) * MAX_CHANNELS),
    ]


class CbCall(ctypes.Structure):
    _fields_ = [("entry", ctypes.c_void_p), ("comm", ctypes.POINTER(CbComm)), ("send", ctypes.c_void_p),
                ("recv", ctypes.c_void_p), ("count", ctypes.c_longlong), ("channels", ctypes.c_longlong)]


# --- topology: who talks to whom ----------------------------------------------------------------------
def trees(n: int) -> list[tuple[list[int | None], list[list[int]]]]:
    """The two binary trees (parent, children) of the double binary tree: dbtree's."""
    from commbench.rank.algorithms.dbtree import double_tree  # the algorithms import this module

    return double_tree(n)


def peers(n: int) -> tuple[list[list[int]], list[list[int]]]:
    """Every rank's senders and receivers (ring neighbours and tree neighbours), sorted: the
    connection index of a peer is its place in these lists."""
    senders, receivers = [set() for _ in range(n)], [set() for _ in range(n)]
    for r in range(n if n > 1 else 0):
        senders[r].add((r - 1) % n)
        receivers[r].add((r + 1) % n)
        for parent, children in trees(n):
            for q in ([parent[r]] if parent[r] is not None else []) + children[r]:
                senders[r].add(q)
                receivers[r].add(q)
    return [sorted(s) for s in senders], [sorted(s) for s in receivers]


def comm_struct(rank: int, n: int, channels: int, timeout_s: float, regions: list[int], error: int,
                slot_bytes: int, spin_s: float) -> CbComm:
    """This rank's CbComm: its connection tables, trees, and where every region is mapped here."""
    senders, receivers = peers(n)
    c = CbComm(rank=rank, nranks=n, nslots=SLOTS, slot_bytes=slot_bytes, channels=channels,
               conns=max([len(s) for s in senders] + [1]), timeout_ns=int(timeout_s * 1e9), error=error,
               spin_ns=int(spin_s * 1e9))
    for p in range(MAX_RANKS):
        c.in_conn[p] = c.out_conn[p] = c.peer_in_conn[p] = c.peer_out_conn[p] = -1
    for p in range(n):
        c.region[p] = regions[p]
        if p in senders[rank]:
            c.in_conn[p] = senders[rank].index(p)
            c.peer_out_conn[p] = receivers[p].index(rank)
        if p in receivers[rank]:
            c.out_conn[p] = receivers[rank].index(p)
            c.peer_in_conn[p] = senders[p].index(rank)
    for t, (parent, children) in enumerate(trees(n)):
        c.tree_parent[t] = -1 if parent[rank] is None else parent[rank]
        for k in range(2):
            c.tree_child[t][k] = children[rank][k] if k < len(children[rank]) else -1
    return c


def region_bytes(n: int, channels: int, slot_bytes: int) -> int:
    conns = max([len(s) for s in peers(n)[0]] + [1])
    return FIFO_OFFSET + SKEW_BYTES + conns * channels * SLOTS * slot_bytes


def entry_points() -> dict[str, list[str]]:
    """Every kernel of cuda/collectives.cu the Python side launches (tests/test_cuda_compile.py)."""
    from commbench.rank.reducers import CUDA_DTYPES, CUDA_OPS

    names = [entry(a, c, d, o) for a, c in (("ring", "all_reduce"), ("ring", "reduce_scatter"), ("tree", "all_reduce"))
             for d in CUDA_DTYPES for o in CUDA_OPS]
    return {SOURCE.name: names + [entry("ring", "all_gather", "float32", None)]}


def entry(algorithm: str, collective: str, dtype: str, op: str | None) -> str:
    """The kernel's name in cuda/collectives.cu (avg runs as sum; the caller divides)."""
    if collective == "all_gather":
        return "cb_ring_all_gather"
    return f"cb_{algorithm}_{collective}_{dtype}_{'sum' if op in (None, 'avg') else op}"


def describe(error, what: str) -> str:
    code, rank, channel, step, peer, kind = (int(e) for e in error[:ERROR_WORDS])
    waited = f"rank {peer}'s data" if kind == 0 else f"a free slot at rank {peer}"
    return f"{what}: rank {rank} timed out at step {step} of channel {channel} waiting for {waited} (code {code})"


def spin_time(device: str, local_ranks: int) -> float:
    """How long a wait spins before it backs off: long where every rank has a core of its own (a
    yield hands the core to whatever else runs, the launcher say, for a time slice: measured 3x
    slower all-reduce on 2 ranks), short where ranks outnumber cores (the rank being waited for
    needs this core). Automatic channels never outnumber the cores (auto_channels)."""
    if device == "cuda":
        return SPIN_S["cuda"]
    return SPIN_S["cpu"] if local_ranks <= (os.cpu_count() or 1) else SPIN_S["oversubscribed"]


def auto_channels(device: str, nbytes: int, local_ranks: int) -> int:
    cap = MAX_AUTO_CHANNELS[device]
    if device == "cpu":
        cap = min(cap, max(1, (os.cpu_count() or 1) // max(local_ranks, 1)))
    return max(1, min(cap, nbytes // CHANNEL_BYTES[device]))


# --- the host build ---------------------------------------------------------------------------------------
def compiler() -> str | None:
    """The C++ compiler the host build uses: $CXX, else g++, c++ or clang++ on the PATH."""
    named = os.environ.get("CXX")
    if named:
        return shutil.which(named)
    return next((p for p in map(shutil.which, ("g++", "c++", "clang++")) if p), None)


def cache_dir() -> Path:
    root = os.environ.get("COMMBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "commbench")
    return Path(root) / "kernels"


@functools.lru_cache(maxsize=None)
def host_library() -> ctypes.CDLL:
    """cuda/collectives.cu built for this machine (cached by source text, compiler and flags)."""
    cxx = compiler()
    if cxx is None:
        where = (f"CXX={os.environ['CXX']} is not a program" if os.environ.get("CXX")
                 else "none of g++, c++, clang++ on the PATH; or set CXX")
        raise KernelUnavailable(f"ring_kernel and tree_kernel need a C++ compiler for their host build ({where})")
    text = cuda_source(SOURCE.name)
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    key = hashlib.sha256("\0".join([text, cxx, *version, *HOST_FLAGS, platform.machine()]).encode()).hexdigest()[:20]
    folder = cache_dir()
    lib = folder / f"collectives-{key}.so"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"collectives-{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one rank compiles, the others wait and load its build
            if not lib.exists():
                _compile(cxx, text, lib)
    except OSError as exc:
        raise KernelUnavailable(f"cannot build the kernels in {folder}: {exc.strerror or exc}") from None
    return _prototypes(ctypes.CDLL(str(lib)))


def _compile(cxx: str, text: str, lib: Path) -> None:
    with tempfile.TemporaryDirectory(dir=lib.parent) as tmp:
        src, out = Path(tmp) / "collectives.cc", Path(tmp) / lib.name
        src.write_text(text)
        proc = subprocess.run([cxx, *HOST_FLAGS, str(src), "-o", str(out)], capture_output=True, text=True)
        if proc.returncode:
            first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[:200])
            raise KernelUnavailable(f"the host build of cuda/collectives.cu failed ({Path(cxx).name} exited "
                                    f"{proc.returncode}{': ' + first if first else ', printing nothing'})")
        os.replace(out, lib)


def _prototypes(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.cb_host_call.argtypes, lib.cb_host_call.restype = [ctypes.POINTER(CbCall)], ctypes.c_int
    lib.cb_host_time.argtypes = [ctypes.POINTER(CbCall), ctypes.c_longlong, ctypes.c_longlong,
                                 ctypes.POINTER(ctypes.c_double)]
    lib.cb_host_time.restype = ctypes.c_int
    lib.cb_comm_bytes.restype = lib.cb_fifo_offset.restype = ctypes.c_longlong
    if lib.cb_comm_bytes() != ctypes.sizeof(CbComm) or lib.cb_fifo_offset() != FIFO_OFFSET:
        raise KernelUnavailable("commbench/rank/kernels.py's CbComm does not match cuda/collectives.cu")
    return lib


# --- the node's shared regions ------------------------------------------------------------------------------
def remove_stale_segments() -> None:
    """Remove segments whose creator (the pid in the name) no longer runs."""
    for name in os.listdir(SHM_DIR) if os.path.isdir(SHM_DIR) else []:
        m = re.fullmatch(re.escape(SEGMENT_PREFIX) + r"(\d+)-\w+", name)
        if m and not _alive(int(m.group(1))):
            try:
                os.unlink(os.path.join(SHM_DIR, name))
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


class HostNode:
    """Every rank's region in one /dev/shm segment, mapped by every rank of the node."""

    def __init__(self, comm, nbytes: int):
        if not os.path.isdir(SHM_DIR):
            raise KernelUnavailable(f"the host kernels need {SHM_DIR} for shared memory")
        name = comm.allgather_object(f"{SEGMENT_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}")[0]
        path = os.path.join(SHM_DIR, name)
        total = nbytes * comm.size
        if comm.rank == 0:
            remove_stale_segments()
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
            os.ftruncate(fd, total)
            os.close(fd)
        comm.barrier()
        try:
            fd = os.open(path, os.O_RDWR)
            self._map = mmap.mmap(fd, total)
            os.close(fd)
        finally:
            comm.barrier()  # every rank mapped it: the name can go
            if comm.rank == 0:
                os.unlink(path)
        self._anchor = ctypes.c_char.from_buffer(self._map)
        base = ctypes.addressof(self._anchor)
        self.regions = [base + r * nbytes for r in range(comm.size)]
        self._error = (ctypes.c_longlong * ERROR_WORDS)()
        self.error_address = ctypes.addressof(self._error)

    def error(self):
        return list(self._error)

    def close(self) -> None:
        del self._anchor
        self._map.close()


def mps_running() -> bool:
    """Whether an MPS control daemon serves this machine (its pipe directory has its control pipe)."""
    return os.path.exists(os.path.join(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"), "control"))


class GpuNode:
    """Every rank's region in its own cudaMalloc, opened by the others through CUDA IPC; the
    error words in pinned host memory the GPU writes and the host reads without waiting."""

    def __init__(self, comm, nbytes: int):
        import cupy
        import torch

        self._cp = cupy
        rt = cupy.cuda.runtime
        self.device = cupy.cuda.Device(torch.cuda.current_device())
        with self.device:
            self._own = rt.malloc(nbytes)
            rt.memset(self._own, 0, nbytes)
            rt.deviceSynchronize()
            handles = comm.allgather_object(bytes(rt.ipcGetMemHandle(self._own)))
            self.regions = [self._own if r == comm.rank else rt.ipcOpenMemHandle(h, rt.cudaIpcMemLazyEnablePeerAccess)
                            for r, h in enumerate(handles)]
            self._pinned = rt.hostAlloc(8 * ERROR_WORDS, 2)  # cudaHostAllocMapped
            self._error = np.frombuffer((ctypes.c_longlong * ERROR_WORDS).from_address(self._pinned), dtype=np.int64)
            self._error[:] = 0
            self.error_address = rt.pointerGetAttributes(self._pinned).devicePointer
        self._rank = comm.rank

    def error(self):
        return self._error.tolist()

    def close(self, comm) -> None:
        rt = self._cp.cuda.runtime
        with self.device:
            rt.deviceSynchronize()
            for r, ptr in enumerate(self.regions):
                if r != self._rank:
                    rt.ipcCloseMemHandle(ptr)
            comm.barrier()  # nobody has this rank's region open any more
            rt.free(self._own)
            rt.freeHost(self._pinned)


@functools.lru_cache(maxsize=None)
def gpu_function(name: str, dtype: str | None, device: int):
    """A kernel of cuda/collectives.cu, NVRTC-compiled with one dtype's entry points."""
    import cupy

    code = DTYPE_CODES.get(dtype or "", 0)
    with cupy.cuda.Device(device):
        module = cupy.RawModule(code=cuda_source(SOURCE.name), options=(*NVRTC_OPTIONS, f"-DCB_DTYPE={code}"))
        return module.get_function(name)


class NodeKernels:
    """One communicator's kernels: its regions, its CbComm, and bound calls (see the module)."""

    def __init__(self, comm, device: str, timeout_s: float, channels: int):
        self.comm, self.device, self.n, self.channels = comm, device, comm.size, channels
        self.slot_bytes = SLOT_BYTES[device]
        nbytes = region_bytes(self.n, channels, self.slot_bytes)
        if device == "cuda":
            self.node = GpuNode(comm, nbytes)
        else:
            self.lib = host_library()
            self.node = HostNode(comm, nbytes)
        self.note = None
        if device == "cuda":
            import torch

            sharing = comm.size - len(set(comm.allgather_object(torch.cuda.current_device())))
            if sharing and not mps_running():
                self.note = (f"{comm.size} ranks share {comm.size - sharing} GPU(s) without MPS: the GPU time-slices "
                             "between processes, so every step of ring_kernel / tree_kernel waits a slice (correct, "
                             "slow); start it with nvidia-cuda-mps-control -d")
        self.struct = comm_struct(comm.rank, self.n, channels, timeout_s, self.node.regions, self.node.error_address,
                                  self.slot_bytes, spin_time(device, self.n))
        if device == "cuda":
            import cupy

            with self.node.device:
                raw = np.frombuffer(bytes(self.struct), dtype=np.uint8)
                self.device_struct = cupy.asarray(raw)  # the counters live here from now on
        comm.barrier()

    def set_timeout(self, seconds: float) -> None:
        """A wait's timeout from the next call on (the host's; a GPU keeps the first point's)."""
        self.struct.timeout_ns = int(seconds * 1e9)

    def call_channels(self, nbytes: int, wanted: int | None) -> int:
        return min(self.channels, wanted or auto_channels(self.device, nbytes, self.n))

    def bind(self, name: str, dtype: str | None, send, recv, count: int, channels: int):
        """A zero-argument callable running kernel `name` once on these buffers."""
        what = name.removeprefix("cb_").split("_float")[0]
        if self.device == "cuda":
            return self._bind_gpu(name, dtype, send, recv, count, channels, what)
        entry_address = ctypes.cast(getattr(self.lib, name), ctypes.c_void_p).value
        call = CbCall(entry_address, ctypes.pointer(self.struct), address(send), address(recv), count, channels)
        run_host, node = self.lib.cb_host_call, self.node

        def run():
            if run_host(call):
                raise KernelFault(describe(node.error(), what))
        run.call = call
        run.timer = lambda fn, samples, batch=1: self.time_batches(run, samples, batch)  # the loop in C
        return run

    def _bind_gpu(self, name, dtype, send, recv, count, channels, what):
        import cupy
        import torch

        fn = gpu_function(name, dtype, self.node.device.id)
        args = (self.device_struct, np.uint64(address(send)), np.uint64(address(recv)), np.int64(count), np.int64(0),
                np.int32(channels))
        error = self.node._error

        def run():
            if error[0]:
                raise KernelFault(describe(error.tolist(), what))
            with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                fn((channels,), (GPU_THREADS,), args)
        return run

    def time_batches(self, run, samples: int, batch: int) -> np.ndarray:
        """Seconds per call of `samples` batches of `batch` calls, the loop in C (host only)."""
        out = (ctypes.c_double * samples)()
        if self.lib.cb_host_time(run.call, samples, batch, out):
            raise KernelFault(describe(self.node.error(), "kernel"))
        return np.frombuffer(out, dtype=np.float64).copy() / batch

    def close(self) -> None:
        if self.device == "cuda":
            self.node.close(self.comm)
        else:
            self.comm.barrier()
            self.node.close()


def unavailable(device: str) -> str | None:
    """Why the kernels cannot run on this device here (one line), or None; builds them first."""
    try:
        if device == "cuda":
            import torch

            gpu_function("cb_ring_all_reduce_float32_sum", "float32", torch.cuda.current_device())
        else:
            host_library()
    except KernelUnavailable as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - CuPy / NVRTC errors of any kind: the points are skipped
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"ring_kernel and tree_kernel did not build for the GPU ({type(exc).__name__}: {first})"
    return None


class OneGpuNode:
    """n ranks of one node in one process and one launch (gridDim.y = ranks): their regions in one
    allocation, rank y's buffers at base + y·stride. The cheapest real test of the device protocol
    (tests/gpu, benchmarks): every rank's blocks run at once, so flags, fences, chunking and
    channels run on the hardware; bandwidth is then HBM-bound, not NVLink-bound."""

    def __init__(self, n: int, channels: int, timeout_s: float = 20.0):
        import cupy

        self._cp, self.n = cupy, n
        slot = SLOT_BYTES["cuda"]
        region = region_bytes(n, channels, slot)
        self.memory = cupy.zeros(region * n, dtype=cupy.uint8)
        base = self.memory.data.ptr
        self._error = cupy.cuda.alloc_pinned_memory(8 * ERROR_WORDS)
        self.error_words = np.frombuffer(self._error, dtype=np.int64, count=ERROR_WORDS)
        self.error_words[:] = 0
        error = cupy.cuda.runtime.pointerGetAttributes(self._error.ptr).devicePointer
        raw = b"".join(bytes(comm_struct(r, n, channels, timeout_s, [base + q * region for q in range(n)], error, slot,
                                         SPIN_S["cuda"])) for r in range(n))
        self.comms = cupy.asarray(np.frombuffer(raw, dtype=np.uint8))

    def run(self, name: str, dtype: str | None, send: int, recv: int, count: int, stride: int, channels: int,
            ranks: int | None = None) -> None:
        """Launch kernel `name` for ranks 0 .. ranks-1 (default all) on the current stream."""
        import torch

        fn = gpu_function(name, dtype, torch.cuda.current_device())
        with self._cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            fn((channels, ranks or self.n), (GPU_THREADS,), (self.comms, np.uint64(send), np.uint64(recv),
                                                            np.int64(count), np.int64(stride), np.int32(channels)))


def address(buf) -> int:
    """Where a numpy array's or a torch tensor's first element is."""
    return buf.ctypes.data if isinstance(buf, np.ndarray) else buf.data_ptr()
