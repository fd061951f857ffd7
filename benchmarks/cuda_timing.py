"""A CUDA kernel's time per call, for the benchmarks' GPU figures (gpu_reduce_bandwidth.py and
peer_latency.py's reference): imported by them, not run.

Two events around one call on an idle GPU time the launch as well: the start event fires at once,
the kernel only after the 15-40 us the host (Python, torch, the driver) takes to queue it. Here a
sample is a batch of K back-to-back calls between two events, K chosen so that the batch lasts
>= BATCH_S on the GPU, and queued behind a spin kernel (torch.cuda._sleep) that holds the stream
for about twice as long as the host takes to queue the batch: the GPU then finds the whole batch
queued and runs it without waiting for the host, so elapsed / K is the kernel's time per call
(with the GPU's own gap between two kernels), not the host's launch rate. A sample whose queueing
outlasted the hold (the host was preempted) is taken again with a longer hold. Where torch has no
_sleep the batch alone amortizes the first launch, and kernels shorter than their launch are
timed at the host's launch rate.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable

BATCH_S = 1e-3  # GPU time of one sample's batch
MAX_BATCH = 10_000
HOLD_MARGIN_S = 100e-6  # on top of twice the host's queueing time


def seconds_per_call(fn: Callable[[], object], samples: int = 20, warmup: int = 10,
                     batch_s: float = BATCH_S) -> float:
    """Median over `samples` batches of the GPU seconds per call of `fn`, which queues work on
    the current stream."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    spin = _Spin(torch)
    calls = max(1, warmup)
    _, host = _batch(torch, fn, calls, spin, 0.0)  # the host's time to queue one call
    gpu, host = _batch(torch, fn, calls, spin, spin.hold_for(host * calls))
    batch = int(min(MAX_BATCH, max(1, math.ceil(batch_s / max(gpu, 1e-9)))))
    hold, times = spin.hold_for(host * batch), []
    for _ in range(4 * samples):
        gpu, host = _batch(torch, fn, batch, spin, hold)
        if spin.held(host * batch, hold):
            times.append(gpu)
            if len(times) == samples:
                break
        else:
            hold = spin.hold_for(host * batch)
    return statistics.median(times) if times else gpu


def _batch(torch, fn, calls: int, spin: _Spin, hold_s: float) -> tuple[float, float]:
    """(GPU, host) seconds per call of `calls` back-to-back calls, queued behind hold_s of spin."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    spin.run(hold_s)
    t0 = time.perf_counter()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    host = time.perf_counter() - t0
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls, host / calls


class _Spin:
    """torch.cuda._sleep, calibrated in seconds; does nothing where torch lacks it."""

    def __init__(self, torch):
        self._torch = torch
        self.cycles_per_s = None
        if hasattr(torch.cuda, "_sleep"):
            cycles = 2_000_000
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            end.synchronize()
            self.cycles_per_s = cycles / max(start.elapsed_time(end) / 1e3, 1e-9)

    def hold_for(self, host_s: float) -> float:
        return 0.0 if self.cycles_per_s is None else 2 * host_s + HOLD_MARGIN_S

    def held(self, host_s: float, hold_s: float) -> bool:
        """Whether the host queued its batch within the hold (always, without a spin)."""
        return self.cycles_per_s is None or host_s < hold_s

    def run(self, seconds: float) -> None:
        if self.cycles_per_s is not None and seconds > 0:
            self._torch.cuda._sleep(int(seconds * self.cycles_per_s))
