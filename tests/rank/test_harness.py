"""commbench.rank.harness on a fake communicator (tests/harness_fakes.py): batch, sample count, the
max over ranks, correctness counting, buffer layouts, link bytes and power. Which loop times a
point: tests/test_timers.py."""

from types import SimpleNamespace

import numpy as np
import pytest

from commbench.dtypes import DTYPES
from commbench.rank import harness
from commbench.collectives import COLLECTIVES
from commbench.machine import power
from commbench.rank.harness import Buffers, count_wrong, link_bytes, measure, power_window
from commbench.collectives.patterns import Pattern, tile
from commbench.timers import Loop
from harness_fakes import FakeComm, FakeTimer, FakeWorld, measure_ranks
from nccl_semantics import World


@pytest.fixture
def fake_timer(monkeypatch):
    def install(probe, loop):
        timer = FakeTimer(probe, loop)
        monkeypatch.setattr(harness, "loop_for", lambda fn, device, choice="auto", graph=False: Loop("python", timer))
        return timer
    return install


# --- iterations, batch, samples ---------------------------------------------------------------

@pytest.mark.parametrize("iters,batch,probe_s,want_batch,want_samples", [
    (25, None, [1e-6, 10e-6], 5, 5),  # the slowest rank's probe (10 us) wants 100 us / 10 us: 5 divides 25
    (25, None, [10e-6, 1e-6], 5, 5),
    (10, 4, [1e-6, 1e-6], 4, 3),  # --batch: whole batches, at least the iterations asked
    (10, 50, [1e-6, 1e-6], 10, 1),  # a batch larger than the iterations is cut to them
    (3, None, [1e-3, 1e-3], 1, 3),  # a call over 100 us is timed alone
])
def test_fixed_iterations(fake_timer, iters, batch, probe_s, want_batch, want_samples):
    timer = fake_timer([[p] for p in probe_s], [[1e-6]] * 2)
    ms = measure_ranks(2, iters=iters, batch=batch)
    for m in ms:
        assert (m.batch, len(m.samples_s), m.iterations) == (want_batch, want_samples, want_batch * want_samples)
    assert timer.calls[0] == timer.calls[1] == [(2, 1), (want_samples, want_batch)]  # warm-up, then the loop


def test_adaptive_iterations_fill_min_time(fake_timer):
    """10 us a call, 2 ms wanted: 200 iterations in batches of 10."""
    fake_timer([[10e-6], [5e-6]], [[1e-6]] * 2)
    m = measure_ranks(2, iters=None, min_time=2e-3, min_iters=5, max_iters=10_000)[0]
    assert (m.batch, len(m.samples_s)) == (10, 20)


def test_adaptive_iterations_keep_min_iters_samples(fake_timer):
    """Batching never leaves fewer than --min-iters samples."""
    fake_timer([[10e-6]], [[1e-6]])
    m = measure_ranks(1, iters=None, min_time=1e-4, min_iters=20, max_iters=10_000)[0]
    assert m.batch == 10 and len(m.samples_s) == 20


def test_an_automatic_batch_fits_min_iters_samples_in_max_iters(fake_timer):
    """0.1 us a call (the C loop's MPI at 8 B) would be batches of 100; with --max-iters 200 and 5
    samples at least, a batch is 40 calls: 200 iterations, not 500."""
    fake_timer([[0.1e-6]], [[0.1e-6]])
    m = measure_ranks(1, iters=None, min_time=0.05, min_iters=5, max_iters=200)[0]
    assert (m.batch, len(m.samples_s), m.iterations) == (40, 5, 200)


def test_adaptive_iterations_capped_by_max_iters(fake_timer):
    fake_timer([[1e-3]], [[1e-6]])
    m = measure_ranks(1, iters=None, min_time=10.0, min_iters=1, max_iters=7)[0]
    assert m.iterations == 7 and m.batch == 1


@pytest.mark.parametrize("warmup,want", [(0, 1), (3, 3)])
def test_warmup_calls_are_reported(fake_timer, warmup, want):
    timer = fake_timer([[1e-3]], [[1e-3]])
    m = measure_ranks(1, warmup=warmup, iters=2)[0]
    assert m.warmup == want and timer.calls[0][0] == (want, 1)


def test_each_sample_is_the_slowest_rank(fake_timer):
    fake_timer([[1e-3]] * 3, [[1.0, 5.0, 1.0, 2.0], [4.0, 2.0, 1.0, 2.0], [3.0, 3.0, 6.0, 2.0]])
    ms = measure_ranks(3, iters=4, batch=1)
    for m in ms:
        assert list(m.samples_s) == [4.0, 5.0, 6.0, 2.0]


def test_real_cpu_timer():
    m = measure_ranks(1, iters=3, batch=1)[0]
    assert len(m.samples_s) == 3 and (m.samples_s > 0).all() and m.wrong == 0
    assert m.timer == "python" and m.notes == ()


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
    ms = measure_ranks(world, collective, dtype, op, in_place, size=3 * 2 * 1000, iters=1, warmup=0)
    assert [m.wrong for m in ms] == [0] * world


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize("in_place", [False, True], ids=["out-of-place", "in-place"])
def test_one_corrupted_element_is_one_wrong(monkeypatch, collective, in_place):
    monkeypatch.setattr(harness, "CHUNK", 7)
    ms = measure_ranks(3, collective, in_place=in_place, size=3 * 4 * 100, broken=(1, 29), iters=2)
    assert [m.wrong for m in ms] == [1, 1, 1]  # summed over the ranks, known to every rank


