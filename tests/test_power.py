"""--power where there is no GPU (this machine): the run completes, the power columns stay empty
and one line says why; and the window arithmetic the GPU path uses."""

import json

import pandas as pd
import pytest

from commbench import power
from conftest import commbench, needs_mpirun


@needs_mpirun
def test_power_without_gpu_says_why_once(tmp_path):
    out = tmp_path / "run"
    proc = commbench("run", "-n", 2, "--backend", "mpi", "--power", "--sizes", "1K", "-c", "all_reduce", "--iters", 2,
                     "--out", out, check_rc=0)
    notes = [line for line in (proc.stdout + proc.stderr).splitlines() if "power not measured" in line]
    assert notes == ["power not measured: power is measured on GPUs only (--device cuda)"]
    rows = pd.read_csv(out / "results.csv")
    assert rows.power_w_avg.isna().all() and rows.energy_j.isna().all() and (rows.wrong == 0).all()
    meta = json.loads((out / "run.json").read_text())
    assert meta["power"]["measured"] is False and "GPUs only" in meta["power"]["reason"]


def test_window_and_summary():
    assert power.calls_for_window(0.3) == 4  # 1.2 s >= WINDOW_S
    assert power.calls_for_window(5.0) == 1
    assert power.calls_for_window(1e-6) * 1e-6 >= power.WINDOW_S
    r = power.summarize(12.5, [300.0, 310.0, 290.0, 700.0], 1.1)
    assert r.energy_j == 12.5 and r.power_w_avg == pytest.approx(400.0) and r.power_w_max == 700.0
    assert power.NullMeter().stop().energy_j == 0.0
