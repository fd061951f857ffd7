"""commbench.rank.harness on a fake communicator: ranks are threads (tests/nccl_semantics.py's World)
whose collectives gather every rank's input and compute the answer in numpy; the timer is a fake
that returns chosen seconds per rank, so batch, sample count and the max over ranks are exact."""

import threading
from types import SimpleNamespace

import numpy as np
import pytest

from commbench.dtypes import DTYPES
from commbench.rank import harness
from commbench.rank.collectives import COLLECTIVES
from commbench.rank.harness import Buffers, count_wrong, link_bytes, measure, power_window
from commbench.rank.patterns import Pattern, tile
from commbench.rank.timers import Loop
from nccl_semantics import NcclSemanticsComm, World

_REDUCE = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}


class FakeComm(NcclSemanticsComm):
    """Collectives computed from every rank's input (meeting in allgather_object), as the
    Communicator contract lays out the buffers. The world's `broken`: (rank, element) that rank's
    output is off by one at, or "silent": no output is written."""

    backend = "fake"

    def bind(self, collective, send, recv, op, in_place):
        def run():
            inputs = np.stack(self.allgather_object(send.astype(np.float64)))
            if self.world.broken == "silent":
                return
            if collective == "all_gather":
                result = inputs.reshape(-1)
            else:
                reduced = inputs.sum(axis=0) / self.size if op == "avg" else _REDUCE[op](inputs, axis=0)
                n = len(recv)
                result = reduced if collective == "all_reduce" else reduced[self.rank * n:(self.rank + 1) * n]
            recv[:] = result
            if self.world.broken is not None and self.world.broken[0] == self.rank:
                recv[self.world.broken[1]] += 1
            self.world.calls_made[self.rank] += 1
        return run, recv


class FakeWorld(World):
    """A World of FakeComm (or comm_class) ranks; calls_made: completed collective calls per rank."""

    def __init__(self, size, broken=None, comm_class=FakeComm):
        super().__init__(size)
        self.broken, self.calls_made, self.comm_class = broken, [0] * size, comm_class

    def comm(self, rank):
        RANK.value = rank  # this rank's thread: what the fake timer answers for
        return self.comm_class(self, ("world",), rank, self.size)


RANK = threading.local()


class FakeTimer:
    """Stands in for time_cpu: runs fn samples x batch times; returns probe[rank] for the warm-up
    (a measurement's first call) and loop[rank], cycled to the length asked, for the timed loop."""

    def __init__(self, probe, loop):
        self.probe, self.loop, self.calls = probe, loop, {}

    def __call__(self, fn, samples, batch=1):
        rank = RANK.value
        for _ in range(samples * batch):
            fn()
        self.calls.setdefault(rank, []).append((samples, batch))
        values = self.probe[rank] if len(self.calls[rank]) % 2 == 1 else self.loop[rank]
        return np.resize(np.asarray(values, dtype=float), samples)


def _measure(world, collective="all_reduce", dtype="float32", op="sum", in_place=False, size=4096,
             broken=None, **kw):
    """measure() on every rank of a FakeWorld; the measurements, one per rank."""
    args = dict(warmup=2, iters=5, min_time=0.01, min_iters=1, max_iters=1000) | kw
    coll, dt = COLLECTIVES[collective], DTYPES[dtype]

    def rank(comm):
        counts = coll.counts(size, dt.itemsize, comm.size)
        return measure(comm, coll, counts, dt, op if coll.reduces else None, in_place, **args)

    return FakeWorld(world, broken).run(rank)


@pytest.fixture
def fake_timer(monkeypatch):
    def install(probe, loop):
        timer = FakeTimer(probe, loop)
        monkeypatch.setattr(harness, "loop_for", lambda fn, device, choice="auto", graph=False: Loop("python", timer))
        return timer
    return install


# --- iterations, batch, samples ---------------------------------------------------------------

