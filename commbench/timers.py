"""Timers inside a rank: the timed loops, which loop times a point, and the iteration-count and
batch policy. The statistics of a point are in commbench.metrics.

A loop takes (fn, samples, batch) and gives seconds per call for each batch (this rank's own: the
harness takes the maximum over ranks). `Loop.stamped` also takes an injected delay (--inject-delay:
seconds of busy waiting before each call, counted in the batch's time) and gives, beside each batch's
seconds per call, the rank's time per call outside the library's calls (`late`: what it spent before
entering them; a benchmark loop spends nothing there unless a delay is injected, so a late rank is one
that was made late). Its name is the `timer` column of the row it timed:
  python       this module's loop of Python calls, perf_counter per batch (CPU)
  cuda-events  the same loop between CUDA events on the current stream (GPU)
  native       a loop in C: the MPI loop (commbench.kernels.mpi_loop) or a kernel's own (kernel_host)
  cuda-graph   the batch captured once as a CUDA graph, its replays between CUDA events (NCCL)
A bound call that brings its own loop carries it as `fn.timer`; `--timer python` ignores it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

TIMER_CHOICES = ("auto", "python")  # --timer: auto, the call's own loop where it has one
LOOP_NAMES = ("native", "python", "cuda-graph", "cuda-events")  # the `timer` column's values


Timed = tuple[np.ndarray, np.ndarray]  # (seconds per call of each batch, seconds per call outside the calls)


@dataclass(frozen=True)
class Loop:
    name: str  # the row's `timer`, one of LOOP_NAMES
    run: Callable[..., Timed | np.ndarray]  # (fn, samples, batch[, delay_s]): Timed, or the seconds alone

    def __post_init__(self):
        if self.name not in LOOP_NAMES:
            raise ValueError(f"unknown loop name {self.name!r}")

    def __call__(self, fn: Callable[[], object], samples: int, batch: int = 1) -> np.ndarray:
        return self.stamped(fn, samples, batch)[0]

    def stamped(self, fn: Callable[[], object], samples: int, batch: int = 1, delay_s: float = 0.0) -> Timed:
        """(seconds per call of each batch, seconds per call this rank spent outside the calls) with
        `delay_s` of busy waiting before each call (0: none, and the loop is called without one)."""
        out = self.run(fn, samples, batch, delay_s) if delay_s > 0 else self.run(fn, samples, batch)
        if isinstance(out, tuple):
            return out
        return out, np.zeros(len(out))


def spin(seconds: float, clock=time.perf_counter) -> float:
    """Busy-wait `seconds` (no sleep: the core stays busy, as a rank computing would): the seconds spun."""
    start = clock()
    end = start + seconds
    while (now := clock()) < end:
        pass
    return now - start


def time_cpu(fn: Callable[[], object], samples: int, batch: int = 1, delay_s: float = 0.0) -> Timed:
    """Seconds per call for each of `samples` batches of `batch` back-to-back calls: one clock
    read per batch, so the loop adds only that read to what it measures (with a delay: the spins'
    own reads too, and their seconds are the time outside the calls)."""
    clock = time.perf_counter
    stamps = [0.0] * (samples + 1)
    late = [0.0] * samples
    inner = range(batch)
    stamps[0] = clock()
    if delay_s > 0:
        for i in range(1, samples + 1):
            spun = 0.0
            for _ in inner:
                spun += spin(delay_s, clock)
                fn()
            stamps[i] = clock()
            late[i - 1] = spun
    else:
        for i in range(1, samples + 1):
            for _ in inner:
                fn()
            stamps[i] = clock()
    return np.diff(np.asarray(stamps)) / batch, np.asarray(late) / batch


def time_cuda(fn: Callable[[], object], samples: int, batch: int = 1, delay_s: float = 0.0) -> Timed:
    """Seconds per call for each batch, between CUDA events recorded on the current stream; a delay
    is spun on the host before each call is queued (the GPU idles once the queue drains)."""
    import torch

    events = [torch.cuda.Event(enable_timing=True) for _ in range(samples + 1)]
    late = [0.0] * samples
    events[0].record()
    for i in range(1, samples + 1):
        for _ in range(batch):
            if delay_s > 0:
                late[i - 1] += spin(delay_s)
            fn()
        events[i].record()
    events[-1].synchronize()
    times = np.array([events[i - 1].elapsed_time(events[i]) for i in range(1, samples + 1)]) / 1e3 / batch
    return times, np.asarray(late) / batch


EMPTY_GRAPH = "The CUDA Graph is empty"  # torch's warning at the end of a capture that recorded nothing


class GraphUnavailable(Exception):
    """torch cannot capture this call in a CUDA graph; the message says why, in one line."""


def capture_graph(fn: Callable[[], object], batch: int):
    """`batch` calls captured as one CUDA graph (nccl-tests -G), to be replayed with no launch cost
    of Python or torch between the calls; the caller ran the call eagerly first (NCCL sets a
    communicator up on its first call, which a capture cannot hold). GraphUnavailable if torch
    cannot capture it, or if the calls queued no GPU work (NCCL at one rank, in place: torch warns
    that the graph is empty, and its replays would time nothing)."""
    import warnings

    import torch

    graph = torch.cuda.CUDAGraph()
    try:
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            with torch.cuda.graph(graph):
                for _ in range(batch):
                    fn()
    except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError or its own types
        torch.cuda.synchronize()
        text = str(exc).strip().splitlines()
        raise GraphUnavailable(f"{type(exc).__name__}: {text[0] if text else ''}") from None
    empty = [w for w in said if EMPTY_GRAPH in str(w.message)]
    for w in said:
        if w not in empty:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if empty:
        raise GraphUnavailable("the calls queued no GPU work: the graph is empty")
    return graph


def replay_graph(graph, samples: int, batch: int, delay_s: float = 0.0) -> Timed:
    """Seconds per call for each of `samples` replays of a captured graph of `batch` calls, between
    CUDA events on the current stream; a delay is spun on the host before each replay, for the
    batch's calls together (a graph holds no host code between its calls)."""
    import torch

    events = [torch.cuda.Event(enable_timing=True) for _ in range(samples + 1)]
    late = [0.0] * samples
    events[0].record()
    for i in range(1, samples + 1):
        if delay_s > 0:
            late[i - 1] = spin(delay_s * batch)
        graph.replay()
        events[i].record()
    events[-1].synchronize()
    times = np.array([events[i - 1].elapsed_time(events[i]) for i in range(1, samples + 1)]) / 1e3 / batch
    return times, np.asarray(late) / batch


