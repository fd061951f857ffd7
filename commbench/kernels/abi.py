"""The contract between cuda/collectives.cu and Python: its structures (CbComm, CbCall) field for
field, its constants, the connections and trees a rank's CbComm describes, the kernels' names,
and the sizing rules (slots, channels, how long a wait spins). Building and running them:
host.py (the host build, the /dev/shm segment), gpu.py (NVRTC, CUDA IPC) and
node.py (one communicator's kernels, bound to the harness' buffers).
"""

from __future__ import annotations

import ctypes

import numpy as np

from commbench.tuning import PREFIX, Tunable
from commbench import tuning
from commbench.machine.facts import facts
from commbench.sources import CUDA_DIR
from commbench.trees import double_tree

SOURCE = CUDA_DIR / "collectives.cu"
MAX_NODE_RANKS, MAX_CHANNELS, MAX_CONNS = 64, 32, 8  # as cuda/collectives.cu (CB_MAX_RANKS: the ranks of one node)
TREES = 2  # lanes per channel (CB_TREES): the double binary tree's two, the ring uses the first
MAX_LANES = MAX_CHANNELS * TREES
LINE = 64  # CB_LINE: a flag's line; each FIFO slot's line for a small message and its number
ONESHOT_LINES = 64  # CB_ONESHOT_LINES: a one-shot message's lines, each with LINE - 8 bytes of data
ONESHOT_OFFSET = 2 * MAX_LANES * MAX_CONNS * LINE
FIFO_OFFSET = ONESHOT_OFFSET + MAX_NODE_RANKS * 2 * ONESHOT_LINES * LINE
SKEW_BYTES = 16 * 256  # CB_SKEWS * CB_SKEW
GPU_THREADS = 512  # CB_THREADS
SLOTS = 8  # FIFO depth per connection and lane
SLOT_BYTES = {"cpu": 1 << 16, "cuda": 1 << 18}  # one chunk
CHANNEL_BYTES = {"cpu": 1 << 20, "cuda": 1 << 19}  # a call gets a channel per this many bytes ...
MAX_AUTO_CHANNELS = {"cpu": 8, "cuda": 16}  # ... up to this many (the CPU: also cores / local ranks)
# A call whose message to each peer (all-reduce: the buffer; reduce-scatter and all-gather: a block) is at
# most this many bytes (all-reduce: per kernel) runs the one-shot schedule instead of the kernel's own
# (cuda/collectives.cu): one hand-off instead of the ring's 2(n-1) or the tree's 2·depth, in lines that each
# cross between the cores, so only where few lines beat the ring's steps: the tree's own schedule is faster
# than the ring's, so its bound is lower. Where the host's ranks outnumber its cores ("oversubscribed"), each
# hand-off of the ring may wait for a rank to get a core, so every message a one-shot call can carry
# (ONESHOT_BYTES) goes one-shot, but for the all-gather, whose direct ring copies each block once. Not chosen
# on a GPU, where its thread 0 waits for every line in turn. The measurements behind each bound:
# docs/performance.md (Tuning constants of the kernels).
ONESHOT_BYTES = ONESHOT_LINES * (LINE - 8)
ONESHOT_MAX = {"cpu": {"all_reduce": {"ring": 512, "tree": 256}, "reduce_scatter": 256, "all_gather": LINE - 8},
               "oversubscribed": {"all_reduce": ONESHOT_BYTES, "reduce_scatter": ONESHOT_BYTES, "all_gather": 512},
               "cuda": {}}
# How long a wait spins before it yields (spin_time): oversubscribed, briefly, as the peer it waits for may
# need this core. A GPU's wait never yields nor sleeps: past this it also reads the call's error record, once
# per CB_ABORT_POLL_NS (cuda/portable.h).
SPIN_S = {"cpu": 200e-6, "oversubscribed": 0.3e-6, "cuda": 20e-6}
# After how long a wait naps instead of yielding, where it naps at all (nap_time): long waits (a message
# crossing a slow link) nap, so the ranks beside them keep their cores. Measured: docs/performance.md.
NAP_S = 20e-6
# Where a direct call's outputs on the node (every rank's) come to more than this, all of them are written past
# the caches (streamed on the host): they do not fit, and an ordinary store first reads the line it writes. The
# all-gather then pushes (ring_all_gather_push). The node's outputs, not one rank's: docs/performance.md.
CACHED_OUTPUT_BYTES = 16 << 20
# A direct call's chunk (ring_all_reduce_direct), in slots: no slot holds it, so it is only how often the ranks
# that read each other's buffers in place hand off. Measured: docs/performance.md.
DIRECT_SLOTS = 4
# A tree all-reduce's channel slice smaller than this takes one tree (tree ch % 2) whole: halves would cost a
# rank more flag hand-offs than their smaller copies save; except a slice whose halves are small messages
# (CB_INLINE_BYTES), where one line each beats two lines in a row. Measured: docs/performance.md.
TREE_SPLIT_BYTES = 256
ERROR_WORDS = 6


