"""ring_kernel and tree_kernel (cuda/collectives.cu, host build; commbench/kernels/abi.py).

* In one process (tests/kernel_threads.py, a thread per rank): every kernel, dtype, op and buffer
  mode at 2, 3, 4 and 8 ranks, bit for bit against numpy; 10,000 back-to-back calls; a wait
  that times out.
* The host's half and bfloat16 conversions (cuda/portable.h): tests/kernels/test_portable_conversions.py.
* The ranks' buffers in reach (direct all-gather and ring all-reduce, the harness' buffers in /dev/shm):
  tests/kernels/test_kernel_host.py.
* Real jobs: tests/algorithms/test_kernel.py.
"""

from __future__ import annotations

import ctypes
import os
import time

import numpy as np
import pytest

import kernel_threads as kt
from commbench.kernels import node as kernel_node
from commbench.kernels import abi as K
from kernel_threads import DTYPES, KINDS, OPS, SLOT, Alone, Case, Node, needs_compiler, run_cases



# --- 1. bit-exact results, in one process ---------------------------------------------------------------


def _sizes(n: int, dtype: str, channels: int, slot: int = SLOT) -> list[int]:
    chunk = slot // kt.storage(dtype).itemsize
    small = 100 // kt.storage(dtype).itemsize  # a tree's 1-channel slice in two small messages (CB_INLINE_BYTES)
    return [1, 7, small, chunk + 3, 2 * n * chunk * channels + 5]  # the last divides by none of n, chunk, channels


@needs_compiler
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_bit_exact_against_numpy(world, kind):
    """Every dtype x op x in place / out of place x size x channels (1 and 3), each rank's output
    byte for byte the numpy reduction; ranks run every case back to back on one set of regions."""
    node = Node(world, channels=3, slot_bytes=SLOT)
    rng = np.random.default_rng([world, list(KINDS).index(kind)])
    ops = [None] if kind.endswith("all_gather") else OPS
    done = 0
    for dtype in DTYPES:
        cases = [Case(node, kind, dtype, op, count, channels, in_place, rng)
                 for op in ops for in_place in (False, True) for channels in (1, 3)
                 for count in _sizes(world, dtype, channels)]
        wrong = run_cases(node, cases)
        assert not wrong, "\n".join(wrong[:20])
        done += len(cases)
    assert done == len(DTYPES) * len(ops) * 2 * 2 * 5


@needs_compiler
@pytest.mark.parametrize("dtype", DTYPES)
def test_bit_exact_with_the_products_slots(dtype):
    """The product's 64 KiB slots, whose transfers take the host's streaming-store path
    (cuda/portable.h, CB_STREAM_BYTES): a chunk and a line's remainder past it, and a count past
    ranks x chunk x channels (3 x 16384 x 3 floats)."""
    node = Node(3, channels=3)
    rng = np.random.default_rng(7)
    cases = [Case(node, kind, dtype, None if kind.endswith("all_gather") else op, count, channels, in_place, rng)
             for kind in KINDS for op in ("sum", "max") for in_place in (False, True) for channels in (1, 3)
             for count in _sizes(3, dtype, channels, K.SLOT_BYTES["cpu"])[-2:]]
    wrong = run_cases(node, cases)
    assert not wrong, "\n".join(wrong[:20])


@needs_compiler
@pytest.mark.parametrize("nslots", [2, 3])
@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_bit_exact_with_tight_fifos(world, nslots):
    """FIFOs of 2 or 3 slots instead of 8 (CbComm.nslots; the tree's broadcast then lags its
    reduction by one chunk): the waits for a free slot bind on every connection, so a sender one
    slot too far ahead overwrites a message not yet read. (One slot deadlocks by design: a
    transfer holds its input slot while it waits for an output slot.)"""
    node = Node(world, channels=3, slot_bytes=SLOT)
    for comm in node.comms:
        comm.nslots = nslots
    rng = np.random.default_rng([world, nslots])
    cases = [Case(node, kind, dtype, None if kind.endswith("all_gather") else op, count, channels, in_place, rng)
             for kind in KINDS for dtype in ("float32", "float16", "int8") for op in ("sum", "max")
             for in_place in (False, True) for channels in (1, 3) for count in (7, 25, 1000, 5001)
             if op == "sum" or not kind.endswith("all_gather")]
    wrong = run_cases(node, cases)
    assert not wrong, "\n".join(wrong[:20])


