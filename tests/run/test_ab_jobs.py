"""`commbench ab` end to end, real launches: both grains that keep two sides together (one process;
two jobs taking turns) and rounds of launches, on every launcher that runs here (mpirun, local,
torchrun; srun in test_slurm.py), a real slowdown in the timed call (an LD_PRELOAD library), the
environment reaching every rank, --python-b on a second virtual environment, a killed rank and
Ctrl-C (one line, the folder kept, nothing left running), bad input (one line, exit 2)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from commbench.errors import BAD_INPUT, FAILED, NO_VERDICT, OK
from commbench.folder.load import read_samples
from conftest import ROOT, commbench, fault_env, needs_mpirun

TINY = ["-n", "2", "--sizes", "64,64K", "--out-of-place", "--quiet"]
ARENAS = Path("/dev/shm")


def _arenas() -> set[str]:
    return {p.name for p in ARENAS.glob("commbench-ab-*")} if ARENAS.is_dir() else set()


def _ab(tmp_path, *args, rc=None, name="ab", env=None):
    out = tmp_path / name
    verdicts = tmp_path / f"{name}.json"
    proc = commbench("ab", *args, "--out", out, "--format", "json", "--output", verdicts, check_rc=rc, env=env)
    doc = json.loads(verdicts.read_text()) if verdicts.exists() else None
    return proc, out, doc


def _gate_code(doc) -> int:
    """The exit code the verdicts call for: 1 on a regression, 2 when every point is inconclusive, else 0."""
    verdicts = {p["verdict"] for p in doc["points"]}
    return FAILED if "regression" in verdicts else NO_VERDICT if verdicts <= {"inconclusive"} else OK


def _folder(out: Path):
    rows = pd.read_csv(out / "results.csv")
    return rows, read_samples(out), json.loads((out / "run.json").read_text())


def _checks_out(out: Path, doc: dict, grain: str, points: int):
    """The folder holds both sides' rows per round and the pairs' samples; run.json says how."""
    rows, samples, meta = _folder(out)
    assert meta["kind"] == "ab" and meta["status"] == "completed" and meta["ab"]["grain"] == grain
    assert set(rows.side) == {"A", "B"} and (rows.wrong == 0).all()
    assert rows.groupby(["side", "point"]).ngroups == 2 * points
    assert {"side", "round", "pair"} <= set(samples.columns) and set(samples.side) == {"A", "B"}
    assert len(doc["points"]) == points and doc["threshold"] == 0.05
    for p in doc["points"]:
        assert p["jobs"][0] == p["jobs"][1] > 0  # pairs
    return rows, samples, meta


@needs_mpirun
@pytest.mark.smoke
def test_in_process_pairs_native_and_ring_kernel_on_the_same_memory(job, tmp_path):
    """Sides that differ only in the algorithm share one launch: every rank holds both calls, both
    bound on the arena's memory, and times them turn by turn; the kernels stay exact there."""
    before = _arenas()
    proc, out, doc = _ab(tmp_path, *TINY, "-c", "all_reduce,all_gather", "--args-a", "-a native",
                         "--args-b", "-a ring_kernel", "--rounds", "2")
    assert proc.returncode == _gate_code(doc), proc.stderr  # 1 on a regression, 2 when nothing was judged
    rows, samples, meta = _checks_out(out, doc, "in-process", 4)
    assert meta["ab"]["memory"] == "arena" and _arenas() == before  # removed at the end
    assert set(rows[rows.side == "A"].algorithm) == {"native"} and set(rows[rows.side == "B"].algorithm) == {"ring_kernel"}
    assert all("native→ring_kernel" in p["title"] for p in doc["points"])
    assert meta["ab"]["sides"]["B"]["options"] == "-a ring_kernel"
    # a round's pairs: A and B alternate ABBA, each pair index once per side and round
    per_pair = samples.groupby(["point", "round", "pair", "side"]).size()
    assert (per_pair == 3).all()  # SAMPLES_PER_TURN