def _everywhere(value) -> dict:
    return {"cpu": value, "oversubscribed": value, "cuda": value}


# The constants above that a variable overrides (commbench.tuning; docs: Environment variables)
TUNABLES = {
    "slot_bytes": Tunable(f"{PREFIX}SLOT_BYTES", SLOT_BYTES, 4096, 1 << 24, 1,
                          "bytes of one FIFO slot, the chunk a transfer hands over", power_of_two=True),
    "channel_bytes": Tunable(f"{PREFIX}CHANNEL_BYTES", CHANNEL_BYTES, 1024, 1 << 40, 1,
                             "bytes of a call per automatic channel"),
    "max_channels": Tunable(f"{PREFIX}MAX_CHANNELS", MAX_AUTO_CHANNELS, 1, MAX_CHANNELS, 1,
                            "the most automatic channels a call gets (on the CPU also at most cores / local ranks)"),
    "oneshot_bytes": Tunable(f"{PREFIX}ONESHOT_BYTES", {}, 0, ONESHOT_BYTES, 1,
                             "the largest message to each peer that goes one-shot, for every collective and kernel "
                             "(0: none; unset: ONESHOT_MAX's bounds)"),
    "spin_us": Tunable(f"{PREFIX}SPIN_US", SPIN_S, 0, 1e6, 1e-6,
                       "microseconds a wait spins before it yields (on a GPU: before it reads the error record), "
                       "one value for the CPU, an oversubscribed host and the GPU alike"),
    "nap_us": Tunable(f"{PREFIX}NAP_US", {"cpu": NAP_S}, 0, 1e6, 1e-6,
                      "microseconds after which a wait of a node kernel beside gloo naps instead of yielding "
                      "(0: never)"),
    "cached_bytes": Tunable(f"{PREFIX}CACHED_BYTES", _everywhere(CACHED_OUTPUT_BYTES), 0, 1 << 50, 1,
                            "bytes of a direct call's outputs on the node (every rank's) above which they are written "
                            "past the caches, and the all-gather pushes (0: always)"),
    "direct_slots": Tunable(f"{PREFIX}DIRECT_SLOTS", _everywhere(DIRECT_SLOTS), 1, 1 << 16, 1,
                            "a direct call's chunk in slots: how often ranks that read each other's buffers in place "
                            "hand off"),
    "tree_split_bytes": Tunable(f"{PREFIX}TREE_SPLIT_BYTES", _everywhere(TREE_SPLIT_BYTES), 16, 1 << 50, 1,
                                "bytes of a tree all-reduce's channel slice from which it is split between the two "
                                "trees (smaller: one tree takes it, unless its halves are small messages)"),
}


def tuned(name: str, where: str):
    """TUNABLES[name] where ("cpu", "cuda", "oversubscribed"): its variable's value, else the default."""
    return tuning.value(TUNABLES[name], where)


def check_tuning() -> None:
    """Every tuning variable that is set reads; InputError (one line) otherwise."""
    tuning.check(TUNABLES.values())


class KernelUnavailable(RuntimeError):
    """The kernels cannot be built or run here; the message is the one line the user sees."""


class KernelFault(RuntimeError):
    """A kernel's wait timed out (a peer died or stalled)."""