@pytest.mark.parametrize("rank,want", [("2", 1), ("0", 1), ("7", 0)])
def test_the_injected_wrong_element_is_counted_by_the_check(monkeypatch, rank, want):
    """tests/injected/sitecustomize.py (what fault_env loads into real ranks) patches the loop from outside."""
    from injected import sitecustomize

    monkeypatch.setattr(harness.Prepared, "check", harness.Prepared.check)  # undone after the test
    monkeypatch.setattr(harness.Prepared, "time", harness.Prepared.time)
    sitecustomize.install(wrong=rank, hang=None)
    ms = measure_ranks(3, "reduce_scatter", size=3 * 4 * 100, iters=1)
    assert [m.wrong for m in ms] == [want] * 3


def test_an_output_never_written_is_all_wrong():
    """Outputs start as the sentinel, which no pattern produces: all of them are counted."""
    ms = measure_ranks(2, "all_gather", "int8", size=2 * 500, broken="silent", iters=1)
    assert ms[0].wrong == 2 * 1000  # each rank's 1000 output elements


def test_in_place_all_gather_never_written_has_only_its_own_block():
    """In place the rank's input is already its block of the output; the other blocks are wrong."""
    ms = measure_ranks(3, "all_gather", "int8", in_place=True, size=3 * 500, broken="silent", iters=1)
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


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter"])
def test_an_algorithms_allocator_holds_a_points_buffers_in_one_allocation(collective):
    """Buffers with an algorithm's allocator (Algorithm.allocator: the kernels' shared memory):
    out of place, one allocation, send at its start and recv on the next page after it, so the
    two keep the same place in every rank's allocation; in place, the one buffer as always."""
    allocated = []

    def alloc(count, dtype):
        allocated.append(np.zeros(count, dtype.numpy_name))
        return allocated[-1]

    coll, dt = COLLECTIVES[collective], DTYPES["int32"]
    counts = coll.counts(5000 * 3 * 4, 4, 3)
    comm = FakeComm(World(3), ("world",), 1, 3)
    b = Buffers(comm, coll, counts, dt, False, alloc)
    [both] = allocated
    assert b.send.base is both and b.recv.base is both and not np.shares_memory(b.send, b.recv)
    assert (len(b.send), len(b.recv)) == (counts.in_count, counts.out_count)
    gap = b.recv.ctypes.data - both.ctypes.data
    assert b.send.ctypes.data == both.ctypes.data and gap % 4096 == 0 and 0 <= gap - counts.in_count * 4 < 4096
    in_place = Buffers(comm, coll, counts, dt, True, alloc)
    assert len(allocated) == 2 and in_place.whole is allocated[1]


def test_measure_takes_its_buffers_from_the_binders_allocator():
    """measure() lays a point out with bind.alloc where the binder has one (the worker sets an
    algorithm's allocator there), and the point is measured and checked on those buffers."""
    coll, dt = COLLECTIVES["all_gather"], DTYPES["float32"]
    seen = {}

    def rank(comm):
        counts = coll.counts(4096, dt.itemsize, comm.size)
        allocated = []

        def alloc(count, dtype):
            allocated.append(np.zeros(count, dtype.numpy_name))
            return allocated[-1]

        def bind(send, recv):
            seen[comm.rank] = send.base is recv.base is allocated[0]
            return comm.bind(coll.name, send, recv, None, False)
        bind.alloc = alloc
        return measure(comm, coll, counts, dt, None, False, warmup=1, iters=3, min_time=0.01, min_iters=1,
                       max_iters=10, bind=bind)

    ms = FakeWorld(2).run(rank)
    assert seen == {0: True, 1: True} and [m.wrong for m in ms] == [0, 0]


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
        return power_window(comm, call, power.Meters(gpu=Meter(comm.rank)), calls=4)

    got = FakeWorld(2).run(rank)
    assert got == [{"energy_j": 2.0, "power_w_avg": 300.0, "power_w_max": 400.0}] * 2 and calls == [4, 4]


def test_measure_counts_link_bytes_and_power_when_asked(fake_timer):
    """A 0.5 s call: a 1 s power window is 3 calls; link bytes are counted over one batch."""
    fake_timer([[0.5]], [[0.5]])
    meter = power.Meters(gpu=SimpleNamespace(start=lambda: None,
                                             stop=lambda: SimpleNamespace(energy_j=6.0, power_w_avg=300.0,
                                                                          power_w_max=310.0)))
    m = measure_ranks(1, iters=2, link_counter=lambda: 0, meter=meter)[0]
    assert m.link_bytes == 0.0 and m.power == {"energy_j": 2.0, "power_w_avg": 300.0, "power_w_max": 310.0}
    assert measure_ranks(1, iters=2)[0].link_bytes is None
