"""`commbench workload` end to end on 2 real MPI ranks: a tiny FSDP + pipeline mix measured as
commbench sweeps (one run folder per collective and group size), the cost model fitted from them,
and every figure either there or explained."""

from __future__ import annotations

import json

import pandas as pd
import pytest
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


@needs_mpirun
def test_an_uneven_moe_step_with_its_groups_at_once_on_four_ranks(job, tmp_path):
    """--spread makes the experts' all-to-all an exact all_to_allv; --concurrent measures every
    entry again with each group of its kind running it at once: tensor parallelism's consecutive
    groups, the data- and expert-parallel ones strided, as Megatron lays them out."""
    from commbench.collectives import COLLECTIVES
    from commbench.collectives.peer_traffic import PeerTraffic

    layout = {"world": 4, "gpus_per_node": 4, "tp": 2, "ep": 2}
    moe = dict(TINY, experts=2, top_k=1)
    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump(doc(model=dict(moe), parallel=dict(layout), batch={"global": 2})))
    out = tmp_path / "out"
    proc = job("workload", path, "-n", 4, "--backend", "mpi", "-a", "native", "--spread", "0.5", "--concurrent",
               "--iters", 5, "--warmup", 1, "--oversubscribe", "--out", out, "--quiet", check_rc=OK)
    runs = sorted(p.name for p in (out / "measured").iterdir())
    assert runs == ["all_reduce-2", "all_reduce-2-at-once-dp2", "all_reduce-2-at-once-tp2", "all_to_allv-2",
                    "all_to_allv-2-at-once-dp2"]
    for run in runs:
        rows = pd.read_csv(out / "measured" / run / "results.csv", keep_default_na=False)
        assert (rows.wrong == 0).all() and (rows.world_size == 2).all() and len(rows)
        assert (rows.groups == 2).all() if "at-once" in run else (rows.split == "").all()
    mix = pd.read_csv(out / "mix.csv", keep_default_na=False, na_values=[""])
    by_kind = {row.kind: row for row in mix.itertuples()}
    assert set(by_kind) == {"dp", "tp", "ep"}
    assert (by_kind["tp"].concurrent_split, by_kind["dp"].concurrent_split, by_kind["ep"].concurrent_split) == (
        "tp=2", "dp=2", "dp=2")
    ep = by_kind["ep"]
    assert ep.collective == "all_to_allv" and ep.spread == 0.5
    recorded = COLLECTIVES["all_to_allv"].counts_for(ep.size_bytes, 4, 2, PeerTraffic(spread=0.5)).size_bytes
    assert ep.measured_size_bytes == recorded  # read back at the size its blocks add up to
    for row in mix.itertuples():
        for run, figure in ((f"{row.collective}-2", row.measured_us),
                            (f"{row.collective}-2-at-once-{row.concurrent_split.replace('=', '')}", row.concurrent_us)):
            sweep = pd.read_csv(out / "measured" / run / "results.csv")
            assert figure in set(sweep[sweep.size_bytes == row.measured_size_bytes].time_us), (run, figure)
    report = json.loads((out / "workload.json").read_text())
    for t in report["totals"]:
        of = mix if t["kind"] == "all" else mix[mix.kind == t["kind"]]
        assert t["concurrent_ms"] == pytest.approx(sum(of.concurrent_step_ms))
        assert t["concurrent_ratio"] == pytest.approx(sum(of.concurrent_step_ms) / sum(of.measured_step_ms))
    assert "groups at once" in proc.stderr and "at once / alone" in proc.stderr
    html = tmp_path / "report.html"
    job("report", out, "-o", html, check_rc=OK)
    assert "groups at once" in html.read_text()