PYTHON = Loop("python", time_cpu)
CUDA_EVENTS = Loop("cuda-events", time_cuda)
CUDA_GRAPH = Loop("cuda-graph", lambda fn, samples, batch=1, delay_s=0.0:
                  replay_graph(capture_graph(fn, batch), samples, batch, delay_s))


def device_loop(device: str) -> Loop:
    """The Python loop of a device: perf_counter on the CPU, CUDA events on a GPU."""
    return CUDA_EVENTS if device == "cuda" else PYTHON


def loop_for(fn: Callable[[], object], device: str, choice: str = "auto", graph: bool = False) -> Loop:
    """The loop that times fn: with --timer python the device's; else fn's own (fn.timer) where it
    has one, a CUDA graph where torch can capture it (fn.capturable) and graph is on, else the
    device's."""
    if choice == "python":
        return device_loop(device)
    own = getattr(fn, "timer", None)
    if own is not None:
        return own
    return CUDA_GRAPH if graph and getattr(fn, "capturable", False) else device_loop(device)


def floor_us(loop: Loop, samples: int = 50, batch: int = 100) -> float:
    """What the loop itself costs per call (run.json's harness floor): the median sample of
    batches of an empty call, in µs."""
    return float(np.median(loop(lambda: None, samples, batch))) * 1e6


# A sample shorter than this is jitter-dominated: with one clock read and one maximum over ranks
# per call, scheduler noise between ranks, not the collective, sets the figure (measured: +50 %
# at 8 B on 4 MPI ranks sharing 2 cores). Shorter calls are timed in batches, as nccl-tests does.
MIN_SAMPLE_S = 100e-6
MAX_BATCH = 100


def choose_batch(per_iter_s: float) -> int:
    """Calls per sample so that one sample lasts at least MIN_SAMPLE_S."""
    if per_iter_s <= 0:
        return MAX_BATCH
    return int(min(MAX_BATCH, max(1, math.ceil(MIN_SAMPLE_S / per_iter_s))))


def choose_iterations(per_iter_s: float, min_time: float, min_iters: int, max_iters: int) -> int:
    """Enough iterations to fill min_time, within [min_iters, max_iters]."""
    if per_iter_s <= 0:
        return max_iters
    return int(min(max_iters, max(min_iters, math.ceil(min_time / per_iter_s))))
