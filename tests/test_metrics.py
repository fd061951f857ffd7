import numpy as np
import pytest

from commbench.metrics import bandwidth, summarize
from commbench.timers import choose_iterations, time_cpu


def test_summarize():
    s = summarize(np.array([1e-6, 2e-6, 3e-6, 4e-6, 100e-6]))
    assert s["time_us"] == pytest.approx(3.0)
    assert s["time_us_min"] == pytest.approx(1.0) and s["time_us_max"] == pytest.approx(100.0)
    assert s["time_us_mean"] == pytest.approx(22.0)
    assert s["samples"] == 5
    assert s["time_us_p95"] == pytest.approx(np.percentile([1, 2, 3, 4, 100], 95))
    assert s["time_us_stdev"] == pytest.approx(np.std([1, 2, 3, 4, 100], ddof=1))


def test_bandwidth_formula():
    algbw, busbw = bandwidth(1_000_000, 100.0, 1.5)  # 1 MB in 100 us = 10 GB/s
    assert algbw == pytest.approx(10.0) and busbw == pytest.approx(15.0)


def test_choose_iterations():
    assert choose_iterations(1e-3, 0.1, 5, 1000) == 100
    assert choose_iterations(1.0, 0.1, 5, 1000) == 5
    assert choose_iterations(1e-9, 0.1, 5, 1000) == 1000


def test_time_cpu_counts_each_call():
    calls = []
    samples, late = time_cpu(lambda: calls.append(1), 7)
    assert len(samples) == 7 and len(calls) == 7 and (samples >= 0).all() and (late == 0).all()


def test_time_cpu_batches_report_per_call_time():
    import time

    samples, _ = time_cpu(lambda: time.sleep(0.002), 3, batch=4)
    assert len(samples) == 3
    assert (samples > 0.0019).all() and (samples < 0.02).all()


def test_choose_batch():
    from commbench.timers import MAX_BATCH, choose_batch

    assert choose_batch(10e-6) == 10
    assert choose_batch(1e-3) == 1
    assert choose_batch(1e-9) == MAX_BATCH
