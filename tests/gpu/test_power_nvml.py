"""--power on a real GPU (skipped without one): every row gets power and energy from NVML."""

import json

import pandas as pd
import pytest

from conftest import commbench
from commbench.errors import OK

pytestmark = pytest.mark.gpu
pytest.importorskip("pynvml")


def test_nccl_sweep_with_energy(job, tmp_path):
    out = tmp_path / "run"
    commbench("run", "-n", 1, "--backend", "nccl", "--device", "cuda", "--launcher", "local", "--power",
              "-c", "all_reduce", "--sizes", "1M,64M", "--in-place", "--iters", 10, "--out", out, "--quiet", check_rc=OK)
    rows = pd.read_csv(out / "results.csv")
    # the average is the energy counter's (steps of ~100 ms over a >= 1 s window), the peak a sample
    assert (rows.power_w_avg > 20).all() and (rows.power_w_max >= 0.9 * rows.power_w_avg).all()
    assert (rows.energy_j > 0).all()
    # the CSV keeps each figure to its own printed precision: equal to rounding, not bit for bit
    assert rows.energy_j_per_byte.to_numpy() == pytest.approx((rows.energy_j / rows.size_bytes).to_numpy(), rel=1e-6)
    assert json.loads((out / "run.json").read_text())["power"]["measured"] is True