@pytest.mark.parametrize("iters,batch,probe_s,want_batch,want_samples", [
    (25, None, [1e-6, 10e-6], 10, 3),  # the slowest rank's probe (10 us) sets batch = 100 us / 10 us
    (25, None, [10e-6, 1e-6], 10, 3),
    (10, 4, [1e-6, 1e-6], 4, 3),  # --batch: whole batches, at least the iterations asked
    (10, 50, [1e-6, 1e-6], 10, 1),  # a batch larger than the iterations is cut to them
    (3, None, [1e-3, 1e-3], 1, 3),  # a call over 100 us is timed alone
])
def test_fixed_iterations(fake_timer, iters, batch, probe_s, want_batch, want_samples):
    timer = fake_timer([[p] for p in probe_s], [[1e-6]] * 2)
    ms = _measure(2, iters=iters, batch=batch)
    for m in ms:
        assert (m.batch, len(m.samples_s), m.iterations) == (want_batch, want_samples, want_batch * want_samples)
    assert timer.calls[0] == timer.calls[1] == [(2, 1), (want_samples, want_batch)]  # warm-up, then the loop


def test_adaptive_iterations_fill_min_time(fake_timer):
    """10 us a call, 2 ms wanted: 200 iterations in batches of 10."""
    fake_timer([[10e-6], [5e-6]], [[1e-6]] * 2)
    m = _measure(2, iters=None, min_time=2e-3, min_iters=5, max_iters=10_000)[0]
    assert (m.batch, len(m.samples_s)) == (10, 20)


def test_adaptive_iterations_keep_min_iters_samples(fake_timer):
    """Batching never leaves fewer than --min-iters samples."""
    fake_timer([[10e-6]], [[1e-6]])
    m = _measure(1, iters=None, min_time=1e-4, min_iters=20, max_iters=10_000)[0]
    assert m.batch == 10 and len(m.samples_s) == 20


def test_an_automatic_batch_fits_min_iters_samples_in_max_iters(fake_timer):
    """0.1 us a call (the C loop's MPI at 8 B) would be batches of 100; with --max-iters 200 and 5
    samples at least, a batch is 40 calls: 200 iterations, not 500."""
    fake_timer([[0.1e-6]], [[0.1e-6]])
    m = _measure(1, iters=None, min_time=0.05, min_iters=5, max_iters=200)[0]
    assert (m.batch, len(m.samples_s), m.iterations) == (40, 5, 200)


def test_adaptive_iterations_capped_by_max_iters(fake_timer):
    fake_timer([[1e-3]], [[1e-6]])
    m = _measure(1, iters=None, min_time=10.0, min_iters=1, max_iters=7)[0]
    assert m.iterations == 7 and m.batch == 1


@pytest.mark.parametrize("warmup,want", [(0, 1), (3, 3)])
def test_warmup_calls_are_reported(fake_timer, warmup, want):
    timer = fake_timer([[1e-3]], [[1e-3]])
    m = _measure(1, warmup=warmup, iters=2)[0]
    assert m.warmup == want and timer.calls[0][0] == (want, 1)


def test_each_sample_is_the_slowest_rank(fake_timer):
    fake_timer([[1e-3]] * 3, [[1.0, 5.0, 1.0, 2.0], [4.0, 2.0, 1.0, 2.0], [3.0, 3.0, 6.0, 2.0]])
    ms = _measure(3, iters=4, batch=1)
    for m in ms:
        assert list(m.samples_s) == [4.0, 5.0, 6.0, 2.0]


def test_real_cpu_timer():
    m = _measure(1, iters=3, batch=1)[0]
    assert len(m.samples_s) == 3 and (m.samples_s > 0).all() and m.wrong == 0
    assert m.timer == "python" and m.notes == ()


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

    def replay(self, graph, samples, batch):
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
    ms = _measure(2, iters=8, batch=4, warmup=3, graph=True)
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


# --- correctness ----------------------------------------------------------------------------

CASES = [(c, d, o) for c in ("all_reduce", "reduce_scatter") for d, o in
         (("float32", "sum"), ("int8", "prod"), ("uint8", "max"), ("float16", "min"), ("float64", "avg"))]
CASES += [("all_gather", d, None) for d in ("float32", "int8", "uint8")]


