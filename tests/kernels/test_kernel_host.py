"""The kernels with every rank's buffers in reach (cuda/collectives.cu's direct all-gather and ring
all-reduce) and the harness' buffers in the node's shared memory (kernel_host.HostNode.buffer,
Algorithm.allocator): in one process, a thread per rank (tests/kernel_threads.py). The kernels
themselves: tests/kernels/test_kernel_abi.py."""

from __future__ import annotations

import ctypes
import errno
import os

import numpy as np
import pytest

import kernel_threads as kt
from commbench.dtypes import DTYPES as ALL_DTYPES
from commbench.kernels import host as kernel_host
from commbench.kernels import abi as K
from commbench.algorithms import ALGORITHMS
from commbench.algorithms.base import Context
from commbench.algorithms.kernel import NODE_KEY
from commbench.collectives import COLLECTIVES
from commbench.rank.harness import Buffers
from conftest import pretend_machine
from kernel_threads import DTYPES, KINDS, SLOT, Alone, Case, Node, needs_compiler


@needs_compiler
@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_bit_exact_with_the_ranks_buffers_in_reach(world):
    """The ranks' buffers in one array (stride: the product's harness buffers in the node's shared
    memory): all-gather and the ring all-reduce read straight out of the left neighbour's buffers (the
    direct path), the other kernels ignore the stride. Small and product-size slots (the node's
    outputs past K.CACHED_OUTPUT_BYTES at the larger counts), tight FIFOs between; with small slots
    a count of several direct rounds (K.DIRECT_SLOTS slots a rank a round) a channel; every case but
    an in-place reduction runs twice back to back, direct and FIFO calls interleaved on the same
    lanes; every dtype's bytes for all-gather. At 8 ranks (8 threads spinning on this machine's cores: 47 s
    for all three) the small slots only; tight FIFOs and product-size slots at 2, 3 and 4."""
    rng = np.random.default_rng([world, 21])
    slots = ((SLOT, K.SLOTS), (SLOT, 2), (K.SLOT_BYTES["cpu"], K.SLOTS))
    for slot, nslots in slots[:1] if world > 4 else slots:
        node = Node(world, channels=3, slot_bytes=slot)
        for comm in node.comms:
            comm.nslots = nslots
        chunk = slot // 4
        cases = [Case(node, kind, dtype, None if kind.endswith("all_gather") else "sum", count, channels, in_place, rng,
                      shared=True)
                 for kind in KINDS for dtype in (DTYPES if kind.endswith("all_gather") else ["float32", "int8"])
                 for in_place in (False, True) for channels in (1, 3)
                 for count in [1, 7, chunk + 3, 2 * world * chunk * channels + 5]
                 + ([17 * world * chunk * channels + 5] if slot == SLOT else [])]
        assert all(c.stride > 0 for c in cases)
        calls = [[(c, c.calls[r]) for c in cases for _ in range(1 if c.in_place and c.op else 2)]  # (a reduction
                 for r in range(world)]  # in place would reduce its result again)
        failed = node.run([[call for _, call in mine] for mine in calls])
        assert not failed, [f"{calls[r][i][0]}: rank {r}: {K.describe(node.error(r), calls[r][i][0].name)}"
                            for r, i, _ in failed]
        wrong = [w for c in cases for w in c.wrong()]
        assert not wrong, "\n".join(wrong[:20])


@needs_compiler
@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("tuning", [{"CACHED_BYTES": 0, "DIRECT_SLOTS": 1, "TREE_SPLIT_BYTES": 16},
                                    {"CACHED_BYTES": 1 << 40, "DIRECT_SLOTS": 64, "TREE_SPLIT_BYTES": 1 << 40}],
                         ids=["smallest", "largest"])
