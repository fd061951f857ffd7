"""Signals (commbench/interrupts.py): a deferred signal is raised when its block ends; on SIGINT,
SIGTERM or a closed stdout the promised line, with run.json's status matching what was measured
(the jobs here start real ranks: the `job` fixture)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, needs_mpirun
from commbench import interrupts


def test_a_deferred_signal_is_raised_when_the_block_ends():
    saved = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
    interrupts.install()
    try:
        reached_end = False
        with pytest.raises(KeyboardInterrupt):
            with interrupts.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)  # the handler runs here: recorded, not raised
                reached_end = True
        assert reached_end and interrupts.received() == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt):  # outside a block: at once
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(1)
        assert interrupts.received() == signal.SIGHUP
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def _interrupt_on(kind):
    def on_event(event):
        if event["event"] == kind:
            raise KeyboardInterrupt

    return on_event


@needs_mpirun
@pytest.mark.parametrize("kind,status,repeat", [("done", "completed", 1), ("row", "interrupted", 1),
                                                ("row", "interrupted", 2)])
def test_run_json_status_matches_what_was_measured_when_interrupted(job, tmp_path, kind, status, repeat):
    """An interrupt after the last row (the ranks said done) leaves a complete run complete; one
    before it marks the run interrupted, also between the jobs of --repeat (never 'running')."""
    from commbench.run.api import run_sweep
    from commbench.spec import SweepSpec

    spec = SweepSpec(backends=["mpi"], nprocs=2, collectives=["all_reduce"], sizes=[8, 64], in_place=[False],
                     iters=5, warmup=1, out_dir=str(tmp_path / "r"))
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, on_event=_interrupt_on(kind), relay=lambda line: None, repeat=repeat)
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    rows = (tmp_path / "r" / "results.csv").read_text().splitlines()[1:]
    assert meta["status"] == status, meta
    assert meta["points_measured"] == len(rows) == (2 if status == "completed" else 1)


@needs_mpirun
def test_an_interrupt_after_the_last_row_before_the_ranks_say_done_keeps_the_run_complete(job, tmp_path):
    from commbench.run.api import run_sweep
    from commbench.spec import SweepSpec

    rows = []

    def on_event(event):
        rows.extend([event] if event["event"] == "row" else [])
        if len(rows) == 2:
            raise KeyboardInterrupt

    spec = SweepSpec(backends=["mpi"], nprocs=2, collectives=["all_reduce"], sizes=[8, 64], in_place=[False],
                     iters=5, warmup=1, out_dir=str(tmp_path / "r"))
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, on_event=on_event, relay=lambda line: None)
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert (meta["status"], meta["error"], meta["points_measured"]) == ("completed", None, 2)
    assert meta["samples_file"] in ("samples.parquet", "samples.csv") and meta["skipped"] == []  # what "done" writes


@needs_mpirun
def test_a_second_interrupt_while_the_ranks_are_stopped_still_records_the_status(job, tmp_path, monkeypatch):
    from commbench.run import launch
    from commbench.run.api import run_sweep
    from commbench.spec import SweepSpec

    kill = launch.Job.kill

    def impatient_kill(job):  # the user presses Ctrl-C again while the ranks are being stopped
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        kill(job)

    monkeypatch.setattr(launch.Job, "kill", impatient_kill)
    saved = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
    interrupts.install()
    try:
        spec = SweepSpec(backends=["mpi"], nprocs=2, collectives=["all_reduce"], sizes=[8, 64], in_place=[False],
                         iters=5, warmup=1, out_dir=str(tmp_path / "r"))
        with pytest.raises(KeyboardInterrupt):
            run_sweep(spec, on_event=_interrupt_on("row"), relay=lambda line: None)
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert (meta["status"], meta["points_measured"]) == ("interrupted", 1)


def _sweep(out, *extra):
    return [sys.executable, "-m", "commbench", "run", "-n", "2", "--backend", "mpi", "-c", "all_reduce",
            "--sizes", "8,16,32,64", "--out", str(out), *extra]


@needs_mpirun
def test_sigterm_says_so_and_marks_the_run_interrupted(job, tmp_path):
    out = tmp_path / "r"
    proc = subprocess.Popen(_sweep(out, "--min-time", "2", "--max-iters", "1000000"), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out / "results.csv").exists():
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == "commbench: interrupted: SIGTERM; rows measured so far are kept"
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "interrupted" and 1 <= meta["points_measured"] < 4


@needs_mpirun
def test_a_closed_stdout_stops_the_run_with_one_line(job, tmp_path):
    """`commbench run --json | head -1`: the reader leaves after one row."""
    out = tmp_path / "r"
    proc = subprocess.Popen(_sweep(out, "--json", "--min-time", "0.5"), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    first = json.loads(proc.stdout.readline())
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert proc.returncode == 128 + signal.SIGPIPE, err
    assert err.strip().splitlines()[-1] == ("commbench: stopped: standard output was closed (broken pipe); "
                                            "rows measured so far are kept"), err
    assert "Traceback" not in err and "Exception ignored" not in err
    meta = json.loads((out / "run.json").read_text())
    assert (meta["status"], meta["error"]) == ("interrupted", "standard output was closed")
    assert first["point"] == 0 and meta["points_measured"] >= 1


@needs_mpirun
def test_a_closed_stdout_and_stderr_stop_the_run_with_exit_141(job, tmp_path):
    """`commbench run --json 2>&1 | head -1`: nowhere left to say it, the exit code still says a closed
    pipe (rich's own answer is exit 1, a failure to a CI script) and the folder says interrupted."""
    out = tmp_path / "r"
    proc = subprocess.Popen(_sweep(out, "--json", "--min-time", "0.5"), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdout.readline()
    proc.stdout.close()
    proc.wait(timeout=60)
    assert proc.returncode == 128 + signal.SIGPIPE
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"


def test_only_a_command_that_measures_says_its_rows_are_kept(monkeypatch):
    """`compare ... | head` stopped by the closed pipe has no rows to keep; `run` has."""
    from commbench.cli.app import _kept

    for argv, kept in ((["run", "-n", "2"], True), (["ab", "--sizes", "8"], True), (["workload", "x"], True),
                       (["compare", "base", "cand", "--format", "json"], False), (["sweep", "ci"], True),
                       (["report", "r"], False), (["--version"], False)):
        monkeypatch.setattr(sys, "argv", ["commbench", *argv])
        assert _kept() == ("; rows measured so far are kept" if kept else ""), argv
