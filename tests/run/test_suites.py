"""Suites: validated whole before anything starts (errors name file, field, accepted values),
each run in its own folder, --resume finishes exactly what is missing."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commbench.errors import BAD_INPUT, InputError, OK
from commbench.run.suites import SUITES_DIR, load_suite
from conftest import commbench, cpu_torch_refusal, load_run, needs_cpu_torch, needs_mpirun


@pytest.mark.parametrize("name", sorted(p.stem for p in SUITES_DIR.glob("*.yaml")))
def test_bundled_suites_are_valid(name):
    suite = load_suite(name)
    assert suite.runs and len({r.label for r in suite.runs}) == len(suite.runs)


def test_repeat_is_jobs_of_one_run():
    """`repeat: N` means `run --repeat N`: one run (one folder), N jobs per point (test_repeat.py)."""
    runs = load_suite("ci").runs
    assert [(r.label, r.repeat) for r in runs] == [("native", 3), ("ring", 3)]


BAD_SUITES = [
    ("runs: [{label: a, dtype: float8}]", "runs[0] (a): unknown dtype 'float8' (accepted:"),
    ("runs: [{label: a, colour: red}]", "runs[0]: unknown field 'colour' (accepted:"),
    ("runs: [{label: a, min-time: 0.1}]", "unknown field 'min-time' (write it 'min_time': a field is run's long"),
    ("runs: [{label: a, out-of-place: true}]", "unknown field 'out-of-place' (the buffers are one field: "
                                               "mode: out-of-place)"),
    ("runs: [{label: a, nprocs: two}]", "runs[0].nprocs: expected an integer"),
    ("runs: [{label: a}, {label: a}]", "runs[1].label: 'a' is used twice"),
    ("runs: [{label: 'a/b'}]", "runs[0].label: 'a/b' must be"),
    ("runs: []", "runs must be a non-empty list"),
    ("runs: {a: 1}", "runs must be a non-empty list"),
    ("defaults: [1]\nruns: [{label: a}]", "defaults must be a mapping"),
    ("name: x\nrun: []", "unknown top-level field 'run'"),
    ("runs: [{label: a, sizes: 12Q}]", "invalid size '12Q'"),
    ("runs: [{label: a, backend: nccl}]", "cannot run on device 'cpu'"),
    ("runs: [{label: a, repeat: 0}]", "repeat: 0 must be between 1 and 100"),
    ("runs: [{label: a, mode: sideways}]", "unknown buffer mode 'sideways'"),
    ("runs: [{label: a, launcher_args: \"--x 'open\"}]", "runs[0] (a): invalid launcher arguments"),
    ("runs: [3]", "each run is a mapping"),
    ("[1, 2]", "a suite is a mapping"),
    ("runs: [{label: a\n", "not valid YAML"),
]


@pytest.mark.parametrize("text,message", BAD_SUITES)
def test_bad_suite_one_line_exit_2(tmp_path, text, message):
    f = tmp_path / "s.yaml"
    f.write_text(text)
    proc = commbench("sweep", f, "--out", tmp_path / "out")
    assert proc.returncode == BAD_INPUT, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and str(f) in lines[0], proc.stderr
    assert not (tmp_path / "out").exists()  # nothing launched, nothing written


def test_unknown_suite_name():
    proc = commbench("sweep", "no-such-suite")
    assert proc.returncode == BAD_INPUT and "bundled: algorithms, ci, cluster" in proc.stderr
    assert "did you mean" not in proc.stderr
    near = commbench("sweep", "cii")
    assert near.returncode == BAD_INPUT and near.stderr.strip().endswith("; did you mean ci?"), near.stderr


@settings(max_examples=150, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                    max_leaves=12))
def test_any_yaml_document_is_a_suite_or_one_input_error(tmp_path_factory, doc):
    import yaml

    f = tmp_path_factory.mktemp("y") / "s.yaml"
    f.write_text(yaml.safe_dump(doc))
    try:
        suite = load_suite(str(f))
    except InputError as exc:
        assert "\n" not in str(exc)
    else:
        assert suite.runs


@needs_mpirun
def test_sweep_and_resume(job, tmp_path):
    pytest.importorskip("torch")
    suite = tmp_path / "s.yaml"
    suite.write_text("name: tiny\ndefaults: {nprocs: 2, sizes: [1K, 4K], iters: 3}\nruns:\n"
                     "  - {label: mpi, backend: mpi, collective: [all_reduce, all_gather]}\n"
                     "  - {label: gloo, backend: gloo, launcher: local, mode: in-place, collective: all_reduce}\n")
    out = tmp_path / "sweep"
    commbench("sweep", suite, "--out", out, "--quiet", check_rc=OK)
    for label, n in (("mpi", 8), ("gloo", 2)):
        rows, _, meta = load_run(out / label)
        assert len(rows) == n and (rows.wrong == 0).all() and meta["label"] == label
    assert (out / "suite.yaml").read_text() == suite.read_text()
    # a second sweep into the same folder is refused; --resume keeps complete runs and redoes a lost one
    assert commbench("sweep", suite, "--out", out).returncode == BAD_INPUT
    first_id = json.loads((out / "mpi" / "run.json").read_text())["run_id"]
    import shutil

    shutil.rmtree(out / "gloo")
    proc = commbench("sweep", suite, "--out", out, "--resume", "--quiet", check_rc=OK)
    assert "mpi: already complete" in proc.stderr and "gloo: running" in proc.stderr
    assert json.loads((out / "mpi" / "run.json").read_text())["run_id"] == first_id
    rows, _, _ = load_run(out / "gloo")
    assert len(rows) == 2


@needs_cpu_torch
def test_a_run_this_python_cannot_start_stops_the_suite_first(tmp_path):
    """The bundled power suite (NCCL) with a CPU build of torch: refused before any run starts."""
    proc = commbench("sweep", "power", "--out", tmp_path / "out")
    assert proc.returncode == BAD_INPUT, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(f"power.yaml: run 'nccl': {cpu_torch_refusal()}"), lines
    assert not (tmp_path / "out").exists()


def test_a_suites_launcher_args_run_only_when_allowed(tmp_path, monkeypatch):
    """A suite is data: launcher arguments in it (which can start any program through mpirun) are
    shown and need --allow-launcher-args."""
    from cli_inprocess import run_cli
    from commbench.run import api

    suite = tmp_path / "s.yaml"
    suite.write_text("runs: [{label: a, backend: mpi, nprocs: 2, sizes: [8], launcher_args: '--mca x sh'}, {label: b}]\n")
    outcome = run_cli("sweep", suite, "--out", tmp_path / "out")
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and "run 'a' passes the launcher arguments [--mca x sh]" in outcome.stderr
    assert "add --allow-launcher-args" in outcome.stderr and not (tmp_path / "out").exists()
    started = []
    monkeypatch.setattr(api, "run_suite", lambda loaded, out, **kw: started.append(loaded.runs[0].launcher_args) or [])
    assert run_cli("sweep", suite, "--out", tmp_path / "out", "--allow-launcher-args").code == OK
    assert started == [["--mca", "x", "sh"]]
