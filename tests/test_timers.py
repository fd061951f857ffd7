"""Which loop times a point (commbench.timers.loop_for, harness.agree, harness.graph_loop):
the call's own C loop unless --timer python, the same kind of loop on every rank, and a CUDA
graph replayed only where every rank captured it. On tests/harness_fakes.py's thread ranks."""

import numpy as np
import pytest

from commbench.dtypes import DTYPES
from commbench.rank import harness
from commbench.collectives import COLLECTIVES
from commbench.rank.harness import measure
from commbench.timers import Loop
from harness_fakes import RANK, FakeWorld, measure_ranks


def test_the_call_s_own_loop_times_it_unless_timer_python():
    own = Loop("native", lambda fn, samples, batch: np.full(samples, 7e-6))
    coll, dt = COLLECTIVES["all_reduce"], DTYPES["float32"]

    def rank(comm, timer):
        def bind(send, recv):
            fn, out = comm.bind("all_reduce", send, recv, "sum", False)
            fn.timer = own
            return fn, out
        return measure(comm, coll, coll.counts(64, 4, 2), dt, "sum", False, 1, 4, 0.01, 1, 100, bind=bind, timer=timer)

    native = FakeWorld(2).run(lambda comm: rank(comm, "auto"))[0]
    assert native.timer == "native" and set(native.samples_s) == {7e-6}
    python = FakeWorld(2).run(lambda comm: rank(comm, "python"))[0]
    assert python.timer == "python" and 7e-6 not in set(python.samples_s)


class _GraphLoops:
    """Stand-ins for the CUDA loops (no GPU here): capture refuses on the ranks in `refuse`, as
    torch does when a call cannot be captured. Every step is logged per rank, in order, so a test
    can check that no rank replays unless every rank captured (a replayed NCCL collective would
    wait for a rank that is elsewhere)."""

    def __init__(self, refuse=()):
        self.refuse, self.log = set(refuse), []

    def events(self, fn, samples, batch=1):
        for _ in range(samples * batch):
            fn()
        self.log.append((RANK.value, "events", samples * batch))
        return np.full(samples, 2e-6)

    def capture(self, fn, batch):
        self.log.append((RANK.value, "capture", batch))
        if RANK.value in self.refuse:
            raise harness.GraphUnavailable("RuntimeError: operation not permitted when stream is capturing")
        return ("graph", batch)

    def replay(self, graph, samples, batch, delay_s=0.0):
        assert graph == ("graph", batch)
        self.log.append((RANK.value, "replay", samples))
        return np.full(samples, 1e-6)


@pytest.mark.parametrize("refuse", [(), (1,), (0, 1)])
def test_a_graph_is_captured_after_eager_calls_and_replayed_only_where_every_rank_captured(monkeypatch, refuse):
    loops = _GraphLoops(refuse)
    monkeypatch.setattr(harness, "CUDA_EVENTS", Loop("cuda-events", loops.events))
    monkeypatch.setattr(harness, "capture_graph", loops.capture)
    monkeypatch.setattr(harness, "replay_graph", loops.replay)
    monkeypatch.setattr(harness, "loop_for", lambda fn, device, choice="auto", graph_on=False: harness.CUDA_GRAPH)
    ms = measure_ranks(2, iters=8, batch=4, warmup=3, graph=True)
    for rank, m in enumerate(ms):
        mine = [step for r, *step in loops.log if r == rank]
        assert mine[:2] == [["events", 3], ["capture", 4]]  # eager warm-up first, then one capture of one batch
        assert m.warmup == 3 and m.batch == 4 and len(m.samples_s) == 2
        if refuse:
            assert ["replay", 2] not in mine  # no rank replays unless every rank captured
            assert m.timer == "cuda-events" and set(m.samples_s) == {2e-6} and mine[2] == ["events", 8]
            why = "RuntimeError: operation not permitted when stream is capturing" if rank in refuse else "on another rank"
            assert m.notes == (f"torch could not capture the call in a CUDA graph ({why}): timed with CUDA events",)
        else:
            assert m.timer == "cuda-graph" and set(m.samples_s) == {1e-6} and m.notes == ()
            assert mine[2] == ["replay", 2]


def test_ranks_agree_on_the_loop_when_one_has_only_the_python_loop():
    """Rank 1's C loop did not build (its mpicc differs): both ranks time with the Python loop."""
    own = Loop("native", lambda fn, samples, batch: np.full(samples, 7e-6))
    coll, dt = COLLECTIVES["all_reduce"], DTYPES["float32"]

    def rank(comm):
        def bind(send, recv):
            fn, out = comm.bind("all_reduce", send, recv, "sum", False)
            fn.timer = own if comm.rank == 0 else None
            return fn, out
        return measure(comm, coll, coll.counts(64, 4, 2), dt, "sum", False, 1, 4, 0.01, 1, 100, bind=bind)

    for m in FakeWorld(2).run(rank):
        assert m.timer == "python" and 7e-6 not in set(m.samples_s)
    assert FakeWorld(2).run(rank)[0].notes == ("another rank cannot time with the native loop: every rank uses the "
                                               "python loop",)


class _FakeCapture:
    """torch.cuda's capture API as a CPU build lacks it: a capture whose calls queue nothing warns at its end
    as torch does (CUDAGraph.capture_end: "The CUDA Graph is empty..."), and any other warning passes."""

    def __init__(self, queued):
        self.queued = queued

    def graph(self, g):
        import contextlib
        import warnings

        @contextlib.contextmanager
        def capture():
            yield
            if not self.queued:
                warnings.warn("The CUDA Graph is empty. This usually means that the graph was attempted to be "
                              "captured on wrong device or stream.", UserWarning)
            warnings.warn("some other torch warning", UserWarning)
        return capture()


@pytest.mark.parametrize("queued", [True, False])
def test_an_empty_capture_is_timed_with_cuda_events_not_replayed(monkeypatch, queued):
    import warnings

    import torch
    from commbench import timers

    fake = _FakeCapture(queued)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: "graph")
    monkeypatch.setattr(torch.cuda, "graph", fake.graph)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    calls = []
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        if queued:
            assert timers.capture_graph(lambda: calls.append(1), 3) == "graph"
        else:
            with pytest.raises(timers.GraphUnavailable, match="^the calls queued no GPU work: the graph is empty$"):
                timers.capture_graph(lambda: calls.append(1), 3)
    assert calls == [1, 1, 1]
    assert [str(w.message) for w in said] == ["some other torch warning"]  # the empty-graph one is the note's


def test_a_delay_is_spun_before_each_call_inside_the_batch_and_counted_outside_the_calls():
    import time

    from commbench.timers import PYTHON

    calls = []
    per_call, late = PYTHON.stamped(lambda: calls.append(time.perf_counter()), 4, batch=3, delay_s=0.002)
    assert len(calls) == 12 and len(per_call) == len(late) == 4
    assert (late >= 0.002).all() and (per_call >= late).all()  # the spin is in the batch's time, as a straggler's is
    assert (np.diff(calls) >= 0.002).all()  # before every call, not once a batch
    per_call, late = PYTHON.stamped(lambda: None, 4, 3)
    assert (late == 0).all() and (per_call > 0).all()
    bare = Loop("native", lambda fn, samples, batch: np.full(samples, 7e-6))  # a loop that gives its seconds alone
    assert [list(a) for a in bare.stamped(lambda: None, 2)] == [[7e-6, 7e-6], [0.0, 0.0]]
