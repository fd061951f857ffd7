"""cuda/collectives.cu's host build with every rank in this process: a rank is a Python thread
with its own CbComm, all ranks' regions one numpy buffer (what /dev/shm is to real ranks), the
calls the product's (commbench/kernels/abi.py: comm_struct, region_bytes, entry; kernel_host.host_library).
ctypes releases the GIL for the length of a call, so the ranks' kernels run concurrently.

Also the collectives' reference results and buffer layouts (in place and out of place), for any
dtype: bfloat16 as uint16 bit patterns, converted exactly on values every test picks exact."""

from __future__ import annotations

import ctypes
import mmap
import os
import threading

import numpy as np
import pytest

from commbench.kernels import abi as K
from commbench.kernels import host as kernel_host
from commbench.backends.base import NumpyBuffers
from commbench.kernels.host import host_library

KINDS = {  # a test's name of a kernel: (schedule, collective)
    "ring_all_reduce": ("ring", "all_reduce"),
    "ring_reduce_scatter": ("ring", "reduce_scatter"),
    "ring_all_gather": ("ring", "all_gather"),
    "tree_all_reduce": ("tree", "all_reduce"),
    "oneshot_all_reduce": ("oneshot", "all_reduce"),  # (the ring's schedule past a one-shot message)
    "oneshot_reduce_scatter": ("oneshot", "reduce_scatter"),
    "oneshot_all_gather": ("oneshot", "all_gather"),
}
DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8"]
OPS = ["sum", "prod", "min", "max"]
SLOT = 256  # small slots: sizes beyond ranks x chunk x channels stay small


class Alone(NumpyBuffers):
    """Rank 0 of 2 whose peer never comes: what NodeKernels and harness.Buffers ask of a communicator."""

    rank, size, device = 0, 2, "cpu"

    def allgather_object(self, obj):
        return [obj, obj]

    def barrier(self):
        pass

    def alloc_point(self, count, dtype):  # (no library registers its buffers here)
        return self.alloc(count, dtype)


def storage(dtype: str) -> np.dtype:
    """The numpy dtype holding a dtype's elements (bfloat16: its bit patterns)."""
    return np.dtype(np.uint16) if dtype == "bfloat16" else np.dtype(dtype)


