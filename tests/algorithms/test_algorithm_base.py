"""What every algorithm shares (commbench/algorithms/base.py): block bounds, ring orders,
segments, the stage pipeline, scratch buffers, and the Algorithm base class: the collectives it
runs, its refusals, its allocator and its binding through the collective."""

import threading

import numpy as np
import pytest
from nccl_semantics import World

from commbench.algorithms import Context
from commbench.algorithms.base import (
    MAX_SEGMENTS,
    Algorithm,
    bounds,
    pipeline,
    reduce_op,
    ring_order,
    scratch_pair,
    segments,
    wait_all,
)
from commbench.collectives import COLLECTIVES


def _comm(size=1, rank=0):
    return World(size).comm(rank)


# --- bounds, reduce_op, ring order ------------------------------------------------------------------
@pytest.mark.parametrize("parts", [1, 2, 3, 5, 8])
def test_bounds_are_nearly_equal_blocks_covering_the_count(parts):
    for count in range(3 * parts + 2):
        b = bounds(count, parts)
        sizes = np.diff(b)
        assert len(b) == parts + 1 and b[0] == 0 and b[-1] == count
        assert (sizes >= 0).all() and sizes.max() - sizes.min() <= 1


def test_bounds_by_hand():
    assert bounds(7, 3) == [0, 2, 4, 7]
    assert bounds(2, 4) == [0, 0, 1, 1, 2]


def test_reduce_op_turns_avg_into_sum_only():
    assert [reduce_op(o) for o in ("sum", "avg", "prod", "min", "max")] == ["sum", "sum", "prod", "min", "max"]


def test_ring_orders():
    nodes = [1, 0, 1, 0, 2]
    assert ring_order(nodes) == [0, 1, 2, 3, 4]
    assert ring_order(nodes, "topology") == [1, 3, 0, 2, 4]  # node by node, rank order inside
    ctx = Context(_comm(5), nodes)
    assert ctx.ring("topology") == [1, 3, 0, 2, 4] and ctx.ring() == [0, 1, 2, 3, 4]


# --- segments -----------------------------------------------------------------------------------------
def test_a_short_view_is_its_own_segment():
    comm, v = _comm(), np.arange(5)
    views = [v]
    assert segments(comm, views, 5) is views
    assert segments(comm, [v[:0]], 4) == []


def test_segments_cut_in_order_and_share_memory():
    comm = _comm()
    a, b = np.arange(10), np.arange(10, 13)
    pieces = segments(comm, [a, b], 4)
    assert [p.tolist() for p in pieces] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9], [10, 11, 12]]
    pieces[1][0] = -1
    assert a[4] == -1  # a view, not a copy


def test_segments_are_at_most_max_segments_per_view():
    comm, n = _comm(), 3 * MAX_SEGMENTS + 1
    pieces = segments(comm, [np.zeros(n)], 1)
    assert len(pieces) <= MAX_SEGMENTS
    assert {len(p) for p in pieces[:-1]} == {4} and sum(len(p) for p in pieces) == n  # ⌈n / 4096⌉ = 4 each


# --- pipeline -----------------------------------------------------------------------------------------
class _ThreadComm:
    def __init__(self):
        self.entered = []

    def enter_thread(self):
        self.entered.append(threading.current_thread())


def _ctx():
    return Context(_ThreadComm(), [0])


def _recording(seen, lock):
    def stage(s):
        def run(item):
            with lock:
                seen.append((s, item, threading.current_thread()))
        return run
    return stage


def test_pipeline_runs_every_item_through_the_three_stages_in_order():
    seen, ctx, lock = [], _ctx(), threading.Lock()
    stage = _recording(seen, lock)
    pipeline(stage(0), stage(1), stage(2), ["a", "b", "c", "d"], ctx)
    for s in range(3):
        assert [item for t, item, _ in seen if t == s] == ["a", "b", "c", "d"]
    for item in "abcd":
        assert [t for t, i, _ in seen if i == item] == [0, 1, 2]
    caller = threading.current_thread()
    outer = {th for t, _, th in seen if t != 1}
    across = {th for t, _, th in seen if t == 1}
    assert outer == {caller} and len(across) == 1 and across != outer  # the middle stage alone in a thread
    assert ctx.comm.entered == list(across)  # which entered the device


