"""--power on a real GPU (skipped without one): every row gets power and energy from NVML."""

import json

import pandas as pd
import pytest

from conftest import commbench

pytestmark = pytest.mark.gpu
pytest.importorskip("pynvml")


def test_nccl_sweep_with_energy(tmp_path):
    out = tmp_path / "run"
    commbench("run", "-n", 1, "--backend", "nccl", "--device", "cuda", "--launcher", "local", "--power",
              "-c", "all_reduce", "--sizes", "1M,64M", "--in-place", "--iters", 10, "--out", out, "--quiet", check_rc=0)
    rows = pd.read_csv(out / "results.csv")
    assert (rows.power_w_avg > 20).all() and (rows.power_w_max >= rows.power_w_avg).all()
    assert (rows.energy_j > 0).all()
    assert (rows.energy_j_per_byte == rows.energy_j / rows.size_bytes).all()
    assert json.loads((out / "run.json").read_text())["power"]["measured"] is True