def to_float64(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def from_float64(x: np.ndarray, dtype: str) -> np.ndarray:
    """x in dtype; every value must be representable (asserted for bfloat16, whose bits are cut)."""
    if dtype == "bfloat16":
        bits = x.astype(np.float32).view(np.uint32)
        assert not (bits & 0xFFFF).any(), "a bfloat16 value that is not exact"
        return (bits >> 16).astype(np.uint16)
    return x.astype(dtype)


class Node:
    """n ranks' CbComms over one buffer of regions; `channels` the most any call may use."""

    def __init__(self, n: int, channels: int, slot_bytes: int = K.SLOT_BYTES["cpu"], timeout_s: float = 20.0,
                 spin_s: float = K.SPIN_S["oversubscribed"], nap_s: float = 0.0):
        self.lib = host_library()
        self.n, self.channels, self.slot_bytes = n, channels, slot_bytes
        page = mmap.PAGESIZE
        per_rank = -(-K.region_bytes(n, channels, slot_bytes) // page) * page
        self._memory = np.zeros(per_rank * n + page, np.uint8)  # zeroed flags, as a fresh /dev/shm segment
        base = -(-self._memory.ctypes.data // page) * page
        self.errors = [(ctypes.c_longlong * K.ERROR_WORDS)() for _ in range(n)]
        self.comms = [K.comm_struct(r, n, channels, timeout_s, [base + q * per_rank for q in range(n)],
                                    ctypes.addressof(self.errors[r]), slot_bytes, spin_s, nap_s) for r in range(n)]
        self.broken = False

    def entry_address(self, name: str) -> int:
        return ctypes.cast(getattr(self.lib, name), ctypes.c_void_p).value

    def call(self, rank: int, name: str, send, recv, count: int, channels: int, stride: int = 0) -> K.CbCall:
        """One bound call (count: elements, or bytes of one block for all-gather; stride: how far
        apart the ranks' buffers are, where they are in one another's reach)."""
        assert 1 <= channels <= self.channels
        return K.CbCall(self.entry_address(name), ctypes.pointer(self.comms[rank]), K.address(send), K.address(recv),
                        count, channels, stride)

    def host_call(self, call: K.CbCall) -> int:
        return self.lib.cb_host_call(ctypes.byref(call))

    def error(self, rank: int) -> list[int]:
        return list(self.errors[rank])

    def threads(self, work, ranks=None, join_s: float = 120.0) -> list:
        """work(rank) in one thread per rank (all ranks, or `ranks`); their results in rank order.
        A thread still running after join_s seconds is a hang: AssertionError (it is a daemon)."""
        ranks = list(range(self.n)) if ranks is None else list(ranks)
        results, failures = {}, {}

        def body(r):
            try:
                results[r] = work(r)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                failures[r] = exc

        threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in ranks]
        for t in threads:
            t.start()
        for t in threads:
            t.join(join_s)
        hung = [r for r, t in zip(ranks, threads) if t.is_alive()]
        if hung or failures:
            self.broken = True
        assert not hung, f"ranks {hung} still in their calls after {join_s} s (errors: {[self.error(r) for r in ranks]})"
        if failures:
            raise next(iter(failures.values()))
        return [results[r] for r in ranks]

    def run(self, calls: list[list[K.CbCall]]) -> list[tuple[int, int, int]]:
        """Each rank's calls in order, every rank in a thread; the failed calls: (rank, index, code)."""
        def work(r):
            for i, c in enumerate(calls[r]):
                code = self.lib.cb_host_call(ctypes.byref(c))
                if code:
                    return (r, i, code)
            return None
        failed = [f for f in self.threads(work) if f]
        self.broken = self.broken or bool(failed)
        return failed


# --- one collective call on every rank: inputs, buffers, reference ----------------------------------------
def reference(inputs: list[np.ndarray], dtype: str, op: str) -> np.ndarray:
    """The element-wise reduction of the ranks' inputs; exact for the values inputs() makes."""
    ufunc = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}[op]
    if np.dtype(storage(dtype)).kind in "iu" and dtype != "bfloat16":
        return ufunc.reduce(np.stack(inputs), axis=0, dtype=dtype)  # wraps like the kernels (8-bit types)
    return from_float64(ufunc.reduce(np.stack([to_float64(x, dtype) for x in inputs]), axis=0), dtype)


def inputs(rng: np.random.Generator, dtype: str, op: str, n: int, count: int) -> list[np.ndarray]:
    """n ranks' inputs for which the reduction is exact in every order: small integers for sum,
    powers of two (and zeros) for prod, and for the 8-bit types the whole range (their wrapping
    is modular arithmetic). min and max: spread values, nonzero (no -0.0/+0.0 tie to order)."""
    st = storage(dtype)
    if dtype in ("int8", "uint8"):
        info = np.iinfo(dtype)
        return [rng.integers(info.min, info.max + 1, count).astype(dtype) for _ in range(n)]
    if op == "sum":
        vals = [rng.integers(-8, 9, count) for _ in range(n)]  # |sum| <= 64: exact in bfloat16 too
    elif op == "prod":
        vals = [rng.choice([-2, -1, 1, 2, 2, 0.5, 0], count) for _ in range(n)]  # +-2^k, k <= 8, or +-0
        if st.kind in "iu":
            vals = [np.where(v == 0.5, 1, v) for v in vals]
    elif st.kind in "iu":
        info = np.iinfo(st)
        vals = [rng.integers(info.min, info.max, count, endpoint=True) for _ in range(n)]
    else:
        vals = [rng.standard_normal(count) * 100 for _ in range(n)]
        vals = [np.where(np.abs(v) < 1e-3, 1.0, v) for v in vals]
    if dtype == "bfloat16":  # bit patterns: float32 cut to its top half (exact on the integers above)
        return [(v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16) for v in vals]
    return [np.asarray(v).astype(dtype) for v in vals]


SENTINEL = 0xA5  # bytes of every output before a call


class Case:
    """One collective on every rank of a node: its buffers (laid out as the harness lays out in
    place ones), its bound calls, and the check of every rank's output after them. shared: the
    ranks' outputs in one array at equal spacing, passed as the calls' stride (as the product's
    harness buffers in the node's shared memory: all-gather and the ring all-reduce then read straight
    out of their left neighbour's buffers)."""

    def __init__(self, node: Node, kind: str, dtype: str, op: str | None, count: int, channels: int, in_place: bool,
                 rng: np.random.Generator, shared: bool = False):
        self.node, self.kind, self.dtype, self.op, self.count = node, kind, dtype, op, count
        self.channels, self.in_place, self.shared = channels, in_place, shared
        algorithm, collective = KINDS[kind]
        n, st = node.n, storage(dtype)
        self.name = K.entry(algorithm, collective, dtype, op)
        per_rank_in = count * n if collective == "reduce_scatter" else count
        self.sends = inputs(rng, dtype, op or "max", n, per_rank_in)
        given = list(self.sends)
        if collective == "all_gather":
            self.expected = [np.concatenate(self.sends)] * n
        else:
            total = reference(self.sends, dtype, op)
            self.expected = [total if collective == "all_reduce" else total[r * count:(r + 1) * count]
                             for r in range(n)]
        self.kernel_count = count * st.itemsize if collective == "all_gather" else count
        self.buffers, self.outputs, self.calls = [], [], []
        out_count = n * count if collective in ("all_gather", "reduce_scatter") else count
        lines = lambda elements: -(-max(elements, 1) * st.itemsize // 64) * 64  # noqa: E731
        self._input_bytes = lines(per_rank_in)  # a rank's slot: input, output, a line (no two ranks' lines shared)
        self.stride = self._input_bytes + lines(out_count) + 64 if shared else 0
        self._pool = np.full(self.stride * n, SENTINEL, np.uint8)
        for r in range(n):
            if shared and not in_place:  # the input in the pool too (all-gather reads its left neighbour's)
                self.sends[r] = self._slot(r, 0, per_rank_in)
                self.sends[r][:] = given[r]
            send = self.sends[r]
            if collective == "all_reduce":
                buf = self._copy(send) if in_place else self._sentinel(count)
                src, dst, out = (buf, buf, buf) if in_place else (send, buf, buf)
            elif collective == "reduce_scatter":
                buf = self._copy(send) if in_place else self._sentinel(count)
                src, dst = (buf, buf[r * count:]) if in_place else (send, buf)
                out = buf[r * count:(r + 1) * count] if in_place else buf
            else:
                buf = self._sentinel(n * count)
                if in_place:
                    buf[r * count:(r + 1) * count] = send
                src, dst, out = (buf[r * count:] if in_place else send), buf, buf
            self.buffers.append(buf)
            self.outputs.append(out)
            self.calls.append(node.call(r, self.name, src, dst, self.kernel_count, channels, self.stride))
        self.originals = [s.copy() for s in self.sends]

    def _copy(self, values):
        buf = self._sentinel(len(values))
        buf[:] = values
        return buf

    def _sentinel(self, count):
        """An output buffer of sentinels: in the next rank's slot of the pool where shared."""
        if self.shared:
            return self._slot(len(self.buffers), self._input_bytes, count)
        nbytes = max(count, 1) * storage(self.dtype).itemsize
        return np.full(nbytes, SENTINEL, np.uint8).view(storage(self.dtype))[:count]

    def _slot(self, r: int, offset: int, count: int) -> np.ndarray:
        start = r * self.stride + offset
        return self._pool[start:start + max(count, 1) * storage(self.dtype).itemsize].view(storage(self.dtype))[:count]

    def wrong(self) -> list[str]:
        """What is not as it should be after the calls (empty when all is right), bit for bit."""
        bad = []
        for r in range(self.node.n):
            got, want = self.outputs[r], self.expected[r]
            if got.view(np.uint8).tobytes() != want.view(np.uint8).tobytes():
                diff = np.flatnonzero(got.view(storage(self.dtype)) != want)
                bad.append(f"{self}: rank {r} differs at {diff.size} elements, first {diff[:5].tolist()}")
            if not self.in_place and self.sends[r].tobytes() != self.originals[r].tobytes():
                bad.append(f"{self}: rank {r}'s input was written")
        return bad

    def __str__(self):
        return (f"{self.kind} n={self.node.n} {self.dtype} {self.op or ''} count={self.count} "
                f"channels={self.channels} {'in place' if self.in_place else 'out of place'}"
                f"{' shared' if self.shared else ''}")


def run_cases(node: Node, cases: list[Case]) -> list[str]:
    """Every case's calls in order on every rank; what went wrong (empty: all right)."""
    failed = node.run([[c.calls[r] for c in cases] for r in range(node.n)])
    if failed:
        return [f"{cases[i]}: rank {r} returned {code}: {K.describe(node.error(r), cases[i].name)}"
                for r, i, code in failed]
    return [w for c in cases for w in c.wrong()]


def segments_of(pids) -> list[str]:
    """/dev/shm segments of the kernels named after one of these processes."""
    names = os.listdir(kernel_host.SHM_DIR) if os.path.isdir(kernel_host.SHM_DIR) else []
    return [s for s in names for pid in pids if s.startswith(f"{kernel_host.SEGMENT_PREFIX}{pid}-")]


needs_compiler = pytest.mark.skipif(kernel_host.compiler() is None, reason="no C++ compiler (g++, c++, clang++ or $CXX)")
