"""`commbench workload` without ranks (--no-measure, the model from a real `model fit`): bad input is
one line and exit 2, and mix.csv, workload.json and the PARAM trace say what the mix is and what
the model predicts of it; a trace exported and read back through --trace gives the same mix."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from cli_inprocess import run_cli
from commbench.workload.predict import not_modelled
from workload_docs import TINY, config, doc
from workload_models import truth_us

import commbench
from commbench.analysis.model.costs import Params, Shape, time_s
from commbench.errors import BAD_INPUT, OK
from commbench.workload.config import bundled_workloads
from commbench.workload.mix import bytes_per_rank, derive

ENTRY_FIELDS = ["kind", "group", "collective", "group_size", "ranks_per_node", "size_bytes", "count", "dtype", "note"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from workload_models import fitted_model

    return fitted_model(tmp_path_factory.mktemp("model"))[0]


def write_doc(path, **sections):
    path.write_text(yaml.safe_dump(doc(**sections)))
    return path


def workload(*args) -> tuple:
    outcome = run_cli("workload", *args)
    outcome.assert_clean()
    return outcome


@pytest.mark.parametrize("args,message", [
    ([], "give a workload CONFIG"),
    (["no-such-workload"], "no workload 'no-such-workload'"),
    (["llama7b_ddp_16", "--trace", "t.json"], "not both"),
    (["llama7b_ddp_16", "--no-measure"], "--no-measure needs --model FILE"),
    (["llama7b_ddp_16", "--scale", "0"], "invalid --scale"),
    (["llama7b_ddp_16", "--scale", "nan"], "invalid --scale"),
    (["llama7b_ddp_16", "--compute-ms", "-3"], "invalid --compute-ms"),
    (["llama7b_ddp_16", "--inter", "fast"], "invalid --inter"),
    (["llama7b_ddp_16", "-d", "float32,float16"], "one dtype"),
    (["llama7b_ddp_16", "-d", "float99"], "unknown dtype"),
    (["llama7b_ddp_16", "-a", "ringg"], "did you mean ring"),
    (["llama7b_ddp_16", "-n", "0"], "at least 1"),
    (["llama7b_ddp_16", "--launcher", "none"], "--launcher none"),
    (["llama7b_ddp_16", "--model", "/nonexistent.json"], "cannot read model"),
    (["llama7b_ddp_16", "--gpus-per-node", "8"], "--gpus-per-node is for --trace"),
    (["--trace", "/nonexistent.json"], "cannot read trace '/nonexistent.json'"),
    (["llama7b_ddp_16", "--spread", "0.5"], "--spread: shapes the experts' all-to-all"),
    (["moe_ep8", "--spread", "1.5"], "invalid --spread 1.5"),
    (["--trace", "t.json", "--spread", "0"], "--spread is for a workload config"),
    (["moe_ep8", "--concurrent", "--no-measure", "--model", "m.json"], "--concurrent measures groups at once"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path):
    outcome = workload(*args, "--out", tmp_path / "out")
    assert outcome.code == BAD_INPUT and message in outcome.stderr, outcome.stderr
    assert not (tmp_path / "out").exists()  # nothing written


def test_bad_files_are_one_line(tmp_path, model):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: &m {params: 10}\n")
    outcome = workload(bad)
    assert outcome.code == BAD_INPUT and "not accepted in a workload" in outcome.stderr  # the suite reader's limits
    write_doc(bad, parallel={"world": 6})
    assert "do not fill whole nodes" in workload(bad).stderr
    trace = tmp_path / "t.json"
    trace.write_text('[{"comms": "all_reduce", "in_msg_size": 4, "out_msg_size": 4, "dtype": "float", "world_size": 2}]')
    assert f"{trace}: record 0: the node layout is unknown" in workload("--trace", trace, "--no-measure", "--model",
                                                                      model).stderr  # the file named (a probe)
    trace.write_text("{")
    assert "not JSON" in workload("--trace", trace).stderr
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("")
    assert "is not empty" in workload("llama7b_ddp_16", "--out", full).stderr
    write_doc(bad, batch={"global": 12_000_000}, parallel={"dp_mode": "zero2"})  # 3 M reduce-scatters a step
    huge = workload(bad, "--out", tmp_path / "huge")
    assert huge.code == BAD_INPUT and "calls per step; a PARAM trace" in huge.stderr, huge.stderr
    assert not (tmp_path / "huge").exists()  # refused before anything was measured


def test_list_names_the_bundled_workloads():
    outcome = workload("--list")
    assert outcome.code == OK
    assert [line.split()[0] for line in outcome.stdout.splitlines()] == bundled_workloads()


def test_predicted_only_writes_the_mix_its_predictions_and_the_trace(tmp_path, model):
    path = write_doc(tmp_path / "w.yaml", parallel={"world": 8, "gpus_per_node": 4, "dp_mode": "ddp"},
                     overlap={"dp": 0.25}, batch={"global": 8})
    out, trace = tmp_path / "out", tmp_path / "trace.json"
    outcome = workload(path, "--no-measure", "--model", model, "-n", 4, "--out", out, "--param-out", trace,
                       "--compute-ms", 10)
    assert outcome.code == OK, outcome.stderr
    entries = derive(config(parallel={"world": 8, "gpus_per_node": 4, "dp_mode": "ddp"}, batch={"global": 8}))
    rows = pd.read_csv(out / "mix.csv", keep_default_na=False, na_values=[""])
    assert len(rows) == len(entries) == 2  # DDP buckets of 1 MiB, then the rest of 4 MB of fp32 gradients
    for row, e in zip(rows.itertuples(), entries):
        assert [getattr(row, f) for f in ENTRY_FIELDS] == [getattr(e, f) for f in ENTRY_FIELDS]
        assert row.bytes_per_rank_step == pytest.approx(bytes_per_rank(e))
        assert (row.backend, row.algorithm, row.measured_ranks, row.measured_size_bytes) == ("mpi", "ring", 4,
                                                                                             e.size_bytes)
        assert row.marks == "4 of its 8 ranks" and row.measured_why == "not measured: --no-measure"
        # here: the fitted model at 4 ranks of one node, all-reduce in place (DDP) = the truth it was fitted to
        assert row.predicted_here_us == pytest.approx(truth_us("all_reduce", e.size_bytes, in_place=True), rel=0.05)
        assert row.predicted_here_step_ms == pytest.approx(row.predicted_here_us * e.count / 1e3)
        # at scale: 8 ranks on 2 nodes, and a one-node fit has no inter-node α, β
        assert pd.isna(row.predicted_us) and "alpha_inter" in row.predicted_why and "--inter" in row.predicted_why
        assert pd.isna(row.predicted_low_step_ms) and row.predicted_range_why == row.predicted_why
    assert "4 of its 8 ranks" in outcome.stderr and "not measured: --no-measure" in outcome.stderr
    report = json.loads((out / "workload.json").read_text())
    assert report["commbench_version"] == commbench.__version__ and report["measured"] is None
    assert report["source"]["workload"]["parallel"]["world"] == 8 and report["model"]["source"] == model
    every = next(t for t in report["totals"] if t["kind"] == "all")
    assert every["predicted_here_ms"] == pytest.approx(rows.predicted_here_step_ms.sum())
    assert every["predicted_ms"] is None and every["predicted_missing"] == 2
    assert every["predicted_here_exposed_ms"] == pytest.approx(0.75 * every["predicted_here_ms"])  # overlap dp 0.25
    share = every["predicted_here_exposed_ms"] / (every["predicted_here_exposed_ms"] + 10)
    assert every["predicted_here_share"] == pytest.approx(share)
    assert json.loads(trace.read_text()) == json.loads((out / "param_trace.json").read_text())


def test_links_given_predict_at_scale_and_here_keeps_the_models(tmp_path, model):
    path = write_doc(tmp_path / "w.yaml", parallel={"world": 8, "gpus_per_node": 4}, batch={"global": 8})
    out = tmp_path / "out"
    assert workload(path, "--no-measure", "--model", model, "--inter", "10,5", "--intra", "100,1", "--out", out
                    ).code == OK
    rows = pd.read_csv(out / "mix.csv")
    fit = json.loads(Path(model).read_text())["fits"]["mpi"]
    params = Params.from_values({k: v for k, v in fit["params"].items() if v is not None}
                                | {"alpha_inter": 5e-6, "beta_inter": 1 / 10e9, "alpha_intra": 1e-6,
                                   "beta_intra": 1 / 100e9})
    for row in rows.itertuples():  # 2 nodes of 4, one link per rank (as model predict with --inter), no contention
        expected = time_s(params, "ring", "all_reduce", Shape(2, 4, "block", 4), row.size_bytes, in_place=True)
        assert row.predicted_us == pytest.approx(expected * 1e6, rel=1e-9)
        # the links given are the target cluster's: "here" is this machine, the model's own
        assert row.predicted_here_us == pytest.approx(truth_us("all_reduce", row.size_bytes, in_place=True), rel=0.05)


def test_predictions_carry_their_95_percent_interval_per_entry_and_per_kind(tmp_path):
    """A model fitted to noisy points: each prediction has a low and a high around it (here, and at
    scale with --inter given as exact), a kind's ends are its entries' ends added, and the table
    shows them; the exact model's interval is a point. The link between nodes is fast (100 GB/s), so
    that the steps at scale are bound by the fitted intra-node terms: where the exact link bounds a
    step its interval is rightly a point, and with 10 GB/s which bounds it moved with the fit's
    optimiser (the same points fitted on two machines)."""
    from workload_models import fitted_model

    noisy = fitted_model(tmp_path / "noisy", noise=0.05)[0]
    exact = fitted_model(tmp_path / "exact")[0]
    path = write_doc(tmp_path / "w.yaml", parallel={"world": 8, "gpus_per_node": 4, "dp_mode": "zero3"},
                     batch={"global": 8})
    for model, name in ((noisy, "noisy"), (exact, "exact")):
        out = tmp_path / f"out-{name}"
        outcome = workload(path, "--no-measure", "--model", model, "--inter", "100,1", "--compute-ms", "10",
                           "--out", out)
        rows = pd.read_csv(out / "mix.csv", keep_default_na=False, na_values=[""])
        every = next(t for t in json.loads((out / "workload.json").read_text())["totals"] if t["kind"] == "all")
        for what in ("predicted_here", "predicted"):
            low, mid, high = (rows[f"{what}{end}_step_ms"] for end in ("_low", "", "_high"))
            assert rows[f"{what}_range_why"].isna().all() and mid.notna().all()  # "" read as missing
            if name == "noisy":
                assert (low < mid).all() and (mid < high).all() and (high / low < 1.5).all(), rows
            else:
                assert low.to_numpy() == pytest.approx(mid.to_numpy(), rel=1e-6)
                assert high.to_numpy() == pytest.approx(mid.to_numpy(), rel=1e-6)
            assert every[f"{what}_low_ms"] == pytest.approx(low.sum()) and every[f"{what}_high_ms"] == pytest.approx(high.sum())
        assert every["predicted_low_share"] < every["predicted_share"] < every["predicted_high_share"] or name == "exact"
        first = rows.iloc[0]
        assert f"{first.predicted_step_ms:.4g} ({first.predicted_low_step_ms:.4g}-{first.predicted_high_step_ms:.4g})" \
            in outcome.stderr


def test_what_neither_commbench_nor_the_model_has_is_said_per_entry(tmp_path, model):
    path = write_doc(tmp_path / "w.yaml", model=dict(TINY), parallel={"world": 4, "gpus_per_node": 4, "pp": 2,
                                                                     "dp_mode": "fsdp_full"})
    out = tmp_path / "out"
    outcome = workload(path, "--no-measure", "--model", model, "-a", "ring,native,native_han", "--out", out)
    assert outcome.code == OK, outcome.stderr
    rows = pd.read_csv(out / "mix.csv", keep_default_na=False, na_values=[""])
    p2p = rows[rows.collective == "send_recv"]  # pipeline stages' send-recv: measured by the library's call only
    assert len(p2p) == 3 and (p2p.measured_why == "not measured: --no-measure").all() and p2p.predicted_us.isna().all()
    assert set(p2p.predicted_why) == {"ring has no send_recv", not_modelled("native"), not_modelled("native_han")}
    ring = rows[(rows.algorithm == "ring") & (rows.collective != "send_recv")]
    assert len(ring) == 4  # all-gather and reduce-scatter of a layer and of the embeddings
    for call in ("native", "native_han"):  # both library calls (library_calls.py), neither in the model
        own = rows[(rows.algorithm == call) & (rows.collective != "send_recv")]
        assert len(own) == 4 and own.predicted_why.str.contains(f"{call} is the library's own call").all()
    assert (ring.predicted_us > 0).all() and (ring.group_size == 2).all()  # 2 ranks of one node: no inter-node terms
    assert "ring has no send_recv" in outcome.stderr


def test_a_trace_exported_and_read_back_is_the_same_mix(tmp_path, model):
    name = "gpt3_175b_512"
    first, second = tmp_path / "a", tmp_path / "b"
    args = ("--no-measure", "--model", model, "--inter", "50,5")
    assert workload(name, *args, "--out", first).code == OK
    outcome = workload("--trace", first / "param_trace.json", *args, "--out", second)
    assert outcome.code == OK, outcome.stderr
    a, b = (pd.read_csv(d / "mix.csv").sort_values(["collective", "size_bytes", "count"]).reset_index(drop=True)
            for d in (first, second))
    assert a[ENTRY_FIELDS].equals(b[ENTRY_FIELDS])
    for column in ("predicted_here_us", "predicted_us"):
        assert a[column].equals(b[column])
    assert json.loads((second / "workload.json").read_text())["source"]["trace"] == str(first / "param_trace.json")


@pytest.mark.parametrize("which", ["model", "config"])
def test_the_param_trace_is_never_one_of_the_inputs(tmp_path, model, which):
    """Issue 67, H5: --param-out naming the --model file or the workload YAML overwrote it, exit 0."""
    import shutil

    path = write_doc(tmp_path / "w.yaml", parallel={"world": 8, "gpus_per_node": 4, "dp_mode": "ddp"},
                     batch={"global": 8})
    mine = tmp_path / "model.json"
    shutil.copyfile(model, mine)
    before = {p: p.read_bytes() for p in (path, mine)}
    target = mine if which == "model" else path
    outcome = workload(path, "--no-measure", "--model", mine, "-n", 4, "--out", tmp_path / "out", "--param-out", target)
    assert outcome.code == BAD_INPUT and outcome.stderr == (
        f"commbench: error: --param-out {str(target)!r} is one of the inputs; write somewhere else\n")
    assert {p: p.read_bytes() for p in (path, mine)} == before and not (tmp_path / "out").exists()
