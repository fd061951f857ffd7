"""Issue 20's process-wide boundary: exit codes kept apart (3 is an internal error, with the
traceback in a file), the promised line on SIGINT/SIGTERM/a closed stdout with run.json's status
matching what was measured, terminal-safe text, and outputs checked before any work."""

import json
import os
import signal
import subprocess
import sys
import time
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_inprocess import run_cli
from conftest import ROOT, needs_mpirun
from commbench import interrupts
from commbench.errors import BAD_INPUT, INTERNAL, InputError
from commbench.outputs import output_file, output_folder, write_text
from commbench.terminal import one_line, printable


# --- exit 3: an internal error is one line, its traceback in a file --------------------------------
def test_an_unexpected_error_is_exit_3_with_the_traceback_in_a_file(monkeypatch):
    import commbench.rank.machine

    def boom():
        raise ZeroDivisionError("boom\nsecond line")

    monkeypatch.setattr(commbench.rank.machine, "describe", boom)
    outcome = run_cli("topo")
    assert outcome.code == INTERNAL, outcome
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in outcome.stderr, outcome.stderr
    assert lines[0].startswith("commbench: internal error: ZeroDivisionError: boom / second line (traceback in ")
    path = lines[0].split("(traceback in ")[1].split(";")[0]
    text = open(path).read()
    os.unlink(path)
    assert "Traceback" in text and "ZeroDivisionError: boom" in text and "'topo'" in text


def test_an_os_error_is_one_line_exit_2(monkeypatch):
    import commbench.rank.machine

    def refused():
        raise PermissionError(13, "Permission denied", "/sys/x")

    monkeypatch.setattr(commbench.rank.machine, "describe", refused)
    outcome = run_cli("topo")
    assert (outcome.code, outcome.stderr) == (2, "commbench: error: Permission denied: '/sys/x'\n")


# --- signals -------------------------------------------------------------------------------------
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

    spec = SweepSpec(backends=["mpi"], nprocs=2, collectives=["all_reduce"], sizes=[8, 64], iters=5, warmup=1,
                     out_dir=str(tmp_path / "r"))
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

    spec = SweepSpec(backends=["mpi"], nprocs=2, collectives=["all_reduce"], sizes=[8, 64], iters=5, warmup=1,
                     out_dir=str(tmp_path / "r"))
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
        spec = SweepSpec(backends=["mpi"], nprocs=2, collectives=["all_reduce"], sizes=[8, 64], iters=5, warmup=1,
                         out_dir=str(tmp_path / "r"))
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


# --- text for terminals -------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(st.text())
def test_printable_leaves_no_control_or_format_character(text):
    shown = printable(text)
    assert all(c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in shown)
    if text.isprintable():
        assert shown == text
    assert "\n" not in one_line(text)


def test_printable_escapes_terminal_sequences_visibly():
    assert printable("a\x1b[31mb\x1b]8;;http://x\x07\u202ec\r") == "a\\x1b[31mb\\x1b]8;;http://x\\x07\\u202ec\\x0d"
    assert one_line("first\n  second\n\n") == "first / second"


def test_an_error_message_from_a_file_reaches_the_terminal_escaped(tmp_path):
    outcome = run_cli("compare", str(tmp_path / "no\x1b[2Jsuch"), str(tmp_path))
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and "\\x1b[2Jsuch" in outcome.stderr


# --- outputs, checked before any work --------------------------------------------------------------
def test_output_file_refuses_folders_missing_folders_unwritable_places_and_inputs(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.csv").write_text("x\n")
    for path, message in [(tmp_path, "is a folder"), (tmp_path / "missing" / "r.html", "does not exist"),
                          ("/proc/nope.txt", "cannot be written"), (run / "results.csv", "is one of the inputs"),
                          ("", "an empty file name")]:
        with pytest.raises(InputError, match=message):
            output_file(path, "-o", inputs=[run])
    assert output_file(run / "report.html", "-o", inputs=[run]) == run / "report.html"  # beside, not over
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # the probes left nothing


def test_output_folder_refuses_files_on_the_way(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(InputError, match="is a file, not a folder"):
        output_folder(tmp_path / "f")
    with pytest.raises(InputError, match="which is a file"):
        output_folder(tmp_path / "f" / "sub")
    with pytest.raises(InputError, match="cannot be written"):
        output_folder("/proc/x/y")
    assert output_folder(tmp_path / "new" / "run") == tmp_path / "new" / "run"


def test_write_text_replaces_whole_or_leaves_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    write_text(target, "old")
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(InputError, match="cannot write report .*No space left on device"):
        write_text(target, "new", "report")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


@pytest.mark.skipif(os.geteuid() != 0, reason="making device nodes needs root")
def test_a_device_is_written_in_place_never_replaced(tmp_path):
    """`compare -o /dev/null` must not turn /dev/null into a file (a rename over it would, as root)."""
    import stat

    null, full = tmp_path / "null", tmp_path / "full"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    assert write_text(output_file(null, "-o"), "discarded") == null
    with pytest.raises(InputError, match="cannot write -o .*No space left on device"):
        write_text(output_file(full, "-o"), "x", "-o")
    assert stat.S_ISCHR(null.stat().st_mode) and stat.S_ISCHR(full.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "null"]


def test_a_pipe_is_written_in_place_and_a_link_replaced_not_followed(tmp_path):
    import threading

    fifo, victim, link = tmp_path / "fifo", tmp_path / "victim", tmp_path / "link"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    write_text(output_file(fifo, "-o"), "through the pipe")
    reader.join(10)
    assert got == ["through the pipe"] and fifo.is_fifo()
    victim.write_text("someone's file")
    link.symlink_to(victim)  # e.g. planted in a folder received from someone else
    write_text(link, "new")
    assert victim.read_text() == "someone's file" and not link.is_symlink() and link.read_text() == "new"
