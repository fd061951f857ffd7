"""Limits of a prediction decided up front (issue 20, classes 4, 6 and 9): `model predict`'s
scale and links are bounded before any work starts, a model file is checked field by field, and
the model's outputs are checked before it prints and written whole. Property-based: model files
through the real CLI in this process (tests/cli_inprocess.py)."""

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from cli_inprocess import run_cli
from commbench.analysis.model.fit import Fit
from commbench.analysis.model.model_file import MAX_MODEL_BYTES, to_json
from commbench.analysis.model.predict import MAX_PREDICT_RANK_SIZES, MAX_PREDICT_RANKS
from commbench.errors import BAD_INPUT, OK
from limits_fixtures import FUZZ, scalar, snapshot, value


# --- model ----------------------------------------------------------------------------------------
PREDICT = ["model", "predict", "--nodes", 2, "--ranks-per-node", 2]
LINKS = ["--intra", "450,2", "--inter", "50,5"]
BAD_PREDICT = [
    (["--nodes", 100_000_000, "--ranks-per-node", 1_000_000, *LINKS],
     f"is 100000000000000 ranks; model predict takes at most {MAX_PREDICT_RANKS}"),
    (["--nodes", MAX_PREDICT_RANKS, "--ranks-per-node", 1, *LINKS, "-f", 2], f"(ranks x sizes x collectives at most {MAX_PREDICT_RANK_SIZES})"),
    ([*PREDICT[2:], *LINKS, "--links-per-node", -3], f"invalid --links-per-node -3: it must be from 1 to {MAX_PREDICT_RANKS}"),
    ([*PREDICT[2:], *LINKS, "--links-per-node", 10 ** 12], "invalid --links-per-node 1000000000000"),
    ([*PREDICT[2:], *LINKS, "--links-per-node", 0], "invalid --links-per-node 0"),
    ([*PREDICT[2:], *LINKS, "--reduce-bw", -1], "invalid --reduce-bw -1.0"),
    ([*PREDICT[2:], *LINKS, "--reduce-bw", "nan"], "invalid --reduce-bw nan"),
    ([*PREDICT[2:], *LINKS, "--reduce-bw", "inf"], "invalid --reduce-bw inf"),
    ([*PREDICT[2:], "--intra", "nan,2", "--inter", "50,5"], "invalid --intra 'nan,2'"),
    ([*PREDICT[2:], "--intra", "450,2", "--inter", "inf,5"], "invalid --inter 'inf,5'"),
    ([*PREDICT[2:], "--intra", "450,1e999", "--inter", "50,5"], "invalid --intra '450,1e999'"),
    ([*PREDICT[2:], "--intra", "-1,2", "--inter", "50,5"], "invalid --intra '-1,2'"),
    ([*PREDICT[2:], *LINKS, "-e", "2T"], "size '2T' is larger than 1T"),
    ([*PREDICT[2:], *LINKS, "-f", "nan"], "invalid step factor nan"),
]


@pytest.mark.parametrize("args,message", BAD_PREDICT, ids=range(len(BAD_PREDICT)))
def test_predict_nonsense_is_refused_up_front(tmp_path, args, message):
    outcome = run_cli("model", "predict", *args, "--out", tmp_path / "p")
    outcome.assert_clean(codes=(BAD_INPUT,))
    assert message in outcome.stderr and outcome.stdout == "", outcome.stderr
    assert not (tmp_path / "p").exists()


def _model(**change) -> dict:
    params = {"alpha_intra": 2e-6, "beta_intra": 1e-10, "alpha_inter": None, "beta_inter": None, "gamma": 1e-10,
              "mem_factor": None, "cache_bytes": None}
    fit = Fit("mpi", params, {k: 0.1 for k in params}, 12, 0.05, 0.1, 1, 2, ["ring", "tree"])
    data = to_json([fit], ["run"])
    data["fits"]["mpi"].update(change)
    return data


def test_predict_with_a_model_and_its_outputs(tmp_path):
    model = tmp_path / "model.json"
    model.write_text(json.dumps(_model()))
    args = ["model", "predict", "--nodes", 1, "--ranks-per-node", 4, "--model", model, "-e", "64K"]
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("x")
    for out, message in ((taken, "is not empty"), (model, "is a file, not a folder"), ("/proc/p", "cannot be written")):
        outcome = run_cli(*args, "--out", out)
        outcome.assert_clean(codes=(BAD_INPUT,))
        assert message in outcome.stderr and outcome.stdout == ""  # refused before anything is printed
    outcome = run_cli(*args, "--reduce-bw", 5)
    assert outcome.code == BAD_INPUT and "the model file has its own" in outcome.stderr
    run_cli(*args, "--out", tmp_path / "new" / "p").assert_clean(codes=(OK,))
    assert (tmp_path / "new" / "p" / "results.csv").exists()
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["p"]  # written whole: no temporary folder left