@needs_compiler
def test_a_wrong_result_is_seen():
    """The check itself: a case whose output is spoiled after the calls is reported."""
    node = Node(2, channels=1, slot_bytes=SLOT)
    case = Case(node, "ring_all_reduce", "float16", "sum", 33, 1, False, np.random.default_rng(1))
    assert run_cases(node, [case]) == []
    case.outputs[1].view(np.uint8)[-1] ^= 1
    assert len(case.wrong()) == 1 and "rank 1 differs at 1 elements, first [32]" in case.wrong()[0]


@needs_compiler
@pytest.mark.parametrize("world", [2, 3])
def test_one_shot_at_its_limits_while_a_rank_lags(world):
    """Messages of one line and one element more, of exactly a one-shot message (CB_ONESHOT_BYTES) and one
    element more (the ring's schedule then), 1- to 8-byte elements, every one-shot collective, back to back
    on one set of regions; rank 0 sleeps before each call, so its peers run ahead as far as they can (one
    that started call c+2 while rank 0 still read call c's message would overwrite it): all exact."""
    node = Node(world, channels=1, slot_bytes=SLOT)
    rng = np.random.default_rng(world)
    cases = []
    for kind in ("oneshot_all_reduce", "oneshot_reduce_scatter", "oneshot_all_gather"):
        for dtype in ("int8", "float16", "float32", "float64"):
            size = kt.storage(dtype).itemsize
            for nbytes in (56, 56 + size, K.ONESHOT_BYTES, K.ONESHOT_BYTES + size):
                cases.append(Case(node, kind, dtype, None if kind.endswith("all_gather") else "sum", nbytes // size, 1,
                                  bool(len(cases) % 2), rng))

    def work(r):
        for i, case in enumerate(cases):
            if r == 0:
                time.sleep(0.002)
            code = node.host_call(case.calls[r])
            if code:
                return f"{case}: rank {r} returned {code}: {K.describe(node.error(r), case.name)}"
        return None
    assert node.threads(work) == [None] * world
    wrong = [w for c in cases for w in c.wrong()]
    assert not wrong, "\n".join(wrong[:20])
    assert all(comm.oneshot_calls == 3 * 4 * 3 for comm in node.comms)  # all but the largest went one-shot