@needs_mpirun
@pytest.mark.smoke
def test_a_real_slowdown_of_side_b_is_a_regression_at_every_point(job, tmp_path, slow_mpi):
    """Side B's MPI calls stretched by half their period (LD_PRELOAD, both sides preloaded, only B
    slowed): two jobs take turns (another environment); every point a regression, exit 1; the
    variables reached every rank (the ranks report them, the parent checks)."""
    env = ["--env-a", f"LD_PRELOAD={slow_mpi}", "--env-b", f"LD_PRELOAD={slow_mpi}", "--env-a", "COMMBENCH_SLOW=0",
           "--env-b", "COMMBENCH_SLOW=0.5"]
    proc, out, doc = _ab(tmp_path, *TINY, "-c", "all_reduce,reduce_scatter", *env, rc=FAILED)
    _, _, meta = _checks_out(out, doc, "token", 4)
    assert meta["ab"]["memory"] == "arena"
    assert [p["verdict"] for p in doc["points"]] == ["regression"] * 4, doc["summary"]
    assert all(p["ratio"] > 1.2 and p["ci_low"] > 1.05 for p in doc["points"])
    assert {"fact": "env COMMBENCH_SLOW", "baseline": "0", "candidate": "0.5"} in doc["context"][0]["changes"]
    assert doc["exit_code"] == FAILED and meta["ab"]["sides"]["B"]["env"]["COMMBENCH_SLOW"] == "0.5"


@needs_mpirun
def test_junit_and_markdown_carry_the_verdicts(job, tmp_path, slow_mpi):
    """The formats, not the gate's reach: side B twice as slow (at 1.5x one point of two came out
    "the launches disagree" in 2 of 6 runs on the 2-core VM)."""
    env = ["--env-a", f"LD_PRELOAD={slow_mpi}", "--env-b", f"LD_PRELOAD={slow_mpi}", "--env-b", "COMMBENCH_SLOW=1.0"]
    junit = tmp_path / "ab.xml"
    commbench("ab", *TINY, "-c", "all_reduce", *env, "--out", tmp_path / "j", "--format", "junit", "--output", junit,
              check_rc=FAILED)
    text = junit.read_text()
    assert 'name="commbench ab"' in text and 'failures="2"' in text and 'type="regression"' in text
    proc = commbench("ab", *TINY, "-c", "all_reduce", "--out", tmp_path / "m", "--format", "markdown",
                     "--args-b", "-w 6", check_rc=None)
    assert proc.stdout.startswith("### commbench ab") and "| pairs |" in proc.stdout
    assert proc.returncode == (NO_VERDICT if "no verdict: none of the 2 point(s)" in proc.stderr else OK), proc.stderr


@pytest.mark.parametrize("launcher", ["local", "torchrun"])
def test_gloo_sides_take_turns_under_every_local_launcher(job, tmp_path, launcher):
    proc, out, doc = _ab(tmp_path, "-n", "2", "--sizes", "64,64K", "--in-place", "--quiet", "-c", "all_reduce",
                         "--backend", "gloo", "--launcher", launcher, "--env-b", "COMMBENCH_AB_PROBE=b", "--rounds", "3")
    assert proc.returncode == _gate_code(doc) != FAILED, proc.stderr
    _, _, meta = _checks_out(out, doc, "token", 2)
    assert meta["launcher"] == launcher and all(p["verdict"] != "regression" for p in doc["points"])


@needs_mpirun
def test_rounds_of_launches_when_asked(job, tmp_path):
    """--grain launch: per round, per block, A's launch and B's (order alternating); one pair a round."""
    proc, out, doc = _ab(tmp_path, *TINY, "-c", "all_reduce", "--env-b", "X=1", "--grain", "launch", "--rounds", "2")
    assert proc.returncode == _gate_code(doc), proc.stderr  # 1 on a regression, 2 when nothing was judged
    _, samples, meta = _checks_out(out, doc, "launch", 2)
    assert set(samples["pair"]) == {0} and set(samples["round"]) == {1, 2}
    assert all(p["jobs"] == [2, 2] for p in doc["points"])  # a pair per round
    assert "asked for" in meta["ab"]["grain_reason"]


