"""Timing: per-iteration timers (perf_counter on CPU, CUDA events on GPU), the iteration-count
policy, and the statistics of a point.

An iteration's time is the maximum over ranks (the slowest rank finishes the collective); the
headline time of a point is the median of those maxima.
"""

from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np


def time_cpu(fn: Callable[[], object], iters: int) -> np.ndarray:
    """Seconds of each of `iters` back-to-back calls: one clock read per iteration, so the loop
    adds only that read to what it measures."""
    clock = time.perf_counter
    stamps = [0.0] * (iters + 1)
    stamps[0] = clock()
    for i in range(1, iters + 1):
        fn()
        stamps[i] = clock()
    return np.diff(np.asarray(stamps))


def time_cuda(fn: Callable[[], object], iters: int) -> np.ndarray:
    """Seconds of each call between CUDA events recorded on the current stream."""
    import torch

    events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    events[0].record()
    for i in range(1, iters + 1):
        fn()
        events[i].record()
    events[-1].synchronize()
    return np.array([events[i - 1].elapsed_time(events[i]) for i in range(1, iters + 1)]) / 1e3


def timer_for(device: str) -> Callable[[Callable[[], object], int], np.ndarray]:
    return time_cuda if device == "cuda" else time_cpu


def choose_iterations(per_iter_s: float, min_time: float, min_iters: int, max_iters: int) -> int:
    """Enough iterations to fill min_time, within [min_iters, max_iters]."""
    if per_iter_s <= 0:
        return max_iters
    return int(min(max_iters, max(min_iters, math.ceil(min_time / per_iter_s))))


STAT_COLUMNS = ("time_us", "time_us_mean", "time_us_min", "time_us_p95", "time_us_p99",
                "time_us_max", "time_us_stdev", "iterations")


def summarize(samples_s: np.ndarray) -> dict:
    """Statistics of per-iteration times (seconds) in microseconds; time_us is the median."""
    us = np.asarray(samples_s, dtype=np.float64) * 1e6
    return {
        "time_us": float(np.median(us)),
        "time_us_mean": float(us.mean()),
        "time_us_min": float(us.min()),
        "time_us_p95": float(np.percentile(us, 95)),
        "time_us_p99": float(np.percentile(us, 99)),
        "time_us_max": float(us.max()),
        "time_us_stdev": float(us.std(ddof=1)) if len(us) > 1 else 0.0,
        "iterations": int(len(us)),
    }


def bandwidth(size_bytes: int, time_us: float, bus_factor: float) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes), nccl-tests' definitions."""
    algbw = size_bytes / (time_us * 1e-6) / 1e9 if time_us > 0 else 0.0
    return algbw, algbw * bus_factor