# --- 3. many back-to-back calls ----------------------------------------------------------------------------
@needs_compiler
def test_ten_thousand_calls_back_to_back():
    """10,000 calls of varying kernel, op, size, channels and buffer mode (one seeded sequence on
    every rank), no barrier between them; every result checked by its rank right after its call."""
    n, calls, max_count = 4, 10_000, 3000
    node = Node(n, channels=3, slot_bytes=512)
    rng = np.random.default_rng(16)
    kinds = list(KINDS)
    plan = list(zip(rng.integers(0, len(kinds), calls), rng.integers(0, 2, calls),
                    np.exp(rng.uniform(0, np.log(max_count), calls)).astype(int).clip(1, max_count),
                    rng.integers(1, 4, calls), rng.integers(0, 2, calls)))
    sends = [rng.integers(-8, 9, n * max_count).astype(np.float32) for _ in range(n)]
    totals = {"sum": np.add.reduce(sends), "max": np.maximum.reduce(sends)}
    gathered = lambda c: np.concatenate([s[:c] for s in sends])  # noqa: E731
    lib = node.lib
    entries = {(k, op): node.entry_address(K.entry(*KINDS[k], "float32", op)) for k in kinds for op in ("sum", "max")}

    def rank(r):
        buf = np.empty(n * max_count, np.float32)
        call = K.CbCall(0, ctypes.pointer(node.comms[r]), 0, 0, 0, 1)
        wrong = []
        for i, (k, o, count, channels, in_place) in enumerate(plan):
            kind, op = kinds[k], ("sum", "max")[o]
            coll = KINDS[kind][1]
            buf[:] = np.nan
            if coll == "all_reduce":
                src, dst, want = sends[r][:count], buf[:count], totals[op][:count]
                if in_place:
                    buf[:count] = src
                    src = dst
                out = dst
            elif coll == "reduce_scatter":
                src, dst, want = sends[r][:n * count], buf[:count], totals[op][r * count:(r + 1) * count]
                out = dst
                if in_place:
                    buf[:n * count] = src
                    src, dst, out = buf, buf[r * count:], buf[r * count:(r + 1) * count]
            else:
                src, dst, want, out = sends[r][:count], buf, gathered(count), buf[:n * count]
                if in_place:
                    buf[r * count:(r + 1) * count] = src
                    src = buf[r * count:]
            call.entry = entries[kind, "sum" if coll == "all_gather" else op]
            call.send, call.recv, call.channels = src.ctypes.data, dst.ctypes.data, int(channels)
            call.count = int(count) * 4 if coll == "all_gather" else int(count)
            code = lib.cb_host_call(ctypes.byref(call))
            if code:
                return i, K.describe(node.error(r), kind), wrong
            if not np.array_equal(out.view(np.int32), want.view(np.int32)):
                wrong.append(i)
        return calls, None, wrong

    start = time.monotonic()
    results = node.threads(rank, join_s=300)
    elapsed = time.monotonic() - start
    for r, (done, fault, wrong) in enumerate(results):
        assert fault is None, f"rank {r}, call {done}: {fault}"
        assert done == calls and wrong == [], f"rank {r}: wrong results in calls {wrong[:10]} ({len(wrong)})"
    print(f"{calls} calls on {n} ranks in {elapsed:.1f} s")


# --- 4. a wait that fails ------------------------------------------------------------------------------------
@needs_compiler
@pytest.mark.parametrize("small", [False, True])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_rank_alone_times_out_and_says_who_it_waited_for(kind, small):
    """Rank 1 of 3 calls, the others never do: the call returns within the timeout and the error
    words name rank 1, the step and a peer it waits for (ring: its left neighbour). Small: every
    message travels with its number (CB_INLINE_BYTES; the tree's 100 bytes in two halves)."""
    node = Node(3, channels=1, slot_bytes=SLOT, timeout_s=0.2)
    count = (25 if kind.startswith("tree") else 12) if small else 1000
    case = Case(node, kind, "float32", None if kind.endswith("all_gather") else "sum", count, 1, False,
                np.random.default_rng(3))
    start = time.monotonic()
    [code] = node.threads(lambda r: node.host_call(case.calls[r]), ranks=[1])
    elapsed = time.monotonic() - start
    assert code == 1
    assert 0.2 <= elapsed < 5
    err = node.error(1)
    code, rank, channel, step, peer, waited = err
    message = K.describe(err, kind)
    assert (rank, channel) == (1, 0) and waited in (0, 1)
    assert message.startswith(f"{kind}: rank 1 timed out at step {step} of channel 0 waiting for ")
    assert message.endswith("(code 1)") and f"rank {peer}" in message
    if kind.startswith("oneshot") and small:  # step 0 sends to both and waits for rank 0 (whose message comes first)
        assert (step, peer, waited) == (0, 0, 0)
    elif not kind.startswith("tree"):  # (the ring, and the one-shot kinds past a one-shot message, which run it)
        # step 0 sends (a free slot is there); step 1 receives from the left
        assert (step, peer, waited) == (1, 0, 0)
        assert message == f"{kind}: rank 1 timed out at step 1 of channel 0 waiting for rank 0's data (code 1)"
    else:  # rank 1 is a leaf of tree 0 and the root of tree 1: going up it takes the deeper tree
        (parent0, children0), (parent1, children1) = K.trees(3)  # first, sends chunk 0 of its half up
        assert children0[1] == [] and parent1[1] is None  # (step 0), then waits for its child in tree 1
        assert (step, peer, waited) == (1, children1[1][0], 0)
    assert node.error(0)[0] == node.error(2)[0] == 0  # nobody else called


