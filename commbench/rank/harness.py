"""Measure one point on one communicator: the single timing loop every collective shares.

Steps: lay out buffers for the collective and mode, fill inputs with the exact pattern,
warm up, choose the iteration count (all ranks agree), time each iteration, keep the maximum
over ranks per iteration, then re-fill, run once more and count wrong elements on every rank.
"""

from __future__ import annotations

import math
import mmap
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from commbench.dtypes import DType
from commbench.backends.communicators import Communicator
from commbench.collectives import Collective, Counts
from commbench.collectives.patterns import Pattern, tile
from commbench.machine.power import calls_for_window
from commbench.timers import (CUDA_EVENTS, CUDA_GRAPH, GraphUnavailable, Loop, capture_graph, choose_batch,
                                   choose_iterations, device_loop, loop_for, replay_graph)

Bind = Callable[[Any, Any], tuple[Callable[[], Any], Any]]
CHUNK = 1 << 22  # elements per fill/check step, bounding host memory for huge buffers
RANK_CELLS = 1 << 20  # ranks x samples of one point's per-rank times kept (the first samples of every rank)
LINK_WINDOWS = 3  # counts of one point's link bytes; the smallest is kept (see link_bytes)


@dataclass
class Measurement:
    samples_s: np.ndarray  # seconds per call, one per batch, max over ranks
    batch: int  # calls per sample
    wrong: int  # wrong elements, summed over ranks
    warmup: int
    link_bytes: float | None = None  # bytes per call on the counted links, summed over nodes
    power: dict | None = None  # power_w_avg, power_w_max, energy_j (per call), over the job's GPUs
    timer: str = "python"  # the loop that timed it (commbench.timers)
    notes: tuple[str, ...] = ()  # one-line notes for the user (a loop that could not be used)
    schedule: str | None = None  # what the bound call runs, where it says (the kernels: ring, tree, oneshot)
    rank_s: np.ndarray | None = None  # ranks x samples: each rank's own seconds per call (see per_rank)
    late_s: np.ndarray | None = None  # ranks x samples: each rank's seconds per call outside the calls
    group_s: np.ndarray | None = None  # --split: groups x samples, each group's seconds per call (its ranks' maximum)

    @property
    def iterations(self) -> int:
        return len(self.samples_s) * self.batch


@dataclass(frozen=True)
class Groups:
    """--split (commbench.split): the point runs on this rank's group's communicator, every group at the same
    moment. world: the communicator of every group's ranks, which agrees the loop and the calls, starts the
    timed samples together and takes the maximum over all of them; index: this rank's group's; count: the
    groups'."""
    world: Communicator
    index: int
    count: int


