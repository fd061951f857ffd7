"""The statistics of a point and nccl-tests' bandwidth definitions, shared by the ranks (rows),
the model (predicted rows) and the analysis.

An iteration's time is the maximum over ranks (the slowest rank finishes the collective); the
headline time of a point is the median of those maxima.
"""

from __future__ import annotations

import numpy as np

STAT_COLUMNS = ("time_us", "time_us_mean", "time_us_min", "time_us_p95", "time_us_p99",
                "time_us_max", "time_us_stdev", "samples")


def summarize(samples_s: np.ndarray) -> dict:
    """Statistics of per-call sample times (seconds) in microseconds; time_us is the median."""
    us = np.asarray(samples_s, dtype=np.float64) * 1e6
    return {
        "time_us": float(np.median(us)),
        "time_us_mean": float(us.mean()),
        "time_us_min": float(us.min()),
        "time_us_p95": float(np.percentile(us, 95)),
        "time_us_p99": float(np.percentile(us, 99)),
        "time_us_max": float(us.max()),
        "time_us_stdev": float(us.std(ddof=1)) if len(us) > 1 else 0.0,
        "samples": int(len(us)),
    }


def bandwidth(size_bytes: int, time_us: float, bus_factor: float) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes), nccl-tests' definitions."""
    algbw = size_bytes / (time_us * 1e-6) / 1e9 if time_us > 0 else 0.0
    return algbw, algbw * bus_factor