@needs_compiler
@pytest.mark.parametrize("freed", [0, K.SLOTS])
def test_a_sender_reads_the_head_flag_only_past_the_slots_it_knows_free(freed):
    """Rank 0 of 2 alone, its FIFO to rank 1 as if SLOTS messages had gone out: with no head
    known (out_freed 0) step 0 must wait for a free slot, and the head flag (0: rank 1 never read
    anything) keeps it waiting; with all SLOTS known freed (out_freed = SLOTS, as after an
    earlier read) it writes without reading the flag and waits at step 1 for rank 1's data."""
    node = Node(2, channels=1, slot_bytes=SLOT, timeout_s=0.2)
    conn = node.comms[0].out_conn[1]
    node.comms[0].out_seq[0][conn] = K.SLOTS
    node.comms[0].out_freed[0][conn] = freed
    case = Case(node, "ring_all_gather", "float32", None, 100, 1, False, np.random.default_rng(5))
    [code] = node.threads(lambda r: node.host_call(case.calls[r]), ranks=[0])
    assert code == 1
    _, rank, channel, step, peer, waited = node.error(0)
    assert (rank, channel, peer) == (0, 0, 1)
    assert (step, waited) == ((0, 1) if freed == 0 else (1, 0))  # 1: a free slot, 0: data


@needs_compiler
def test_a_small_message_waits_for_its_number_not_for_data_left_in_its_slot():
    """A message of at most CB_INLINE_BYTES travels in its slot's own line, its number in the
    line's last word, and leaves the tail flag alone. Here each slot's last message was a full
    one of int64 -1 or -2 (2^64 - 2 read as a number), and rank 1 comes to the small call 0.3 s
    late: rank 0 must wait for it, not take what was left in its slots for rank 1's messages (it
    did, ending at once with -2s, when the small message's number lay in the large one's data)."""
    node = Node(2, channels=1, slot_bytes=SLOT)
    for comm in node.comms:
        comm.nslots = 2  # the large call fills both slots each way; the small one reuses them
    name = K.entry("ring", "all_reduce", "int64", "sum")
    full = 2 * SLOT // 8  # two blocks of one slot each: one message each way per step (8-byte blocks after)
    sends = [np.full(full, -1, np.int64) for _ in range(2)] + [np.array([1, 2]), np.array([10, 20])]
    outs = [np.zeros(full, np.int64) for _ in range(2)] + [np.zeros(2, np.int64) for _ in range(2)]
    calls = [[node.call(r, name, sends[r], outs[r], full, 1), node.call(r, name, sends[2 + r], outs[2 + r], 2, 1)]
             for r in range(2)]

    def work(r):
        first = node.host_call(calls[r][0])
        if r == 1:
            time.sleep(0.3)
        return first, node.host_call(calls[r][1])

    assert node.threads(work) == [(0, 0), (0, 0)]
    assert all((out == -2).all() for out in outs[:2])
    assert [out.tolist() for out in outs[2:]] == [[11, 22], [11, 22]]
    conn = node.comms[0].in_conn[1]  # the small call's two messages from rank 1 left its tail flag at 2
    assert node.comms[0].in_seq[0][conn] == 4
    assert ctypes.c_uint64.from_address(node.comms[0].region[0] + conn * K.LINE).value == 2
    with pytest.raises(ValueError, match="whole 64-byte lines"):  # a slot whose first line is not whole
        K.comm_struct(0, 2, 1, 1.0, [0, 0], 0, SLOT + 8, 1e-6)