class Buffers:
    """send/recv for one point, laid out as nccl-tests does for in-place and out-of-place. alloc:
    an algorithm's allocator (Algorithm.allocator), else the communicator's; an algorithm's gets
    one allocation (out of place: send, then recv from the first page boundary after it), so that
    its buffers keep the same place in every rank's (the kernels reach their peers' so)."""

    def __init__(self, comm: Communicator, coll: Collective, counts: Counts, dtype: DType, in_place: bool,
                 alloc: Callable[[int, DType], Any] | None = None):
        self.comm, self.coll, self.counts, self.dtype, self.in_place = comm, coll, counts, dtype, in_place
        rank = comm.rank
        if in_place:
            self.whole = (alloc or comm.alloc_point)(max(counts.in_count, counts.out_count), dtype)
            off = coll.in_place_offset(rank, counts)
            self.send = self.whole if counts.in_count >= counts.out_count else comm.view(self.whole, off, counts.in_count)
            self.recv = self.whole if counts.out_count >= counts.in_count else comm.view(self.whole, off, counts.out_count)
        else:
            self.whole = None
            if alloc is None:
                self.send = comm.alloc_point(counts.in_count, dtype)
                self.recv = comm.alloc_point(counts.out_count, dtype)
            else:
                page = mmap.PAGESIZE // dtype.itemsize
                gap = -(-counts.in_count // page) * page
                both = alloc(gap + counts.out_count, dtype)
                self.send, self.recv = comm.view(both, 0, counts.in_count), comm.view(both, gap, counts.out_count)

    def fill(self, pattern: Pattern) -> None:
        """Inputs get this rank's pattern; every output element not also an input gets the
        sentinel, so an output the collective never wrote is caught."""
        comm = self.comm
        if self.in_place and self.whole is not self.send:  # all-gather: the rest of recv
            _fill(comm, self.whole, self.counts.out_count, lambda s, n: np.full(n, float(self.dtype.sentinel)))
        elif not self.in_place:
            _fill(comm, self.recv, self.counts.out_count, lambda s, n: np.full(n, float(self.dtype.sentinel)))
        values = pattern.values(comm.rank)
        _fill(comm, self.send, self.counts.in_count, lambda s, n: tile(values, s, n))


def _fill(comm, buf, count, make):
    for start in range(0, count, CHUNK):
        n = min(CHUNK, count - start)
        comm.write(buf, start, make(start, n))


def count_wrong(comm: Communicator, coll: Collective, pattern: Pattern, counts: Counts, out) -> int:
    """Wrong elements of this rank's output (a NaN output counts as wrong; an element the collective
    leaves undefined here, a NaN expected, is not checked: a reduce's output off the root)."""
    wrong = 0
    for start in range(0, counts.out_count, CHUNK):
        n = min(CHUNK, counts.out_count - start)
        expected = coll.expected(pattern, comm.rank, counts, start, n)
        defined = ~np.isnan(expected)
        if not defined.any():
            continue
        got = comm.read(out, start, n)
        close = np.abs(got - expected) <= pattern.tolerance(expected)
        wrong += int(np.count_nonzero(defined & ~close))
    return wrong


class Prepared:
    """One point set up on this rank: its buffers laid out, the call bound, the loop that times it
    agreed by every rank. fill / warm / time / check are the steps of a measurement, each
    collective over the ranks; `measure` runs them once, `commbench ab` (commbench.rank.turns)
    times two of them turn by turn. bufs: buffers of another Prepared of the same layout to share
    (an A/B pair times both calls on the same memory), else new ones (bind.alloc, where set). groups:
    --split's, where the point runs on a group of the world (`comm` is then the group's communicator)."""

    def __init__(self, comm: Communicator, coll: Collective, counts: Counts, dtype: DType, op: str | None,
                 in_place: bool, bind: Bind | None = None, timer: str = "auto", graph: bool = False,
                 bufs: Buffers | None = None, groups: Groups | None = None):
        self.comm, self.coll, self.counts, self.dtype = comm, coll, counts, dtype
        self.groups = groups
        self.world = comm if groups is None else groups.world  # where the ranks agree, start and are summed
        self.bufs = bufs or Buffers(comm, coll, counts, dtype, in_place, getattr(bind, "alloc", None))
        self.pattern = Pattern(op, dtype, comm.size)
        if bind is None:
            bind = lambda send, recv: comm.bind(coll.name, send, recv, op, in_place, counts)  # noqa: E731
        self.fn, self.out = bind(self.bufs.send, self.bufs.recv)
        self.loop, self.notes = agree(self.world, loop_for(self.fn, comm.device, timer, graph))
        self._graph_batch = None  # the batch a CUDA graph was captured for
        self.own = self.late = None  # this rank's seconds per call, and outside the calls, of the last time()
        self.group = None  # --split: this rank's group's seconds per call (its maximum) of the last time()

    def warm(self, calls: int) -> tuple[float, int]:
        """Fill the inputs and run `calls` untimed calls (at least one): the per-call time every
        rank agrees on (the slowest rank's median) and the calls made. A graph's calls warm up eagerly."""
        self.bufs.fill(self.pattern)
        self.world.barrier()
        probe = (CUDA_EVENTS if self.loop is CUDA_GRAPH else self.loop)(self.fn, max(calls, 1))
        return float(self.world.reduce_host(np.array([np.median(probe)]), "max")[0]), len(probe)

    def time(self, samples: int, batch: int, delay_s: float = 0.0) -> np.ndarray:
        """`samples` timed batches of `batch` calls, all ranks starting together: seconds per call of
        each batch, the maximum over ranks (this rank's own in self.own, its time outside the calls in
        self.late). delay_s: this rank's busy wait before each call (--inject-delay), counted in its time."""
        if self.loop is CUDA_GRAPH or (self._graph_batch not in (None, batch)):  # a graph holds one batch
            self.loop, notes = graph_loop(self.world, self.fn, batch)
            self._graph_batch = batch if self.loop.name == "cuda-graph" else None
            self.notes = tuple(dict.fromkeys(self.notes + notes))
        self.world.barrier()
        self.own, self.late = self.loop.stamped(self.fn, samples, batch, delay_s)
        if self.groups is not None:
            self.group = self.comm.reduce_host(self.own, "max")
        return self.world.reduce_host(self.own, "max")

    def group_times(self) -> np.ndarray:
        """--split: every group's seconds per call of the last time(), groups x samples, on every rank (collective
        over the world): each group's maximum over its ranks, as its first rank has it."""
        both = np.zeros((self.groups.count, len(self.group)))
        if self.comm.rank == 0:
            both[self.groups.index] = self.group
        return self.world.reduce_host(both.ravel(), "sum").reshape(self.groups.count, -1)

    def per_rank(self) -> tuple[np.ndarray, np.ndarray]:
        """Every rank's own seconds per call and seconds outside the calls, of the last time(), as two
        ranks x samples arrays on every rank (collective); at most RANK_CELLS cells each: the first
        samples of every rank. A rank's own time runs from the batch's start on it to its last call's
        return, so the ranks' times differ where their calls return at different moments."""
        world = self.world  # (--split: every rank of every group, by its world rank)
        size, kept = world.size, min(len(self.own), max(1, RANK_CELLS // world.size))
        both = np.zeros((2, size, kept))
        both[0, world.rank], both[1, world.rank] = self.own[:kept], self.late[:kept]
        both = world.reduce_host(both.ravel(), "sum").reshape(2, size, kept)
        return both[0], both[1]

    def check(self) -> int:
        """Fill again, run one call and count the wrong output elements, summed over the ranks."""
        self.bufs.fill(self.pattern)
        self.world.barrier()
        self.fn()
        self.comm.synchronize()
        wrong = count_wrong(self.comm, self.coll, self.pattern, self.counts, self.out)
        return int(self.world.reduce_host(np.array([wrong], dtype=np.float64), "sum")[0])


def measure(comm: Communicator, coll: Collective, counts: Counts, dtype: DType, op: str | None,
            in_place: bool, warmup: int, iters: int | None, min_time: float, min_iters: int,
            max_iters: int, batch: int | None = None, bind: Bind | None = None,
            link_counter: Callable[[], int] | None = None, meter=None, timer: str = "auto",
            graph: bool = False, delay: float = 0.0, groups: Groups | None = None) -> Measurement:
    """Time one point. iters: fixed count (else enough for min_time within the bounds);
    batch: calls per sample (else chosen from the warm-up so a sample lasts >= 100 us);
    bind: makes the callable to time from (send, recv), default the library's own collective (its
    `alloc` attribute, where set, allocates the buffers: Buffers);
    link_counter: when given, also count the link bytes of `batch` calls (see link_bytes);
    meter: when given (commbench.machine.power), also measure power and energy over a >= 1 s window;
    timer: "auto" times with the call's own loop where it has one (fn.timer), "python" with the
    device's Python loop; graph: a call torch can capture (fn.capturable) is timed as a CUDA graph;
    delay: this rank's injected delay (--inject-delay), a fraction of the warm-up's per-call time busy-waited
    before each timed call; groups: --split's (comm: this rank's group's communicator), every group timed at once:
    the loop and the calls per sample are agreed over the world, and the timed samples start together (one
    barrier: the samples then run back to back in each group)."""
    point = Prepared(comm, coll, counts, dtype, op, in_place, bind, timer, graph, groups=groups)
    # warm-up, and the per-call estimate all ranks agree on
    per_call, warmed = point.warm(warmup)
    adaptive = iters is None
    if adaptive:
        iters = choose_iterations(per_call, min_time, min_iters, max_iters)
    n_samples, batch, note = sample_plan(iters, batch, per_call, adaptive, min_iters, max_iters)

    samples = point.time(n_samples, batch, delay * per_call)
    group_s = None if groups is None else point.group_times()
    rank_s, late_s = point.per_rank()
    traffic = None if link_counter is None else link_bytes(point.world, point.fn, link_counter, batch)
    energy = None if meter is None else power_window(point.world, point.fn, meter, calls_for_window(per_call))
    wrong = point.check()
    notes = point.notes + ((note,) if note else ())
    return Measurement(samples, batch, wrong, warmed, traffic, energy, point.loop.name, notes,
                       getattr(point.fn, "schedule", None), rank_s, late_s, group_s)


def sample_plan(iters: int, batch: int | None, per_call: float, adaptive: bool, min_iters: int,
                max_iters: int) -> tuple[int, int, str]:
    """(samples, calls per sample, a note or "") so that samples x batch is the count to time.
    A fixed count (--iters) is timed exactly: the batch a sample needs (>= 100 us) becomes the nearest
    divisor of the count within a factor 2 of it (the larger of two as near). Only where there is none
    (a prime count: the batch within that factor that adds the fewest calls) or --batch does not
    divide it are the calls rounded up to whole batches, and a note says so (the row's `iterations` is always the calls timed).
    Adapting, whole batches of at least min_iters samples and never more than max_iters calls."""
    if adaptive:
        batch = batch or min(choose_batch(per_call), max(1, max_iters // min_iters))
        batch = max(1, min(batch, iters))
        n_samples = max(min_iters, min(math.ceil(iters / batch), max_iters // batch))
        return n_samples, batch, ""
    given = batch is not None
    want = max(1, min(batch if given else choose_batch(per_call), iters))
    if not given and iters % want:  # the batch within a factor 2 that adds the fewest calls (none: a divisor)
        want = min(range(max(1, (want + 1) // 2), min(iters, 2 * want) + 1),
                   key=lambda b: (math.ceil(iters / b) * b - iters, abs(b - want), -b))
    n_samples = math.ceil(iters / want)
    if n_samples * want == iters:
        return n_samples, want, ""
    why = f"--batch {want} does not divide it" if given else "it has no divisor near the batch a sample needs"
    return n_samples, want, (f"--iters {iters}: {why}, so some points time more calls, in whole batches "
                             "(the iterations column counts the calls timed)")


def agree(comm: Communicator, loop: Loop) -> tuple[Loop, tuple[str, ...]]:
    """Every rank times with the same kind of loop: where one rank has only its device's Python loop
    (its C loop did not build there), every rank uses that one, and says so."""
    plain = device_loop(comm.device)
    if comm.reduce_host(np.array([1.0 if loop is plain else 0.0]), "max")[0] and loop is not plain:
        return plain, (f"another rank cannot time with the {loop.name} loop: every rank uses the {plain.name} loop",)
    return loop, ()


def graph_loop(comm: Communicator, fn: Callable[[], Any], batch: int) -> tuple[Loop, tuple[str, ...]]:
    """One batch captured as a CUDA graph on every rank, then timed by its replays. The ranks agree
    before any replay: where one cannot capture, none replays (a replayed collective would wait for
    that rank, which would be in the agreement's own collective), and all time with CUDA events."""
    try:
        captured, why = capture_graph(fn, batch), ""
    except GraphUnavailable as exc:
        captured, why = None, str(exc)
    if comm.reduce_host(np.array([1.0 if why else 0.0]), "max")[0] == 0:
        return Loop("cuda-graph", lambda fn, samples, batch, delay_s=0.0: replay_graph(captured, samples, batch, delay_s)), ()
    note = f"torch could not capture the call in a CUDA graph ({why or 'on another rank'}): timed with CUDA events"
    return CUDA_EVENTS, (note,)


def link_bytes(comm: Communicator, fn: Callable[[], Any], counter: Callable[[], int], calls: int,
               windows: int = LINK_WINDOWS) -> float:
    """Bytes per call through the counted links, summed over every rank's counter (one rank
    per node reads its uplink, the others return 0). Counted apart from the timed loop. Each
    reading is fenced by a barrier on the side where the calls are, so no rank sends before the
    first reading or after the last; the bytes of those two barriers, measured alone first,
    are taken off. Anything else on a link (a retransmission, another process's packets) only
    adds bytes, so the count is taken in `windows` windows and the smallest kept."""
    counts = []
    for _ in range(windows):
        comm.barrier()
        before = counter()
        comm.barrier()
        one_barrier = counter() - before
        start = counter()
        comm.barrier()
        for _ in range(calls):
            fn()
        comm.synchronize()
        comm.barrier()
        used = counter() - start - 2 * one_barrier
        counts.append(float(comm.reduce_host(np.array([used], dtype=np.float64), "sum")[0]))
    return min(counts) / calls


def power_window(comm: Communicator, fn: Callable[[], Any], meter, calls: int) -> dict:
    """Power and energy over `calls` back-to-back calls (a window of >= 1 s): the row's power columns,
    from every rank's meters summed (commbench.machine.power.Meters: each GPU and each node's CPUs has
    one owner; the others read nothing)."""
    comm.synchronize()
    comm.barrier()
    meter.start()
    for _ in range(calls):
        fn()
    comm.synchronize()
    values = meter.stop()
    comm.barrier()
    total = comm.reduce_host(np.array(values, dtype=np.float64), "sum") if values else []
    return meter.columns(list(total), calls)