def test_the_slowest_prediction_reads_back(tmp_path):
    """1 TiB over the slowest links predict takes (its times past 1e10 us, which the readers once refused):
    the folder --out writes is one `report` reads."""
    args = ["--nodes", 2, "--ranks-per-node", 1, "--inter", "0.125,50", "--intra", "100,1", "-c", "all_reduce"]
    from commbench.folder.load import load_runs

    run_cli("model", "predict", *args, "--sizes", "1T", "--out", tmp_path / "p").assert_clean(codes=(OK,))
    rows, _ = load_runs([str(tmp_path / "p")])
    assert (rows.size_bytes == 1 << 40).all() and (rows.time_us > 1e10).any()
    run_cli("report", tmp_path / "p", "--output", tmp_path / "r.html").assert_clean(codes=(OK,))


@pytest.mark.parametrize("text,message", [
    ("[1, 2]", "not a commbench model file"),
    ("{\"commbench_model\": 2, \"fits\": {}}", "not a commbench model file"),
    ("[" * 100_000 + "]" * 100_000, "not JSON"),
    ("\xff\xfe", "not JSON"),
    (json.dumps(_model())[:-1] + ', "commbench_model": 1}', "key 'commbench_model' given twice in one object"),
    (json.dumps(_model(params={"gamma": float("nan")})), "field 'params' is not what `model fit` writes"),
    (json.dumps(_model(params={"gamma": -1.0})), "field 'params'"),
    (json.dumps(_model(params={"zeta": 1.0})), "field 'params'"),
    (json.dumps(_model(links_per_node=-3)), "field 'links_per_node'"),
    (json.dumps(_model(links_per_node=True)), "field 'links_per_node'"),
    (json.dumps(_model(engine=["steps"])), "field 'engine'"),
    (json.dumps(_model(engine="warp")), "field 'engine' is not what `model fit` writes ('warp')"),
    (json.dumps(_model(params={"beta_intra": 0.0})),  # infinitely fast: no machine's
     "field 'params' is not what `model fit` writes ({'beta_intra': 0.0})"),
    (json.dumps(_model(lanes=10 ** 30)), "field 'lanes'"),
    (json.dumps(_model(lanes="2")), "field 'lanes' is not what `model fit` writes ('2')"),
    (json.dumps(_model(algorithms=["ring", "bogus"])), "algorithm 'bogus' is none commbench has (a plugin's? set "
                                                       "COMMBENCH_PLUGINS"),
    (json.dumps(_model(algorithms=[3])), "field 'algorithms'"),
    (json.dumps(_model(backend="gloo")), "fit 'mpi' is of 'gloo'"),
    (json.dumps(_model(colour="red")), "unknown field 'colour'"),
    (" " * (MAX_MODEL_BYTES + 1), "larger than 1 MB"),
])
def test_a_malformed_model_file_is_one_line(tmp_path, text, message):
    model = tmp_path / "model.json"
    model.write_bytes(text.encode("latin-1") if text.startswith("\xff") else text.encode())
    outcome = run_cli("model", "predict", "--nodes", 1, "--ranks-per-node", 4, "--model", model)
    outcome.assert_clean(codes=(BAD_INPUT,))
    assert message in outcome.stderr and str(model) in outcome.stderr, outcome.stderr


junk = st.one_of(scalar, st.lists(scalar, max_size=3), st.dictionaries(st.text(max_size=12), scalar, max_size=3),
                 st.dictionaries(st.sampled_from(["alpha_intra", "beta_intra", "gamma", "x"]), scalar, max_size=4))


@FUZZ
@given(st.one_of(st.dictionaries(st.sampled_from([*Fit.__dataclass_fields__, "other"]), junk, max_size=3), value,
                 st.just("whole")), st.booleans())
def test_fuzzed_model_files_end_clean(tmp_path_factory, change, keep_marker):
    base = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    data = _model(**change) if isinstance(change, dict) else change if change != "whole" else _model()
    if isinstance(data, dict) and not keep_marker:
        data.pop("commbench_model", None)
    model = base / "model.json"
    model.write_text(json.dumps(data, allow_nan=True))
    before = snapshot(base, base / "none")
    outcome = run_cli("model", "predict", "--nodes", 1, "--ranks-per-node", 4, "--model", model, "-e", "64K", cwd=base)
    outcome.assert_clean()
    event(f"exit {outcome.code}: {outcome.stderr[18:60]}")
    if outcome.code == OK:
        assert "predicted busbw" in outcome.stdout and "nan" not in outcome.stdout.lower()
    assert snapshot(base, base / "none") == before


def test_fit_and_validate_check_their_outputs_before_fitting(tmp_path):
    """-o and --csv refused before the rows are read (the inputs here do not even exist)."""
    for args in (["fit", tmp_path / "none", "-o", "/proc/m.json"], ["validate", tmp_path / "none", "--csv", tmp_path],
                 ["fit", tmp_path / "none", "-o", tmp_path / "no" / "m.json"]):
        outcome = run_cli("model", *args)
        outcome.assert_clean(codes=(BAD_INPUT,))
        assert outcome.stderr.startswith(("commbench: error: -o ", "commbench: error: --csv ")), outcome.stderr
    outcome = run_cli("model", "validate", tmp_path, "--links-per-node", 0)
    assert outcome.code == BAD_INPUT and "invalid --links-per-node 0" in outcome.stderr
