"""`commbench sweep` (commbench/cli/run.py, commbench/cli/points.py, commbench.run.suites): its help
lists the bundled suites with what each measures, --list / --dry-run print the points and run
nothing, and run's options given on the command line replace that field in every run of the suite
(options.SWEEP_OPTIONS, options.suite_overrides)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cli_inprocess import run_cli

from commbench import options
from commbench.errors import BAD_INPUT, OK
from commbench.run import api
from commbench.run.api import RunResult
from commbench.run.suites import bundled_suites, bundled_summaries, load_suite, summary


@pytest.fixture
def suites_run(monkeypatch):
    """run_suite replaced: the suites it was handed (each run's spec), every run OK."""
    seen = []

    def run_suite(loaded, folder, **kwargs):
        seen.append(loaded)
        return [(r.label, RunResult(Path(folder) / r.label), None) for r in loaded.runs]

    monkeypatch.setattr(api, "run_suite", run_suite)
    return seen


def _suite(tmp_path, text="") -> Path:
    path = tmp_path / "s.yaml"
    path.write_text("name: s\ndescription: Two runs. The second rings.\ndefaults:\n  nprocs: 2\n  backend: gloo\n"
                    "  sizes: [8, 1K]\n  mode: out-of-place\nruns:\n  - label: a\n  - label: b\n    algorithm: ring\n"
                    + text)
    return path


def test_help_lists_every_bundled_suite_with_its_description():
    text = " ".join(run_cli("sweep", "--help").stdout.replace("│", " ").split())
    summaries = bundled_summaries()
    assert set(summaries) == set(bundled_suites()) and len(summaries) >= 5
    for name, description in summaries.items():
        assert f"{name} {' '.join(description.split())}" in text, name
    assert summaries["ci"] == "Small and steady, for regression gates."


def test_list_without_a_suite_lists_them_and_no_suite_at_all_is_one_line():
    listed = run_cli("sweep", "--list")
    assert listed.code == OK
    assert [line.split()[0] for line in listed.stdout.splitlines()] == bundled_suites()
    missing = run_cli("sweep")
    missing.assert_clean()
    assert missing.code == BAD_INPUT and "give a SUITE" in missing.stderr and "sweep --list" in missing.stderr


def test_summary_is_the_first_sentence():
    assert summary("One. Two.") == "One."
    assert summary("  No   stop\n here ") == "No stop here"


@pytest.mark.parametrize("flag", ["--dry-run", "--list"])
def test_dry_run_prints_the_points_and_runs_nothing(tmp_path, suites_run, flag):
    outcome = run_cli("sweep", _suite(tmp_path), flag, "--out", tmp_path / "o")
    assert outcome.code == OK, outcome.stderr
    assert suites_run == [] and not (tmp_path / "o").exists()
    lines = outcome.stdout.splitlines()
    assert "== a: 6 points x 1 job; 2 ranks" in outcome.stdout and "== b: 6 points x 1 job" in outcome.stdout
    rows = [line.split() for line in lines if line.startswith("  all_") or line.startswith("  reduce_")]
    assert len(rows) == 6 and rows[0] == ["all_reduce", "gloo", "native", "float32", "sum", "out-of-place", "8", "1K"]
    assert lines[-1] == "12 points in all (jobs counted)"


def test_the_bundled_ci_suite_dry_runs(suites_run):
    outcome = run_cli("sweep", "ci", "--dry-run")
    assert outcome.code == OK and suites_run == []
    assert "== native: 9 points x 3 jobs" in outcome.stdout
    assert outcome.stdout.endswith("54 points in all (jobs counted)\n")


def test_run_options_replace_the_suites_fields_in_every_run(tmp_path, suites_run):
    outcome = run_cli("sweep", _suite(tmp_path), "-n", "4", "-d", "half,float", "--in-place", "--repeat", "2",
                      "--out", tmp_path / "o")
    assert outcome.code == OK, outcome.stderr
    (loaded,) = suites_run
    runs = [(r.label, r.spec.nprocs, r.spec.dtypes, r.spec.in_place, r.repeat, r.spec.algorithms) for r in loaded.runs]
    assert runs == [("a", 4, ["float16", "float32"], [True], 2, ["native"]),
                    ("b", 4, ["float16", "float32"], [True], 2, ["ring"])]


def test_sweep_ci_n_4(suites_run):
    outcome = run_cli("sweep", "ci", "-n", "4", "--dry-run")
    assert outcome.code == OK, outcome.stderr
    assert outcome.stdout.count("; 4 ranks,") == 2


def test_a_size_range_replaces_the_suites_sizes(tmp_path):
    plain = load_suite(str(_suite(tmp_path)), options.suite_overrides({"max_bytes": "64"}, ["max_bytes"]))
    assert plain.runs[0].spec.sizes == [8, 16, 32, 64]  # the suite's sizes: list gave way to -b 8 (default) .. -e 64
    given = load_suite(str(_suite(tmp_path)), options.suite_overrides({"sizes": "4K"}, ["sizes"]))
    assert given.runs[1].spec.sizes == [4096]


def test_an_adaptive_bound_replaces_the_suites_fixed_iterations(tmp_path):
    """A suite's `iters` fixes the calls per point: --min-time or --max-iters on the command line adapt
    them instead (they would be ignored beside it); --iters keeps it."""
    path = _suite(tmp_path, "  - label: c\n    iters: 7\n")
    adapted = load_suite(str(path), options.suite_overrides({"min_time": 0.5}, ["min_time"])).runs[2].spec
    assert (adapted.iters, adapted.min_time) == (None, 0.5)
    bounded = load_suite(str(path), options.suite_overrides({"max_iters": 9}, ["max_iters"])).runs[2].spec
    assert (bounded.iters, bounded.max_iters) == (None, 9)
    assert load_suite(str(path), options.suite_overrides({"iters": 3}, ["iters"])).runs[2].spec.iters == 3
    assert load_suite(str(path)).runs[2].spec.iters == 7


def test_not_given_is_not_an_override():
    assert options.suite_overrides({"nprocs": 8, "both": False, "label": "x"}, []) == {}
    assert options.suite_overrides({"both": True, "in_place": False}, ["both"]) == {"mode": "both"}
    assert "label" not in {o.name for o in options.SWEEP_OPTIONS}


def test_a_bad_override_names_the_command_line(tmp_path, suites_run):
    outcome = run_cli("sweep", _suite(tmp_path), "-d", "flaot")
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and suites_run == []
    assert "(a), with the options given on the command line: unknown dtype 'flaot'" in outcome.stderr
    assert "did you mean float (float32)?" in outcome.stderr


def test_launcher_arguments_typed_here_need_no_confirmation(tmp_path, suites_run):
    suite = _suite(tmp_path, "    launcher_args: --hostfile /etc/hosts\n")
    refused = run_cli("sweep", suite, "--out", tmp_path / "o")
    assert refused.code == BAD_INPUT and "--allow-launcher-args" in refused.stderr and suites_run == []
    typed = run_cli("sweep", suite, "--launcher-args", "--bind-to core", "--out", tmp_path / "o")
    assert typed.code == OK, typed.stderr
    assert [r.launcher_args for r in suites_run[0].runs] == [["--bind-to", "core"]] * 2


def test_resume_takes_no_override(tmp_path, suites_run):
    outcome = run_cli("sweep", _suite(tmp_path), "--out", tmp_path / "o", "--resume", "-n", "4")
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and suites_run == []
    assert "--resume finishes the sweep with the suite's fields: -n/--nprocs would be ignored" in outcome.stderr


def test_dry_run_lists_then_refuses_what_this_machine_would(tmp_path, suites_run):
    """(a hostile probe: --dry-run approved a run of 1T on 2 ranks that the sweep refuses before starting)"""
    suite = tmp_path / "big.yaml"
    suite.write_text("name: big\ndefaults: {nprocs: 2, iters: 5, backend: gloo}\nruns: [{label: a, sizes: [1T]}]\n")
    outcome = run_cli("sweep", suite, "--dry-run")
    outcome.assert_clean(codes=(BAD_INPUT,))
    assert "== a: " in outcome.stdout and suites_run == []
    assert re.fullmatch(r"commbench: error: \S+big.yaml: run 'a': size 1T on 2 ranks of this machine needs at least "
                        r".* GB .*\n", outcome.stderr), outcome.stderr
