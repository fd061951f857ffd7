"""Timers inside a rank: per-iteration timers (perf_counter on CPU, CUDA events on GPU) and the
iteration-count and batch policy. The statistics of a point are in commbench.metrics."""

from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np


def time_cpu(fn: Callable[[], object], samples: int, batch: int = 1) -> np.ndarray:
    """Seconds per call for each of `samples` batches of `batch` back-to-back calls: one clock
    read per batch, so the loop adds only that read to what it measures."""
    clock = time.perf_counter
    stamps = [0.0] * (samples + 1)
    inner = range(batch)
    stamps[0] = clock()
    for i in range(1, samples + 1):
        for _ in inner:
            fn()
        stamps[i] = clock()
    return np.diff(np.asarray(stamps)) / batch


def time_cuda(fn: Callable[[], object], samples: int, batch: int = 1) -> np.ndarray:
    """Seconds per call for each batch, between CUDA events recorded on the current stream."""
    import torch

    events = [torch.cuda.Event(enable_timing=True) for _ in range(samples + 1)]
    events[0].record()
    for i in range(1, samples + 1):
        for _ in range(batch):
            fn()
        events[i].record()
    events[-1].synchronize()
    return np.array([events[i - 1].elapsed_time(events[i]) for i in range(1, samples + 1)]) / 1e3 / batch


def timer_for(device: str) -> Callable[..., np.ndarray]:
    return time_cuda if device == "cuda" else time_cpu


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