@needs_compiler
@pytest.mark.parametrize("bound,split_128", [(None, False), ("128", True)])
def test_a_tree_splits_a_slice_of_two_small_messages(bound, split_128, monkeypatch):
    """A tree all-reduce's channel slice goes in two halves, one per tree and lane, from
    K.TREE_SPLIT_BYTES (256; COMMBENCH_KERNEL_TREE_SPLIT_BYTES sets it: 128 here) or where each half is a
    small message (64-112 bytes); in between one tree, lane ch % 2, takes it whole."""
    if bound:
        monkeypatch.setenv("COMMBENCH_KERNEL_TREE_SPLIT_BYTES", bound)
    for count, lanes in ((25, [True, True]), (32, [True, split_128]), (64, [True, True])):  # 100, 128, 256 B
        node = Node(2, channels=1, slot_bytes=SLOT)
        case = Case(node, "tree_all_reduce", "float32", "sum", count, 1, False, np.random.default_rng(count))
        assert run_cases(node, [case]) == []
        sent = [any(comm.out_seq[lane][c] for comm in node.comms for c in range(K.MAX_CONNS)) for lane in (0, 1)]
        assert sent == lanes, count


@needs_compiler
def test_kernel_fault_names_rank_step_and_peer():
    """The product's path: NodeKernels on a /dev/shm segment; rank 0 of 2 alone raises KernelFault."""
    node = kernel_node.NodeKernels(Alone(), "cpu", 0.2, 1)
    assert not kt.segments_of([os.getpid()])  # mapped and unlinked at once
    x = np.arange(100, dtype=np.float64)
    run = node.bind(K.entry("ring", "all_reduce", "float64", "sum"), "float64", x, x, 100, 1)
    with pytest.raises(K.KernelFault) as fault:
        run()
    assert str(fault.value) == "ring_all_reduce: rank 0 timed out at step 1 of channel 0 waiting for rank 1's data (code 1)"
    node.close()
    words = [1, 3, 2, 17, 5, 1]
    assert K.describe(words, "tree_all_reduce") == ("tree_all_reduce: rank 3 timed out at step 17 of channel 2 "
                                                    "waiting for a free slot at rank 5 (code 1)")
    assert K.describe([1, 0, 0, 2, 1, 2], "ring_all_gather") == (  # a direct all-gather's last wait
        "ring_all_gather: rank 0 timed out at step 2 of channel 0 waiting for rank 1 to read this rank's output (code 1)")
    assert K.describe([1, 1, 0, 0, 0, 3], "ring_all_gather") == (  # a pushed all-gather's first wait
        "ring_all_gather: rank 1 timed out at step 0 of channel 0 waiting for rank 0 to start the call (code 1)")


def test_the_sources_dtype_codes_and_entries_are_dtypes_py_s():
    """collectives.cu compiles one dtype's entries per CB_DTYPE code (NVRTC: one module per dtype); the codes
    kernels/gpu.py passes, the entries reduce.cu defines and the dtypes commbench sweeps are one list."""
    import re

    from commbench.dtypes import DTYPES
    from commbench.kernels.gpu import DTYPE_CODES
    from commbench.kernels.reducers import CUDA_DTYPES
    from commbench.sources import CUDA_DIR

    text = (CUDA_DIR / "collectives.cu").read_text()
    in_source = {name: int(code) for code, name in
                 re.findall(r"CB_DTYPE == (\d+)\s*\n\s*CB_ENTRIES\((\w+),", text)}
    assert in_source == DTYPE_CODES and list(DTYPE_CODES) == list(DTYPES) == list(CUDA_DTYPES)