def test_bit_exact_whatever_the_constants_cbcomm_carries(world, tuning, monkeypatch):
    """The constants CbComm carries from K.TUNABLES, set by their variables: the smallest (every direct
    call's outputs past the caches and the all-gather pushing at any size, a hand-off every slot, every tree
    slice of 16 B or more split between the trees) and the largest (none of these); every kernel, direct
    (shared) and through the FIFOs, twice back to back, stays bit-exact."""
    for name, value in tuning.items():
        monkeypatch.setenv(f"COMMBENCH_KERNEL_{name}", str(value))
    node = Node(world, channels=3, slot_bytes=SLOT)
    assert [(c.cached_bytes, c.direct_slots, c.tree_split_bytes) for c in node.comms] == [tuple(tuning.values())] * world
    rng = np.random.default_rng([world, 24])
    chunk = SLOT // 4
    cases = [Case(node, kind, dtype, None if kind.endswith("all_gather") else "sum", count, channels, False, rng,
                  shared=shared)
             for kind in KINDS for dtype in (["uint8", "float64"] if kind.endswith("all_gather") else ["float32", "int8"])
             for channels in (1, 3) for shared in (True, False)
             for count in [1, 7, chunk + 3, 2 * world * chunk * channels + 5, 9 * world * chunk * channels + 3]]
    calls = [[c.calls[r] for c in cases for _ in range(2)] for r in range(world)]
    failed = node.run(calls)
    assert not failed, [f"rank {r}: {K.describe(node.error(r), 'kernel')}" for r, _, _ in failed]
    wrong = [w for c in cases for w in c.wrong()]
    assert not wrong, "\n".join(wrong[:20])


@needs_compiler
@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("kind,dtype,op", [("ring_all_gather", "uint8", None), ("ring_all_reduce", "float32", "sum")])
@pytest.mark.parametrize("channels,in_place", [(1, False), (3, True)])
def test_a_direct_call_returns_only_once_its_buffers_are_read(world, kind, dtype, op, channels, in_place):
    """When a rank's call returns, its right neighbour has read all it needs from it: the rank's
    head flag as it last read it (out_freed) has caught up with the messages it sent. And each
    rank scribbles over its output and input as soon as its call returns (as the harness refills
    buffers between loops): a neighbour still reading either would copy the scribble. The results
    must all be right, call after call (different inputs each time; several direct rounds a channel
    from about 4 * world * SLOT bytes)."""
    node = Node(world, channels=channels, slot_bytes=SLOT)
    rng = np.random.default_rng([world, 22])
    cases = [Case(node, kind, dtype, op, count, channels, in_place, rng, shared=True)
             for count in rng.integers(SLOT, 8 * SLOT * channels, 40)]
    _call_and_scribble(node, cases)


@needs_compiler
@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("channels,in_place", [(1, False), (3, True)])
def test_a_direct_all_gather_too_large_for_the_caches_writes_into_its_left_neighbours_output(world, channels,
                                                                                              in_place):
    """Past CACHED_OUTPUT_BYTES of the node's outputs a direct all-gather pushes each block into its
    left neighbour's output (ring_all_gather_push): bit-exact, a rank's buffers its own again once its
    call returns (the others scribbled on at once), and its messages in step with the direct and FIFO
    calls before and after it on the same lanes (a message count off by one would hang or misread)."""
    node = Node(world, channels=channels, slot_bytes=16 * SLOT)
    rng = np.random.default_rng([world, 23])
    large = node.comms[0].cached_bytes // world**2 + 1
    plan = [(large, True), (1000, True), (large + 7 * 64 * SLOT + 3, True), (large, False), (large + 5, True)]
    cases = [Case(node, "ring_all_gather", "uint8", None, count, channels, in_place, rng, shared=shared)
             for count, shared in plan]
    cases.insert(2, Case(node, "ring_all_reduce", "float32", "sum", 5000, channels, False, rng, shared=True))
    _call_and_scribble(node, cases)


@needs_compiler
@pytest.mark.parametrize("bound,count,pushed", [(None, None, True), ("0", 64, True), ("256", 64, False)],
                         ids=["default", "bound-0", "bound-256"])