@needs_mpirun
def test_python_b_runs_side_b_in_a_second_virtual_environment(job, tmp_path):
    """A second venv (its own python and prefix, seeing this one's packages through a .pth): side B's
    ranks run it, as run.json's facts show; the sides take turns."""
    venv = tmp_path / "venv-b"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    ours = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir() and sys.prefix in p)
    (site / "base.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    python = venv / "bin" / "python"
    proc, out, doc = _ab(tmp_path, *TINY, "-c", "all_reduce", "--python-b", python, "--rounds", "1")
    assert proc.returncode == _gate_code(doc), proc.stderr  # 1 on a regression, 2 when nothing was judged
    _, _, meta = _checks_out(out, doc, "token", 2)
    assert meta["ab"]["sides"]["B"]["python"] == str(python)
    assert meta["ab"]["sides"]["B"]["commbench_path"] == meta["ab"]["sides"]["A"]["commbench_path"]  # via the .pth
    assert meta["sides_facts"]["B"]["ranks"][0]["pid"] != meta["sides_facts"]["A"]["ranks"][0]["pid"]
    assert any("python_executable" in c["fact"] for c in doc["context"][0]["changes"])


@needs_mpirun
def test_wrong_results_on_one_side_fail(job, tmp_path):
    injected = fault_env(wrong=1)  # both sides load the injection; only side B's rank 1 has the variable
    (variable, rank), = ((k, v) for k, v in injected.items() if k != "PYTHONPATH")
    proc, out, doc = _ab(tmp_path, *TINY, "-c", "all_reduce", "--env-b", f"{variable}={rank}",
                         "--rounds", "1", rc=FAILED, env={"PYTHONPATH": injected["PYTHONPATH"]})
    rows, _, _ = _folder(out)
    assert (rows[rows.side == "A"].wrong == 0).all() and (rows[rows.side == "B"].wrong > 0).all()
    assert "FAILED" in proc.stderr and "wrong elements" in proc.stderr


@needs_mpirun
def test_a_point_only_one_side_can_run_fails_unless_allowed(job, tmp_path):
    """tree has no all-gather: side B skips that point, so the gate lacks it and fails (exit 1) with
    the point listed; --allow-missing lets the points both sides ran decide."""
    args = ["-n", "2", "--sizes", "64", "--out-of-place", "--quiet", "-c", "all_reduce,all_gather",
            "--args-a", "-a native", "--args-b", "-a tree", "--rounds", "1"]
    proc, _, doc = _ab(tmp_path, *args, rc=FAILED)
    assert [m["collective"] for m in doc["missing"]] == ["all_gather"] and doc["missing"][0]["skipped_by"] == ["B"]
    assert "tree has no all-gather" in proc.stdout + proc.stderr
    assert any("one side cannot run fail the comparison" in a for a in doc["advice"]) and doc["exit_code"] == FAILED
    _, _, doc = _ab(tmp_path, *args, "--allow-missing", name="allowed")
    assert doc["allow_missing"] is True and len(doc["missing"]) == 1 and doc["exit_code"] == int(doc["regressed"])


def _no_ranks_left(out: Path) -> bool:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return str(out) not in ps


def _start(out: Path, *args) -> subprocess.Popen:
    """`commbench ab` in the background, returned once it has measured a row."""
    proc = subprocess.Popen([sys.executable, "-m", "commbench", "ab", "-n", "2", "-c", "all_reduce", *args,
                             "--out", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out / "results.csv").exists() and proc.poll() is None:
        time.sleep(0.1)
    return proc


@needs_mpirun
def test_a_killed_rank_of_side_b_is_one_line_and_leaves_nothing(job, tmp_path):
    """Side B's rank 1 is killed mid-comparison: one line naming the side, the rank and the point,
    exit 1; the folder keeps what was measured, run.json says failed; no rank or arena is left."""
    before, out = _arenas(), tmp_path / "killed"
    proc = _start(out, "--sizes", "64,1M", "--out-of-place", "--env-b", "X=1", "--min-rounds", "300", "--rounds", "300")
    victim = json.loads((out / "run.json").read_text())["sides_facts"]["B"]["ranks"][1]["pid"]
    os.kill(victim, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == FAILED, stderr
    line = [ln for ln in stderr.splitlines() if ln.startswith("commbench: failed")]
    assert len(line) == 1 and "side B, launch pair 1: rank 1 was killed by SIGKILL in all_reduce" in line[0], stderr
    _, _, meta = _folder(out)
    assert meta["status"] == "failed" and "rank 1" in meta["error"]
    assert _arenas() == before and _no_ranks_left(out)


@needs_mpirun
def test_ctrl_c_stops_every_job_and_keeps_the_rows(job, tmp_path):
    out, before = tmp_path / "stopped", _arenas()
    proc = _start(out, "--sizes", "64", "--env-b", "X=1", "--min-rounds", "300", "--rounds", "300")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, stderr
    assert "interrupted" in stderr
    rows, _, meta = _folder(out)
    assert meta["status"] == "interrupted" and len(rows) > 0
    assert _arenas() == before and _no_ranks_left(out)


@needs_mpirun
def test_a_launcher_that_ends_before_its_ranks_connect_fails_at_once(job, tmp_path):
    """mpirun refuses its arguments and exits: the comparison fails then, naming the side and the
    exit code, instead of waiting out the start-up timeout (300 s) for ranks that will never come."""
    start = time.monotonic()
    proc, out, _ = _ab(tmp_path, *TINY, "-c", "all_reduce", "--env-b", "X=1", "--launcher-args=--no-such-mpirun-flag",
                       rc=FAILED)
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("commbench: failed")]
    assert len(line) == 1 and "its launcher ended (exit code" in line[0] and "with 0 of 2 ranks connected" in line[0]
    assert time.monotonic() - start < 60 and json.loads((out / "run.json").read_text())["status"] == "failed"


@needs_mpirun
def test_an_ab_folder_is_not_compared_resumed_but_reported_by_side(job, tmp_path):
    proc, out, doc = _ab(tmp_path, *TINY, "-c", "all_reduce", "--rounds", "1")
    for args in (["compare", out, out], ["run", "--resume", out]):
        refused = commbench(*args, check_rc=BAD_INPUT)
        assert "commbench ab" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    from commbench.folder.load import load_run

    rows, meta = load_run(out)
    assert set(rows.run) == {f"{meta['run_id']} A", f"{meta['run_id']} B"}  # each side a series of its own
    commbench("report", out, "-o", tmp_path / "r.html", check_rc=OK)


BAD = [
    (["--grain", "sideways"], "unknown grain"),
    (["--grain", "in-process", "--env-b", "X=1"], "--grain in-process is not possible: the sides' environments differ"),
    (["--args-b", "--out elsewhere"], "--out cannot differ between the sides"),
    (["--args-b", "--bogus"], "No such option"),
    (["--args-b", "'unclosed"], "--args-b"),
    (["--env-b", "NOEQUALS"], "give KEY=VALUE"),
    (["--python-b", "/nonexistent/python"], "is not a program"),
    (["--budget", "soon"], "invalid --budget"),
    (["--rounds", "0"], "invalid --rounds"),
    (["--rounds", "4", "--min-rounds", "5"], "invalid --min-rounds"),
    (["--args-b", "--sizes 64,128"], "not one each per point"),
    (["--args-b", "-a native,ring"], "not one each per point"),
    (["--launcher", "none"], "--launcher none cannot be used"),
    (["--threshold", "lots"], "invalid threshold"),
    (["--format", "yaml"], "unknown format"),
    (["--repeat", "3"], "No such option"),
    (["--args-b", "--repeat 3"], "--args-b: commbench ab takes no --repeat, for a side or both"),
    (["--args-a", "--min-time 1"], "--args-a: commbench ab takes no --min-time"),
    (["--threshold", "150%"], "invalid threshold"),
    (["--args-b", "--emulate 2x1"], "--emulate cannot differ between the sides"),
    (["--args-a", "--link-rate 2gbit"], "--link-rate cannot differ between the sides"),
    (["--emulate", "2"], "invalid --emulate"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    proc = commbench("ab", "-n", "2", "-c", "all_reduce", "--sizes", "64", "--out", tmp_path / "x", *args,
                     check_rc=BAD_INPUT)
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "x" / "results.csv").exists()


def test_a_python_without_ab_is_refused_before_anything_starts(tmp_path):
    bare = shutil.which("python3", path="/usr/bin:/usr/local/bin")
    if bare is None or subprocess.run([bare, "-c", "import numpy"], capture_output=True).returncode == OK:
        pytest.skip("no Python without commbench's packages here")
    proc = commbench("ab", "-n", "2", "-c", "all_reduce", "--sizes", "64", "--python-b", bare,
                     "--out", tmp_path / "x", check_rc=BAD_INPUT)
    assert "cannot serve commbench ab's turns" in proc.stderr and not (tmp_path / "x").exists()


@needs_mpirun
def test_a_commbench_folder_where_ab_is_run_does_not_shadow_a_sides_own(job, tmp_path):
    """python -m puts the current folder first on sys.path: run from a checkout, side A's ranks would
    import that checkout's commbench instead of their venv's (the CI recipe runs from the candidate's).
    The ranks run with PYTHONSAFEPATH, so a decoy here changes nothing."""
    decoy = tmp_path / "commbench"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the decoy in the current folder was imported')\n")
    entry = Path(sys.executable).parent / "commbench"  # the console script: its own folder, not the cwd, on sys.path
    proc = subprocess.run([str(entry), "ab", *TINY, "-c", "all_reduce", "--env-b", "X=1", "--rounds", "3",
                           "--out", str(tmp_path / "out")], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (OK, FAILED, NO_VERDICT), proc.stderr  # a verdict, or none: not this test's
    meta = json.loads((tmp_path / "out" / "run.json").read_text())
    assert meta["status"] == "completed" and str(decoy) not in meta["ab"]["sides"]["A"]["commbench_path"]
