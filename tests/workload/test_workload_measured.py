"""`commbench workload` end to end on 2 real MPI ranks: a tiny FSDP + pipeline mix measured as
commbench sweeps (one run folder per collective and group size), the cost model fitted from them,
and every figure either there or explained."""

from __future__ import annotations

import json

import pandas as pd
import yaml
from conftest import needs_mpirun
from workload_docs import TINY, config, doc

from commbench.errors import OK
from commbench.workload.mix import derive

LAYOUT = {"world": 4, "gpus_per_node": 4, "pp": 2, "dp_mode": "fsdp_full"}


@needs_mpirun
def test_a_tiny_mix_measured_on_two_ranks(job, tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(doc(model=dict(TINY), parallel=dict(LAYOUT))))
    out = tmp_path / "out"
    proc = job("workload", path, "-n", 2, "--backend", "mpi", "--scale", "0.5", "--iters", 5, "--warmup", 1,
               "--out", out, "--quiet", "--compute-ms", 1, check_rc=OK)
    entries = derive(config(model=dict(TINY), parallel=dict(LAYOUT)))
    assert {e.collective for e in entries} == {"all_gather", "reduce_scatter", "send_recv"}
    runs = sorted(p.name for p in (out / "measured").iterdir())
    assert runs == ["all_gather-2", "reduce_scatter-2"]  # one sweep per collective and group size
    for run in runs:
        rows = pd.read_csv(out / "measured" / run / "results.csv")
        assert (rows.world_size == 2).all() and (rows.wrong == 0).all() and (rows.algorithm == "ring").all()
        assert len(rows) >= 6  # the entries' sizes and the calibration ladder
    mix = pd.read_csv(out / "mix.csv", keep_default_na=False, na_values=[""])
    assert len(mix) == len(entries)
    measured = mix[mix.collective != "send_recv"]
    for row in measured.itertuples():
        assert row.measured_ranks == 2 and row.group_size == 2 and pd.isna(row.marks)  # nothing capped or shrunk
        assert row.measured_size_bytes == max(8, round(row.size_bytes * 0.5 / 8) * 8)  # whole floats for 2 ranks
        assert row.measured_us > 0 and row.measured_step_ms == row.measured_us * row.count / 1e3
        sweep = pd.read_csv(out / "measured" / f"{row.collective}-2" / "results.csv")
        assert row.measured_us in set(sweep[(sweep.size_bytes == row.measured_size_bytes)].time_us)
    p2p = mix[mix.collective == "send_recv"]
    assert (p2p.measured_why == "not measured: ring has no send_recv (-a native measures the library's call)").all()
    assert p2p.measured_us.isna().all()
    for what in ("measured", "predicted_here", "predicted"):  # every figure there, or why not
        assert (mix[f"{what}_us"].notna() | (mix[f"{what}_why"].str.len() > 0)).all()
    report = json.loads((out / "workload.json").read_text())
    assert report["model"]["groups"] == ["mpi"] and report["model"]["source"].startswith("fitted from")
    assert report["measured"]["runs"] == runs and report["measured"]["wrong"] == 0
    assert report["measured"]["calibration_ladder"] is True
    every = next(t for t in report["totals"] if t["kind"] == "all")
    assert every["measured_ms"] == sum(measured.measured_step_ms) and every["measured_missing"] == len(p2p)
    assert "measured" in proc.stderr and "ring has no send_recv" in proc.stderr
    assert "OK: " in proc.stderr