def test_a_pushed_all_gather_alone_writes_nothing_and_names_the_neighbour_it_waits_to_start(bound, count, pushed,
                                                                                             monkeypatch):
    """Rank 1 of 2 makes a push-sized direct all-gather, rank 0 never calls: rank 1 times out at its
    first wait, naming rank 0 as the one it waits for to start, and has written nothing into rank 0's
    output (a push may write there only once its owner is in the call). Push-sized: the node's outputs past
    CbComm.cached_bytes, which COMMBENCH_KERNEL_CACHED_BYTES sets (with 64 B blocks the node's two outputs
    hold 256 B: under a bound of 256 no push, and the direct copy waits for rank 0's data instead)."""
    if bound is not None:
        monkeypatch.setenv("COMMBENCH_KERNEL_CACHED_BYTES", bound)
    node = Node(2, channels=1, slot_bytes=16 * SLOT, timeout_s=0.2)
    count = count or node.comms[0].cached_bytes // 4 + 1
    case = Case(node, "ring_all_gather", "uint8", None, count, 1, False, np.random.default_rng(4), shared=True)
    [code] = node.threads(lambda r: node.host_call(case.calls[r]), ranks=[1])
    assert code == 1
    assert K.describe(node.error(1), "ring_all_gather") == (
        "ring_all_gather: rank 1 timed out at step 0 of channel 0 waiting for rank 0 to start the call (code 1)"
        if pushed else "ring_all_gather: rank 1 timed out at step 1 of channel 0 waiting for rank 0's data (code 1)")
    assert (case.outputs[0] == kt.SENTINEL).all()


def _call_and_scribble(node: Node, cases: list[Case]) -> None:
    """Every rank makes the calls in turn; after each direct one it checks that its right neighbour answered
    every message it sent (its head flag as last read, out_freed; a FIFO call returns with messages in the
    slots), and after every call it keeps its output and scribbles over its
    output and input (as the harness refills buffers between loops): a neighbour still reading or
    writing either would leave the scribble or a wrong block in a later output. Fails on any."""
    world, channels = node.n, max(c.channels for c in cases)

    def work(r):
        got, comm = [], node.comms[r]
        conn = comm.out_conn[(r + 1) % world]
        for case in cases:
            if node.host_call(case.calls[r]):
                return K.describe(node.error(r), case.name)
            lanes = range(0, K.TREES * channels, K.TREES) if case.stride else ()  # each channel's first lane
            for lane in lanes:
                if comm.out_freed[lane][conn] < comm.out_seq[lane][conn]:
                    return f"returned with {comm.out_seq[lane][conn] - comm.out_freed[lane][conn]} messages not known read"
            got.append(case.outputs[r].copy())
            case.outputs[r][:] = case.sends[r][:] = 0xEE
        return got

    results = node.threads(work)
    for r, got in enumerate(results):
        assert not isinstance(got, str), f"rank {r}: {got}"
        wrong = [str(case) for case, out in zip(cases, got) if out.tobytes() != case.expected[r].tobytes()]
        assert not wrong, f"rank {r}: wrong after a neighbour returned: {wrong}"


@needs_compiler
def test_a_kernel_points_buffers_are_shared_and_laid_out_alike():
    """ring_kernel's allocator (the worker hands it to the harness) puts a point's buffers in a
    shared segment, rank q's slot at this rank's + (q - rank)·stride, send and recv at fixed
    places in it: a direct call on both gets the stride, one on private buffers, or a mix, 0 (the
    FIFOs); a freed buffer's addresses lose it; no segment name is left behind."""

    ctx = Context(Alone(), [0, 0])
    alloc = ALGORITHMS["ring_kernel"].allocator(ctx)
    assert ALGORITHMS["ring"].allocator(ctx) is None and alloc is not None
    coll, dt = COLLECTIVES["all_gather"], ALL_DTYPES["float32"]
    counts = coll.counts(1 << 20, dt.itemsize, 2)
    node = ctx.cache[NODE_KEY].node  # built by allocator()
    out, inp, private = (Buffers(ctx.comm, coll, counts, dt, False, alloc), Buffers(ctx.comm, coll, counts, dt, True, alloc),
                         Buffers(ctx.comm, coll, counts, dt, False))
    assert counts.in_count % 1024 == 0  # so recv starts right after send: one allocation of both
    stride = kernel_host.buffer_stride((counts.in_count + counts.out_count) * 4, 2)
    assert node.stride_of(K.address(out.send), K.address(out.recv)) == stride
    assert stride % 4096 == 2048 and node.stride_of(K.address(inp.send), K.address(inp.recv)) > 0
    assert node.stride_of(K.address(private.send), K.address(private.recv)) == 0
    assert node.stride_of(K.address(out.send), K.address(private.recv)) == 0
    assert not kt.segments_of([os.getpid()])
    where = K.address(out.send), K.address(out.recv)
    del out
    assert node.stride_of(*where) == 0