class CbComm(ctypes.Structure):
    """struct CbComm of cuda/collectives.cu, field for field."""

    _fields_ = [(n, ctypes.c_longlong) for n in ("rank", "nranks", "nslots", "slot_bytes", "channels", "conns",
                                                  "timeout_ns", "spin_ns", "nap_ns", "cached_bytes", "direct_slots",
                                                  "tree_split_bytes")] + [
        ("error", ctypes.c_void_p),
        ("region", ctypes.c_void_p * MAX_NODE_RANKS),
        ("in_conn", ctypes.c_int * MAX_NODE_RANKS), ("out_conn", ctypes.c_int * MAX_NODE_RANKS),
        ("peer_in_conn", ctypes.c_int * MAX_NODE_RANKS), ("peer_out_conn", ctypes.c_int * MAX_NODE_RANKS),
        ("tree_parent", ctypes.c_int * TREES), ("tree_child", (ctypes.c_int * 2) * TREES),
        ("tree_depth", ctypes.c_int * TREES),
        ("in_seq", (ctypes.c_ulonglong * MAX_CONNS) * MAX_LANES),
        ("out_seq", (ctypes.c_ulonglong * MAX_CONNS) * MAX_LANES),
        ("out_freed", (ctypes.c_ulonglong * MAX_CONNS) * MAX_LANES),
        ("oneshot_calls", ctypes.c_ulonglong),
    ]


class CbCall(ctypes.Structure):
    _fields_ = [("entry", ctypes.c_void_p), ("comm", ctypes.POINTER(CbComm)), ("send", ctypes.c_void_p),
                ("recv", ctypes.c_void_p), ("count", ctypes.c_longlong), ("channels", ctypes.c_longlong),
                ("stride", ctypes.c_longlong)]  # 0, or the ranks' buffers in reach, this far apart: direct


# --- topology: who talks to whom ----------------------------------------------------------------------
def trees(n: int) -> list[tuple[list[int | None], list[list[int]]]]:
    """The two binary trees (parent, children) of the double binary tree: dbtree's."""
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
                slot_bytes: int, spin_s: float, nap_s: float = 0.0, where: str = "cpu") -> CbComm:
    """This rank's CbComm: its connection tables, trees, where every region is mapped here, and the
    constants TUNABLES holds for where ("cpu", "cuda") that it carries to the kernels."""
    if slot_bytes < LINE or slot_bytes % LINE:
        raise ValueError(f"slot_bytes {slot_bytes}: whole {LINE}-byte lines (the FIFOs' lines stay aligned)")
    senders, receivers = peers(n)
    c = CbComm(rank=rank, nranks=n, nslots=SLOTS, slot_bytes=slot_bytes, channels=channels,
               conns=connections(n), timeout_ns=int(timeout_s * 1e9), error=error, spin_ns=round(spin_s * 1e9),
               nap_ns=round(nap_s * 1e9), cached_bytes=tuned("cached_bytes", where),
               direct_slots=tuned("direct_slots", where), tree_split_bytes=tuned("tree_split_bytes", where))
    for p in range(MAX_NODE_RANKS):
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
        c.tree_depth[t] = depth(parent, rank)
    return c


def depth(parent: list[int | None], rank: int) -> int:
    """How many edges below its tree's root a rank is."""
    d = 0
    while parent[rank] is not None:
        rank, d = parent[rank], d + 1
    return d


def connections(n: int) -> int:
    """The most connections any rank has in either direction (CbComm.conns: in_conn and out_conn
    both index below it; a FIFO per incoming one)."""
    senders, receivers = peers(n)
    return max([len(s) for s in senders + receivers] + [1])


def region_bytes(n: int, channels: int, slot_bytes: int) -> int:
    return FIFO_OFFSET + SKEW_BYTES + connections(n) * channels * TREES * SLOTS * (LINE + slot_bytes)  # fifo_slot


def entry_points() -> dict[str, list[str]]:
    """Every kernel of cuda/collectives.cu the Python side launches (tests/cuda/test_cuda_compile.py)."""
    from commbench.kernels.reducers import CUDA_DTYPES, CUDA_OPS

    names = [entry(a, c, d, o) for a, c in (("ring", "all_reduce"), ("ring", "reduce_scatter"), ("tree", "all_reduce"),
                                            ("oneshot", "all_reduce"), ("oneshot", "reduce_scatter"))
             for d in CUDA_DTYPES for o in CUDA_OPS]
    return {SOURCE.name: names + [entry(a, "all_gather", "float32", None) for a in ("ring", "oneshot")]}