def test_pipeline_s_thread_is_started_once_per_communicator_not_per_call():
    seen, ctx, lock = [], _ctx(), threading.Lock()
    stage = _recording(seen, lock)
    threads = threading.active_count()
    for call in range(3):
        pipeline(stage(0), stage(1), stage(2), [call, call + 10], ctx)
    across = {th for t, _, th in seen if t == 1}
    assert [i for t, i, _ in seen if t == 2] == [0, 10, 1, 11, 2, 12]
    assert len(across) == 1 and len(ctx.comm.entered) == 1 and threading.active_count() == threads + 1
    other = _ctx()
    pipeline(stage(0), stage(1), stage(2), ["x"], other)
    assert {th for t, i, th in seen if t == 1 and i == "x"} != across  # another communicator: its own thread


def test_pipeline_s_calling_thread_prepares_the_next_item_before_it_finishes_the_last():
    """In the calling thread: before(k+1), then after(k) (the next item is ready to cross as soon as
    this one has), and every after once its item has crossed."""
    seen, lock = [], threading.Lock()
    stage = _recording(seen, lock)
    pipeline(stage("before"), stage("across"), stage("after"), [0, 1, 2], _ctx())
    outer = [(s, item) for s, item, _ in seen if s != "across"]
    assert outer == [("before", 0), ("before", 1), ("after", 0), ("before", 2), ("after", 1), ("after", 2)]
    at = {(s, item): i for i, (s, item, _) in enumerate(seen)}
    assert all(at[("across", k)] < at[("after", k)] for k in range(3))


def test_pipeline_overlaps_the_crossing_with_the_other_stages():
    """across of item 0 waits until before has done item 1: only an overlapping pipeline finishes."""
    second_ready = threading.Event()

    def before(item):
        if item == 1:
            second_ready.set()

    def across(item):
        if item == 0:
            assert second_ready.wait(10), "before did not go on while across worked"

    done = []
    pipeline(before, across, done.append, [0, 1, 2], _ctx())
    assert done == [0, 1, 2]


def test_pipeline_reraises_the_crossing_s_error_and_stops():
    done, befores = [], []

    def across(item):
        if item == 1:
            raise ValueError("across broke on item 1")

    ctx = _ctx()
    with pytest.raises(ValueError, match="item 1"):
        pipeline(befores.append, across, done.append, [0, 1, 2, 3], ctx)
    assert done == [0] and befores == [0, 1, 2]  # nothing after item 1's crossing failed
    done.clear()
    pipeline(befores.append, lambda item: None, done.append, [4, 5], ctx)  # the next call: every item, in order
    assert done == [4, 5]


def test_pipeline_reraises_an_outer_stage_s_error_once_its_queued_items_are_answered():
    crossed, ctx = [], _ctx()

    def before(item):
        if item == 2:
            raise ValueError("before broke on item 2")

    with pytest.raises(ValueError, match="item 2"):
        pipeline(before, crossed.append, lambda item: None, [0, 1, 2, 3], ctx)
    assert crossed == [0, 1]  # item 1, queued before the error, answered before the call ended
    pipeline(lambda item: None, crossed.append, lambda item: None, [7], ctx)
    assert crossed == [0, 1, 7]


def test_pipeline_s_thread_that_cannot_enter_the_device_fails_every_call_in_the_caller():
    class NoDevice(_ThreadComm):
        def enter_thread(self):
            raise RuntimeError("no such device")

    ctx = Context(NoDevice(), [0])
    for _ in range(2):
        with pytest.raises(RuntimeError, match="no such device"):
            pipeline(lambda item: None, lambda item: None, lambda item: None, [0, 1, 2], ctx)


