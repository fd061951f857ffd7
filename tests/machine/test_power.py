"""--power on this machine (no GPU, and a VM shows no RAPL counters): the run completes, the power
columns stay empty and one line says why; and the window arithmetic the GPU path uses. (CPU power
read from replayed counters: tests/machine/test_cpu_power.py.)"""

import json

import pandas as pd
import pytest

from commbench.machine import cpu_power
from commbench.machine import power
from conftest import commbench, needs_mpirun
from commbench.errors import OK


@needs_mpirun
def test_power_without_counters_says_why_once(job, tmp_path):
    out = tmp_path / "run"
    here = {cpu_power.POWERCAP_ENV: str(tmp_path / "no-powercap"), cpu_power.PERF_ENV: str(tmp_path / "no-pmu")}
    proc = commbench("run", "-n", 2, "--backend", "mpi", "--power", "--sizes", "1K", "-c", "all_reduce", "--iters", 2,
                     "--out", out, env=here, check_rc=OK)
    notes = [line for line in (proc.stdout + proc.stderr).splitlines() if "power not measured" in line]
    assert len(notes) == 1 and notes[0].startswith("CPU power not measured: powercap: no ") and "perf: no perf" in notes[0]
    rows = pd.read_csv(out / "results.csv")
    assert rows.power_w_avg.isna().all() and rows.energy_j.isna().all() and (rows.wrong == 0).all()
    assert rows.cpu_power_w_avg.isna().all() and rows.cpu_energy_j.isna().all()
    meta = json.loads((out / "run.json").read_text())
    assert meta["power"]["measured"] is False and meta["power"]["cpu"]["measured"] is False
    assert meta["power"]["gpu"] == {"measured": False, "reason": "no GPU in this run (--device cpu)", "peak_source": None}


def test_window_and_summary():
    assert power.calls_for_window(0.3) == 4  # 1.2 s >= WINDOW_S
    assert power.calls_for_window(5.0) == 1
    assert power.calls_for_window(1e-6) * 1e-6 >= power.WINDOW_S
    r = power.summarize(12.5, [300.0, 310.0, 290.0, 700.0], 1.1)  # the average is the counter's, not the samples'
    assert r.energy_j == 12.5 and r.power_w_avg == pytest.approx(12.5 / 1.1) and r.power_w_max == 700.0
    still = power.summarize(0.0, [300.0, 310.0, 290.0, 700.0], 1.1)  # a counter that did not move
    assert still.power_w_avg == pytest.approx(400.0) and still.power_w_max == 700.0
    assert power.NullMeter().stop().energy_j == 0.0


def test_peak_source_of_a_job():
    """run.json's power.peak_source from every rank's meter (None: a rank that measures none)."""
    assert power.combine_sources([power.INSTANT, None, power.INSTANT]) == power.INSTANT
    assert power.combine_sources([None, power.ONE_SECOND_AVERAGE]) == power.ONE_SECOND_AVERAGE
    assert power.combine_sources([power.INSTANT, power.ONE_SECOND_AVERAGE]) == power.MIXED
    assert power.combine_sources([None, None]) is None
