"""`commbench run` and `commbench sweep` as the CLI wires them (commbench/cli/run.py), in-process and
with the measuring functions replaced by stand-ins (nothing is launched): a typer signature made
from the option table, which options were given, --resume refusing an option it would ignore, the
spec and launcher arguments handed to run_sweep, the OK / FAILED summary and its exit code, and the
sweep's refusals before anything runs."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Optional

import pytest
import typer

from cli_inprocess import run_cli
from synthetic_runs import write_run

from commbench import options
from commbench.cli import common
from commbench.cli import run as cli_run
from commbench.errors import BAD_INPUT, FAILED, InputError, OK
from commbench.run import api
from commbench.run.api import RunResult


# --- the signature from the table, and what was given --------------------------------------------------

def test_with_options_gives_typer_one_parameter_per_option():
    table = (options.BY_NAME["nprocs"], options.BY_NAME["label"], options.BY_NAME["graph"])
    extra = (inspect.Parameter("flag", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=bool),)

    @common.with_options(table, extra)
    def command(ctx, **values):
        return values

    params = inspect.signature(command).parameters
    assert list(params) == ["ctx", "nprocs", "label", "graph", "flag"]
    assert params["ctx"].annotation is typer.Context
    assert params["nprocs"].annotation == Optional[int] and params["label"].annotation is str
    assert params["nprocs"].default.param_decls == ("-n", "--nprocs")
    assert params["graph"].default.param_decls == ("--graph/--no-graph",) and params["graph"].default.default is True
    assert command.__annotations__["flag"] is bool


def _given(*argv) -> list[str]:
    table = tuple(options.BY_NAME[n] for n in ("nprocs", "label", "graph", "quiet"))
    seen = {}
    app = typer.Typer()

    @app.command()
    @common.with_options(table)
    def command(ctx: typer.Context, **values):
        seen["given"] = common.given(ctx, table)

    typer.main.get_command(app).main(list(argv), standalone_mode=False)
    return seen["given"]


def test_given_names_the_options_on_the_command_line_even_at_their_default():
    assert _given() == []
    assert _given("-n", "4", "--label", "") == ["nprocs", "label"]  # "" is the default, but given
    assert _given("--no-graph", "--quiet") == ["graph", "quiet"]


# --- --resume ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,flags", [("collective", "-c/--collective"), ("graph", "--graph/--no-graph"),
                                        ("in_place", "--in-place"), ("json_rows", None), ("launcher_args", None)])
def test_resume_refuses_what_would_set_the_recorded_spec(name, flags):
    if flags is None:
        cli_run._check_resume(["resume", name, "quiet", "oversubscribe"])  # taken
        return
    with pytest.raises(InputError, match=f"^--resume measures with the options recorded with the run: {flags} would "
                                         "be ignored; leave it out \\(a new run takes it\\)$"):
        cli_run._check_resume(["resume", "quiet", name, "label"])  # the first one ignored is named


def test_resume_refuses_repeat_first():
    with pytest.raises(InputError, match="^--resume takes the jobs per point recorded with the run: leave out "
                                         "--repeat$"):
        cli_run._check_resume(["label", "repeat"])


# --- `commbench run` with stand-ins for the measurement -------------------------------------------------------

@pytest.fixture
def measured(tmp_path, monkeypatch):
    """run_sweep and resume_sweep replaced: they note what they were given and return a result over a
    real folder (rows and wrong elements as the test sets them)."""
    calls = []
    folder = write_run(tmp_path / "run", [10.0])
    outcome = {"rows": [{}, {}], "skipped": [{"reason": "r"}], "wrong": 0, "out_dir": folder}

    def result():
        return RunResult(Path(outcome["out_dir"]), rows=outcome["rows"], skipped=outcome["skipped"],
                         wrong=outcome["wrong"], status="completed")

    def run_sweep(spec, launcher_args=None, on_event=None, argv=None, repeat=1):
        calls.append(("run", spec, launcher_args, repeat))
        on_event({"event": "done"})
        return result()

    def resume_sweep(out_dir, launcher_args=None, on_event=None, argv=None, oversubscribe=False):
        calls.append(("resume", out_dir, launcher_args, oversubscribe))
        return result()

    monkeypatch.setattr(api, "run_sweep", run_sweep)
    monkeypatch.setattr(api, "resume_sweep", resume_sweep)
    return calls, outcome


def test_run_hands_the_spec_and_launcher_arguments_to_run_sweep(measured):
    calls, _ = measured
    outcome = run_cli("run", "-n", "3", "--backend", "gloo", "-c", "all_gather", "--sizes", "8,1K", "--repeat", "2",
                      "--launcher-args", "--bind-to 'core x'", "--in-place", "--label", "L")
    assert outcome.code == OK, outcome.stderr
    (kind, spec, launcher_args, repeat), = calls
    assert (kind, launcher_args, repeat) == ("run", ["--bind-to", "core x"], 2)
    assert (spec.nprocs, spec.backends, spec.collectives, spec.sizes, spec.in_place, spec.label) == (
        3, ["gloo"], ["all_gather"], [8, 1024], [True], "L")


def test_the_summary_says_ok_or_failed(measured):
    calls, result = measured
    ok = run_cli("run", "-n", "2", "--backend", "gloo", "--sizes", "8")
    assert ok.code == OK
    assert ok.stderr.splitlines()[-1] == f"OK: 2 points measured, 1 skipped; results in {result['out_dir']}"
    result["wrong"] = 5
    failed = run_cli("run", "-n", "2", "--backend", "gloo", "--sizes", "8")
    assert failed.code == FAILED
    assert failed.stderr.splitlines()[-1] == (f"FAILED: 5 wrong elements; 2 points measured, 1 skipped; results in "
                                              f"{result['out_dir']}")
    # an asked-for algorithm that could not run (a kernel that did not build: a skip the ranks mark failed)
    # fails the run; a combination that cannot exist (a collective an algorithm lacks) does not
    result.update(wrong=0, rows=[{"algorithm": "native"}, {"algorithm": "ring_kernel"}],
                  skipped=[{"algorithm": "tree_kernel", "reason": "no compiler", "failed": True},
                           {"algorithm": "tree_kernel", "reason": "no compiler", "failed": True},
                           {"algorithm": "chain", "reason": "chain has no all-reduce"}])
    lost = run_cli("run", "-n", "2", "--backend", "gloo", "--sizes", "8")
    assert lost.code == FAILED
    assert lost.stderr.splitlines()[-1] == (f"FAILED: tree_kernel could not run (no compiler); 2 points measured, "
                                            f"3 skipped; results in {result['out_dir']}")
    allowed = run_cli("run", "-n", "2", "--backend", "gloo", "--sizes", "8", "--allow-skips")  # exploratory: listed, exit 0
    assert allowed.code == OK, allowed.stderr
    assert allowed.stderr.splitlines()[-2:] == ["not measured (--allow-skips): tree_kernel could not run (no compiler)",
                                                f"OK: 2 points measured, 3 skipped; results in {result['out_dir']}"]


def test_the_default_backend_says_when_it_falls_back_to_gloo(measured, monkeypatch):
    """No mpirun (a stand-in for a machine without it): --backend auto (the default) is gloo, and
    the run says so before it starts; a backend chosen by name is not remarked on."""
    calls, _ = measured
    monkeypatch.setattr(options, "find_binary", lambda binary: None)
    assert options.default_backend() == "gloo"
    note = ("note: --backend auto is gloo here: mpirun is not installed (pip install 'commbench[mpi]' for MPI, or "
            "--backend gloo to choose it)")
    auto = run_cli("run", "-n", "2", "--sizes", "8")
    assert auto.code == OK and auto.stderr.splitlines()[0] == note and calls[-1][1].backends == ["gloo"]
    named = run_cli("run", "-n", "2", "--sizes", "8", "--backend", "gloo")
    assert named.code == OK and "note:" not in named.stderr
    monkeypatch.setattr(options, "find_binary", lambda binary: "/usr/bin/" + binary)
    assert options.auto_backend_note("auto") is None and options.default_backend() == "mpi"


def test_nothing_measured_is_an_error_naming_the_reasons(measured, tmp_path):
    _, result = measured
    result.update(out_dir=tmp_path / "empty", rows=[], skipped=[{"reason": "no GPU"}, {"reason": "no GPU"},
                                                                 {"reason": "too large"}])
    outcome = run_cli("run", "-n", "2", "--backend", "gloo", "--sizes", "8")
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and outcome.stderr == (
        "commbench: error: nothing measured: all 3 points were skipped (no GPU; too large)\n")


def test_resume_passes_launcher_arguments_only_when_given_again(measured, tmp_path):
    calls, _ = measured
    assert run_cli("run", "--resume", tmp_path / "r").code == OK
    assert run_cli("run", "--resume", tmp_path / "r", "--launcher-args", "-x A", "--oversubscribe").code == OK
    assert calls == [("resume", str(tmp_path / "r"), None, False), ("resume", str(tmp_path / "r"), ["-x", "A"], True)]
    refused = run_cli("run", "--resume", tmp_path / "r", "-n", "8")
    refused.assert_clean()
    assert refused.code == BAD_INPUT and "-n/--nprocs would be ignored" in refused.stderr and len(calls) == 2


def test_bad_options_are_refused_before_run_sweep(measured):
    calls, _ = measured
    for args, message in ((["--in-place", "--both"], "choose one of --in-place, --out-of-place and --both"),
                          (["--launcher-args", "'unclosed"], "invalid launcher arguments \"'unclosed\""),
                          (["-c", "alltoallw"], "unknown collective 'alltoallw'")):
        outcome = run_cli("run", "-n", "2", "--backend", "gloo", *args)
        outcome.assert_clean()
        assert outcome.code == BAD_INPUT and message in outcome.stderr, (args, outcome.stderr)
    assert calls == []


# --- `commbench sweep` ----------------------------------------------------------------------------------------

def _suite(tmp_path, extra: str = "") -> Path:
    path = tmp_path / "s.yaml"
    path.write_text("name: s\ndefaults:\n  nprocs: 2\n  backend: gloo\n  sizes: 8\nruns:\n  - label: a\n"
                    f"  - label: b\n{extra}")
    return path


def test_a_suite_with_launcher_arguments_needs_them_allowed(tmp_path, monkeypatch):
    monkeypatch.setattr(api, "run_suite", lambda *a, **k: pytest.fail("ran"))
    suite = _suite(tmp_path, "    launcher_args: --hostfile /etc/hosts\n  - label: c\n    launcher_args: -x A\n")
    outcome = run_cli("sweep", suite, "--out", tmp_path / "o")
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and outcome.stderr == (
        f"commbench: error: {suite}: run 'b' passes the launcher arguments [--hostfile /etc/hosts] (and 1 more runs), "
        "which can start any program: check them, then add --allow-launcher-args\n")


def test_resuming_a_sweep_needs_its_folder(tmp_path):
    outcome = run_cli("sweep", _suite(tmp_path), "--resume")
    assert outcome.code == BAD_INPUT and outcome.stderr == (
        "commbench: error: --resume needs --out, the folder of the sweep to finish\n")


def test_a_sweep_reports_each_failed_run_and_fails(tmp_path, monkeypatch):
    seen = {}

    def run_suite(loaded, folder, resume=False, on_run=None, on_event=None):
        seen.update(labels=[r.label for r in loaded.runs], folder=folder, resume=resume)
        on_run("a", "running")
        return [("a", RunResult(Path(folder) / "a", wrong=0), None), ("b", None, "rank 1 died\nsecond line")]

    monkeypatch.setattr(api, "run_suite", run_suite)
    outcome = run_cli("sweep", _suite(tmp_path), "--out", tmp_path / "o", "--resume")
    assert outcome.code == FAILED
    assert seen == {"labels": ["a", "b"], "folder": str(tmp_path / "o"), "resume": True}
    assert outcome.stderr.splitlines() == ["== s / a: running", "run b failed: rank 1 died / second line",
                                           f"FAILED: 2 runs, 1 failed, 0 wrong elements; results in {tmp_path / 'o'}"]


def test_a_sweep_that_went_well_is_ok_under_its_default_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(api, "run_suite", lambda loaded, folder, **k: [("a", RunResult(Path(folder)), None)])
    outcome = run_cli("sweep", _suite(tmp_path), cwd=tmp_path)
    assert outcome.code == OK
    assert outcome.stderr.startswith("OK: 1 runs, 0 failed, 0 wrong elements; results in results/s-")


# --- options another one given makes ignored ---------------------------------------------------------------

ITERS = [(("--iters", "50", "--max-iters", "3"),
          "--iters fixes the timed calls per point: --max-iters would be ignored; give one of them"),
         (("--min-time", "2", "--iters", "5"),
          "--iters fixes the timed calls per point: --min-time would be ignored; give one of them")]
SIZES = [(("--sizes", "1K", "-f", "0.5"),
          "--sizes lists the sizes: -f/--step-factor would be ignored; give one of them"),
         (("-b", "1K", "--sizes", "8,1K"),
          "--sizes lists the sizes: -b/--min-bytes would be ignored; give one of them")]
# (ab takes no --iters/--min-time/--max-iters, workload no sizes: their mix has them)
CASES = ([(("run",), *c) for c in ITERS + SIZES] + [(("sweep", "quick"), *c) for c in ITERS + SIZES]
         + [(("workload", "llama7b_ddp_16"), *c) for c in ITERS] + [(("ab", "--args-b", "-a ring"), *c) for c in SIZES])


@pytest.mark.parametrize("command,argv,message", CASES)
def test_an_option_another_makes_ignored_is_refused(measured, monkeypatch, command, argv, message):
    calls, _ = measured
    from commbench.run import ab as run_ab
    from commbench.workload import api as workload_api

    monkeypatch.setattr(run_ab, "run_ab", lambda *a, **k: calls.append("ab"))
    monkeypatch.setattr(api, "run_suite", lambda *a, **k: calls.append("sweep"))
    monkeypatch.setattr(workload_api, "run", lambda *a, **k: calls.append("workload"))
    outcome = run_cli(*command, "-n", "2", "--backend", "gloo", *argv)
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and outcome.stderr == f"commbench: error: {message}\n"
    assert calls == []


def test_an_ab_side_may_not_give_what_it_makes_ignored(measured):
    outcome = run_cli("ab", "-n", "2", "--backend", "gloo", "--args-b", "--sizes 8 -e 1K")
    assert outcome.code == BAD_INPUT and outcome.stderr == (
        "commbench: error: --args-b: --sizes lists the sizes: -e/--max-bytes would be ignored; give one of them\n")
    assert measured[0] == []


# --- options no run they reach can use --------------------------------------------------------------------

USED = [  # (command, refused: the error, or None where it starts)
    (("run", "-a", "native", "--channels", "2"), "--channels sets the kernels' channels, and -a native runs none"),
    (("run", "-a", "native,ring_kernel", "--channels", "2"), None),
    (("run", "-a", "tree", "--ring-order", "topology"), "--ring-order topology runs -a ring as ring_topology"),
    (("sweep", "quick", "--channels", "2"), "--channels sets the kernels' channels, and -a native,ring runs none"),
    (("sweep", "quick", "--ring-order", "topology"), None),  # (its second run is ring's)
    (("ab", "--channels", "2", "--args-a", "-a native", "--args-b", "-a ring_kernel"), None),
    (("ab", "--args-b", "--channels 2 -a ring"), "--channels sets the kernels' channels, and -a native,ring runs"),
    (("workload", "llama7b_ddp_16", "--channels", "2"), "--channels sets the kernels' channels, and -a ring runs"),
]


@pytest.mark.parametrize("argv,refused", USED)
def test_an_option_no_run_can_use_is_refused(measured, monkeypatch, argv, refused):
    calls, _ = measured
    from commbench.run import ab as run_ab
    from commbench.workload import api as workload_api

    def started(what):
        def stand_in(*args, **kwargs):
            calls.append(what)
            raise typer.Exit(OK)  # (what it would measure is not the point)
        return stand_in

    monkeypatch.setattr(run_ab, "run_ab", started("ab"))
    monkeypatch.setattr(api, "run_suite", started("sweep"))
    monkeypatch.setattr(workload_api, "run", started("workload"))
    outcome = run_cli(*argv, "-n", "2", "--backend", "mpi")
    if refused is None:
        assert calls and outcome.code == OK, outcome.stderr
    else:
        outcome.assert_clean()
        assert outcome.code == BAD_INPUT and outcome.stderr.startswith(f"commbench: error: {refused}"), outcome.stderr
        assert calls == []


def test_a_deleted_current_folder_is_named_in_one_line(tmp_path):
    import subprocess
    import sys

    gone = tmp_path / "gone"
    gone.mkdir()
    proc = subprocess.run(["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "{sys.executable}" -m commbench run -n 2'],
                          capture_output=True, text=True, timeout=120, env={**__import__("os").environ, "PWD": str(gone)})
    assert proc.returncode == BAD_INPUT and proc.stderr == (
        f"commbench: error: the current folder {str(gone)!r} was deleted: cd to one that exists and run again\n")