@pytest.mark.parametrize("collective,dtype,op", CASES)
@pytest.mark.parametrize("in_place", [False, True], ids=["out-of-place", "in-place"])
@pytest.mark.parametrize("world", [1, 3])
def test_a_correct_collective_has_no_wrong_element(monkeypatch, collective, dtype, op, in_place, world):
    """Chunks of 7 elements: the fill and the check cross many chunk boundaries (the pattern's
    period continues across them)."""
    monkeypatch.setattr(harness, "CHUNK", 7)
    ms = _measure(world, collective, dtype, op, in_place, size=3 * 2 * 1000, iters=1, warmup=0)
    assert [m.wrong for m in ms] == [0] * world


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize("in_place", [False, True], ids=["out-of-place", "in-place"])
def test_one_corrupted_element_is_one_wrong(monkeypatch, collective, in_place):
    monkeypatch.setattr(harness, "CHUNK", 7)
    ms = _measure(3, collective, in_place=in_place, size=3 * 4 * 100, broken=(1, 29), iters=2)
    assert [m.wrong for m in ms] == [1, 1, 1]  # summed over the ranks, known to every rank


@pytest.mark.parametrize("rank,want", [("2", 1), ("0", 1), ("7", 0)])
def test_the_inject_wrong_rank_variable(monkeypatch, rank, want):
    monkeypatch.setenv(harness.INJECT_WRONG_ENV, rank)
    ms = _measure(3, "reduce_scatter", size=3 * 4 * 100, iters=1)
    assert [m.wrong for m in ms] == [want] * 3


def test_an_output_never_written_is_all_wrong():
    """Outputs start as the sentinel, which no pattern produces: all of them are counted."""
    ms = _measure(2, "all_gather", "int8", size=2 * 500, broken="silent", iters=1)
    assert ms[0].wrong == 2 * 1000  # each rank's 1000 output elements


def test_in_place_all_gather_never_written_has_only_its_own_block():
    """In place the rank's input is already its block of the output; the other blocks are wrong."""
    ms = _measure(3, "all_gather", "int8", in_place=True, size=3 * 500, broken="silent", iters=1)
    assert ms[0].wrong == 3 * 2 * 500


def test_calls_are_warm_up_timed_and_one_checked(fake_timer):
    fake_timer([[1e-3]] * 2, [[1e-3]] * 2)
    world = FakeWorld(2)
    coll, dt = COLLECTIVES["all_reduce"], DTYPES["float32"]

    def rank(comm):
        return measure(comm, coll, coll.counts(64, 4, 2), dt, "sum", False, 1, 4, 0.01, 1, 100, batch=2)

    world.run(rank)
    assert world.calls_made == [1 + 4 + 1] * 2  # warm-up, 2 samples of 2, the checked call


# --- buffers ------------------------------------------------------------------------------

def _buffers(collective, in_place, rank=1, world=3, per_rank=5, dtype="int32"):
    coll, dt = COLLECTIVES[collective], DTYPES[dtype]
    counts = coll.counts(per_rank * world * dt.itemsize, dt.itemsize, world)
    comm = FakeComm(World(world), ("world",), rank, world)
    return Buffers(comm, coll, counts, dt, in_place), counts


def test_in_place_layouts_are_nccl_tests():
    ar, _ = _buffers("all_reduce", True)
    assert ar.send is ar.recv is ar.whole and len(ar.whole) == 15
    ag, c = _buffers("all_gather", True)  # the rank's input is its block of the output
    assert ag.recv is ag.whole and len(ag.whole) == c.out_count == 15
    ag.whole[5:10] = 42  # rank 1's block
    assert len(ag.send) == 5 and (ag.send == 42).all() and ag.whole.sum() == 42 * 5
    rs, c = _buffers("reduce_scatter", True)  # the rank's output is its block of the input
    assert rs.send is rs.whole and len(rs.whole) == c.in_count == 15
    rs.whole[5:10] = 42
    assert len(rs.recv) == 5 and (rs.recv == 42).all() and rs.whole.sum() == 42 * 5


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter"])
def test_out_of_place_buffers_are_separate(collective):
    b, c = _buffers(collective, False)
    assert b.whole is None and (len(b.send), len(b.recv)) == (c.in_count, c.out_count)
    assert not np.shares_memory(b.send, b.recv)


def test_fill_puts_the_pattern_in_inputs_and_the_sentinel_elsewhere():
    dt = DTYPES["int32"]
    ag, c = _buffers("all_gather", True, rank=1)
    ag.fill(Pattern(None, dt, 3))
    values = tile(Pattern(None, dt, 3).values(1), 0, 5)
    assert list(ag.whole[5:10]) == list(values)
    assert (ag.whole[:5] == dt.sentinel).all() and (ag.whole[10:] == dt.sentinel).all()
    out, _ = _buffers("reduce_scatter", False, rank=2)
    out.fill(Pattern("sum", dt, 3))
    assert list(out.send) == list(tile(Pattern("sum", dt, 3).values(2), 0, 15))
    assert (out.recv == dt.sentinel).all()