# --- scratch and requests ------------------------------------------------------------------------------
def test_scratch_pair_is_allocated_once_and_regrown():
    ctx = Context(_comm(), [0])
    like = np.zeros(3, dtype=np.float32)
    a = scratch_pair(ctx, "k", 8, like)
    assert len(a) == 2 and a[0] is not a[1] and all(len(x) == 8 and x.dtype == np.float32 for x in a)
    assert not np.shares_memory(a[0], a[1]) and not a[0].any()
    assert scratch_pair(ctx, "k", 5, like) is a  # smaller: the same buffers
    b = scratch_pair(ctx, "k", 9, like)
    assert b is not a and len(b[0]) == 9
    assert scratch_pair(ctx, "other", 9, like) is not b  # its own key
    c = scratch_pair(ctx, "k", 9, np.zeros(1, dtype=np.int64))
    assert c[0].dtype == np.int64 and scratch_pair(ctx, "k", 9, like) is b  # per dtype
    assert len(scratch_pair(ctx, "empty", 0, like)[0]) == 1


def test_wait_all_waits_every_request_and_empties_the_list():
    waited = []

    class Req:
        def __init__(self, i):
            self.i = i

        def wait(self):
            waited.append(self.i)

    requests = [Req(i) for i in range(3)]
    wait_all(requests)
    assert waited == [0, 1, 2] and requests == []


# --- Algorithm ------------------------------------------------------------------------------------------
class Doubler(Algorithm):
    """A toy: all-reduce of one rank, which adds the buffer to itself (sum) in place."""

    name = "doubler"

    def all_reduce(self, ctx, buf, op):
        ctx.reducer.reduce(buf, buf.copy(), op)


class Prepared:
    def __init__(self):
        self.prepared = 0

    def prepare(self):
        self.prepared += 1

    def copy(self, dst, src):
        dst[...] = src

    def reduce(self, dst, src, op, other=None):
        np.add(dst, src, out=dst)


def test_collectives_follow_the_registry_and_the_methods():
    assert Algorithm().collectives == ()
    assert Doubler().collectives == ("all_reduce",)

    class Both(Algorithm):
        def reduce_scatter(self, ctx, buf, op, block):
            pass

        def all_reduce(self, ctx, buf, op):
            pass

    assert Both().collectives == tuple(c for c in COLLECTIVES if c in ("all_reduce", "reduce_scatter"))


def test_no_cost_model_unless_cost_is_defined():
    assert not Doubler().modelled
    with pytest.raises(NotImplementedError, match="doubler has no cost model"):
        Doubler().cost(None, None, "all_reduce", 1, 1)
    with pytest.raises(NotImplementedError):
        Doubler().messages("all_reduce", 1, [0])


def test_unsupported_reasons():
    ctx = Context(_comm(), [0])
    assert Doubler().unsupported(ctx, "all_gather") == "doubler has no all-gather (it runs all-reduce)"
    assert Doubler().unsupported(ctx, "all_reduce") is None
    comm = _comm()
    comm.carries_device_buffers, comm.backend, comm.device = False, "gloo", "cuda"
    ctx = Context(comm, [0])
    assert Doubler().unsupported(ctx, "all_reduce") == (
        "gloo cannot send cuda buffers point to point; the peer algorithms need no sends")

    class Silent(Doubler):
        sends_messages = False

    assert Silent().unsupported(ctx, "all_reduce") is None


def test_bind_prepares_the_reducer_and_binds_through_the_collective():
    comm = _comm()
    comm.reducer = Prepared()
    ctx = Context(comm, [0])
    assert Doubler().allocator(ctx) is None
    send, recv = np.array([1.0, 2.0]), np.zeros(2)
    fn, out = Doubler().bind(ctx, "all_reduce", send, recv, "sum", False, 2, 2)
    assert comm.reducer.prepared == 1 and out is recv
    fn()
    assert recv.tolist() == [2.0, 4.0] and send.tolist() == [1.0, 2.0]  # copied, then doubled in recv


def test_context_defaults():
    ctx = Context(_comm(), [0])
    assert ctx.segment_elems == 1 << 18 and ctx.channels is None and ctx.arena is None
    assert ctx.cache == {} and ctx.notes == [] and ctx.reducer is ctx.comm.reducer
    assert Context(_comm(), [0]).cache is not ctx.cache  # a cache of its own per context