def schedule(kernel: str, collective: str, device: str, nranks: int, message_bytes: int, host_ranks: int) -> str:
    """The schedule a call of `kernel` ("ring" or "tree") runs: "oneshot" where each peer's message
    (message_bytes) is small enough (ONESHOT_MAX: the device's, or "oversubscribed" where the host's ranks,
    host_ranks, outnumber its cores), else the kernel's own. One channel for a one-shot call."""
    most = tuning.override(TUNABLES["oneshot_bytes"])
    if most is None:
        most = oneshot_max("oversubscribed" if oversubscribed(device, host_ranks) else device, collective, kernel)
    if nranks < 2 or message_bytes <= 0 or most is None:
        return kernel
    return "oneshot" if message_bytes <= most else kernel


def oneshot_max(where: str, collective: str, kernel: str) -> int | None:
    """ONESHOT_MAX's bound for a call of `kernel` ("ring" or "tree") where `where` is a device or
    "oversubscribed" (a bound may be one per kernel); None: that call never goes one-shot."""
    most = ONESHOT_MAX[where].get(collective)
    return most.get(kernel) if isinstance(most, dict) else most


def entry(algorithm: str, collective: str, dtype: str, op: str | None) -> str:
    """The kernel's name in cuda/collectives.cu (avg runs as sum; the caller divides)."""
    if collective == "all_gather":  # (the tree has none: the ring's)
        return f"cb_{'ring' if algorithm == 'tree' else algorithm}_all_gather"
    return f"cb_{algorithm}_{collective}_{dtype}_{'sum' if op in (None, 'avg') else op}"


def schedule_of(name: str) -> str:
    """The schedule an entry point runs: cb_oneshot_all_reduce_int8_max -> oneshot."""
    return name.split("_")[1]


def what(name: str) -> str:
    """A kernel's schedule, for messages: cb_ring_all_reduce_int8_max -> ring_all_reduce."""
    return "_".join(name.split("_")[1:4])


def describe(error, what: str) -> str:
    """The error record (cuda/collectives.cu record_error) in one line. A code of -1 is a record
    claimed whose details are still being written (read from the host while the GPU runs)."""
    code, rank, channel, step, peer, kind = (int(e) for e in error[:ERROR_WORDS])
    if code == -1:
        return f"{what}: a wait timed out (its record was still being written when read)"
    waited = {0: f"rank {peer}'s data", 1: f"a free slot at rank {peer}", 3: f"rank {peer} to start the call"}.get(
        kind, f"rank {peer} to read this rank's output")
    return f"{what}: rank {rank} timed out at step {step} of channel {channel} waiting for {waited} (code {code})"


def spin_time(device: str, local_ranks: int) -> float:
    """How long a wait spins before it backs off (on a GPU: before it first reads the error record):
    long where every rank has a core of its own (a yield hands the core to whatever else runs, the
    launcher say, for a time slice: measured 3x slower all-reduce on 2 ranks), short where ranks
    outnumber cores (the rank being waited for needs this core). Automatic channels never outnumber
    the cores (auto_channels)."""
    if device == "cuda":
        return tuned("spin_us", "cuda")
    return tuned("spin_us", "oversubscribed" if oversubscribed(device, local_ranks) else "cpu")


def nap_time(device: str, backend: str) -> float:
    """After how long a wait sleeps between looks instead of yielding (CbComm.nap_ns; 0: never; never
    before its spin, spin_time, is over), for kernels that run beside the backend's own transfers
    (hierarchical_kernel's node kernels). The pool's wait for a call's other channels (cb_host_call)
    yields as before. gloo's transfers block in the OS: its threads need a core the moment their data
    arrives, and the ranks' yielding waits keep both cores busy. Open MPI's transfers poll instead:
    beside them a napping wait loses its core to the polling (NAP_S's figures)."""
    return tuned("nap_us", "cpu") if device == "cpu" and backend == "gloo" else 0.0


def oversubscribed(device: str, local_ranks: int) -> bool:
    """The host's ranks outnumber its cores (on the CPU: they take turns on them)."""
    return device == "cpu" and local_ranks > facts().cpus


def auto_channels(device: str, nbytes: int, local_ranks: int) -> int:
    cap = tuned("max_channels", device)
    if device == "cpu":
        cap = min(cap, max(1, facts().cpus // max(local_ranks, 1)))
    return max(1, min(cap, nbytes // tuned("channel_bytes", device)))


def address(buf) -> int:
    """Where a numpy array's or a torch tensor's first element is."""
    return buf.ctypes.data if isinstance(buf, np.ndarray) else buf.data_ptr()