# --- count_wrong --------------------------------------------------------------------------

def test_count_wrong_counts_nan_and_off_values():
    dt, coll = DTYPES["float32"], COLLECTIVES["all_reduce"]
    counts = coll.counts(400, 4, 2)
    comm = FakeComm(World(2), ("world",), 0, 2)
    pattern = Pattern("sum", dt, 2)
    out = comm.alloc(counts.out_count, dt)
    comm.write(out, 0, tile(pattern.reduced, 0, counts.out_count))
    assert count_wrong(comm, coll, pattern, counts, out) == 0
    out[3], out[50] = np.nan, out[50] + 1
    assert count_wrong(comm, coll, pattern, counts, out) == 2


def test_count_wrong_allows_avg_its_rounding_only():
    dt, coll = DTYPES["float32"], COLLECTIVES["all_reduce"]
    counts = coll.counts(400, 4, 3)
    comm = FakeComm(World(3), ("world",), 0, 3)
    pattern = Pattern("avg", dt, 3)
    expected = tile(pattern.reduced, 0, counts.out_count)
    out = comm.alloc(counts.out_count, dt)
    comm.write(out, 0, expected)  # rounded to float32: within the tolerance
    assert count_wrong(comm, coll, pattern, counts, out) == 0
    out[7] = expected[7] + 0.01 * max(1.0, abs(expected[7]))
    assert count_wrong(comm, coll, pattern, counts, out) == 1


# --- link bytes and power -----------------------------------------------------------------

class CountingComm(FakeComm):
    """Every barrier puts 100 bytes on this rank's link."""

    def barrier(self):
        super().barrier()
        self.world.link[self.rank] += 100


def test_link_bytes_takes_off_the_barriers_sums_ranks_and_keeps_the_smallest_window():
    """Rank 0 sends 10 bytes a call, rank 1 5; another process adds bytes to rank 0's link in
    windows 0 and 2 (4 calls each)."""
    world = FakeWorld(2, comm_class=CountingComm)
    world.link, noise, calls = [0, 0], {0: 500, 8: 300}, [0, 0]

    def rank(comm):
        def call():
            world.link[comm.rank] += (10, 5)[comm.rank] + (noise.get(calls[0], 0) if comm.rank == 0 else 0)
            calls[comm.rank] += 1
        return link_bytes(comm, call, lambda: world.link[comm.rank], calls=4)

    assert world.run(rank) == [15.0, 15.0] and calls == [12, 12]


def test_power_window_sums_the_ranks_meters_per_call():
    class Meter:
        def __init__(self, rank):
            self.rank = rank

        def start(self):
            self.started = True

        def stop(self):
            assert self.started
            return SimpleNamespace(energy_j=[3.0, 5.0][self.rank], power_w_avg=[100.0, 200.0][self.rank],
                                   power_w_max=[150.0, 250.0][self.rank])

    calls = [0, 0]

    def rank(comm):
        def call():
            calls[comm.rank] += 1
        return power_window(comm, call, Meter(comm.rank), calls=4)

    got = FakeWorld(2).run(rank)
    assert got == [{"energy_j": 2.0, "power_w_avg": 300.0, "power_w_max": 400.0}] * 2 and calls == [4, 4]


def test_measure_counts_link_bytes_and_power_when_asked(fake_timer):
    """A 0.5 s call: a 1 s power window is 3 calls; link bytes are counted over one batch."""
    fake_timer([[0.5]], [[0.5]])
    meter = SimpleNamespace(start=lambda: None,
                            stop=lambda: SimpleNamespace(energy_j=6.0, power_w_avg=300.0, power_w_max=310.0))
    m = _measure(1, iters=2, link_counter=lambda: 0, meter=meter)[0]
    assert m.link_bytes == 0.0 and m.power == {"energy_j": 2.0, "power_w_avg": 300.0, "power_w_max": 310.0}
    assert _measure(1, iters=2)[0].link_bytes is None