@needs_compiler
def test_a_kernel_point_without_room_in_dev_shm_keeps_the_communicators_buffers(monkeypatch):
    """A /dev/shm too small for a point's buffers: posix_fallocate fails at allocation (not a
    SIGBUS at the first write), the point gets the communicator's buffers, the run one note, and
    its all-gather takes the FIFOs."""

    ctx = Context(Alone(), [0, 0])
    alloc = ALGORITHMS["ring_kernel"].allocator(ctx)  # the regions: room enough

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(kernel_host.os, "posix_fallocate", full)
    coll = COLLECTIVES["all_gather"]
    counts = coll.counts(1 << 20, 4, 2)
    bufs = Buffers(ctx.comm, coll, counts, ALL_DTYPES["float32"], False, alloc)
    assert isinstance(bufs.send.base, np.ndarray) and bufs.send.base.flags.owndata  # the communicator's
    assert ctx.cache[NODE_KEY].node.stride_of(K.address(bufs.send), K.address(bufs.recv)) == 0
    assert len(ctx.notes) == 1 and "/dev/shm has no room for" in ctx.notes[0] and "through the FIFOs" in ctx.notes[0]
    assert not kt.segments_of([os.getpid()])


def test_the_host_build_streams_in_32_byte_stores_only_where_the_cpu_has_avx2(monkeypatch):
    """-mavx2 joins the host build's flags (and so its cache key) where /proc/cpuinfo lists avx2, and
    only there: a build cache shared with an older CPU keeps a build for each."""
    monkeypatch.setattr(kernel_host, "cpu_flags", lambda: frozenset({"sse2", "avx", "avx2"}))
    assert kernel_host.host_flags() == kernel_host.HOST_FLAGS + ("-mavx2",)
    monkeypatch.setattr(kernel_host, "cpu_flags", lambda: frozenset({"sse2", "avx"}))
    assert kernel_host.host_flags() == kernel_host.HOST_FLAGS
    monkeypatch.undo()
    if os.path.exists("/proc/cpuinfo") and os.uname().machine == "x86_64":
        assert "sse2" in kernel_host.cpu_flags()  # every x86-64 CPU has it: the parse reads the real flags


@needs_compiler
@pytest.mark.parametrize("flags", [{"sse2"}, {"sse2", "avx2"}], ids=["no-avx2", "avx2"])
def test_the_kernels_build_and_load_with_and_without_avx2(monkeypatch, flags):
    """Both sides of cb_stream_line (cuda/portable.h) build, load and match the ABI, whatever this machine's
    CPU: the product's own build (kernel_host.host_library) for a CPU with and one without AVX2 (the
    machine's own flags: the build the other tests made, from the cache)."""
    pretend_machine(monkeypatch, cpu_flags=frozenset(flags))
    kernel_host.host_library.cache_clear()
    try:
        lib = kernel_host.host_library()
        assert lib.cb_comm_bytes() == ctypes.sizeof(K.CbComm)
        assert ("-mavx2" in kernel_host.host_flags()) == ("avx2" in flags)
    finally:
        kernel_host.host_library.cache_clear()
