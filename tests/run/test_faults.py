"""A wrong result is caught; a hung or killed rank ends the whole job, keeps earlier rows."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, commbench, fault_env, load_run, needs_mpirun
from commbench.errors import BAD_INPUT, FAILED, OK


def _run_workers(out_dir) -> list[int]:
    """pids of commbench workers running for the run in out_dir (other jobs ignored)."""
    from pathlib import Path

    from commbench.folder.spec_file import decode_spec

    pids = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().decode().split("\0")
        except (OSError, ValueError):
            continue
        if "commbench.rank.worker" in args and "--spec" in args[:-1]:
            if decode_spec(args[args.index("--spec") + 1]).out_dir.startswith(str(out_dir)):
                pids.append(int(proc.name))
    return pids


def _workers_alive(out_dir) -> int:
    return len(_run_workers(out_dir))


@needs_mpirun
@pytest.mark.parametrize("backend", ["mpi", "gloo"])
def test_corrupted_element_is_caught(job, tmp_path, backend):
    if backend == "gloo":
        pytest.importorskip("torch")
    proc = commbench("run", "-n", 3, "--backend", backend, "--sizes", "1K,4K", "-c", "all_reduce,reduce_scatter",
                     "--in-place", "--iters", 2, "--out", tmp_path / "r", env=fault_env(wrong=1))
    assert proc.returncode == FAILED
    assert "FAILED" in proc.stderr
    rows, _, _ = load_run(tmp_path / "r")
    assert (rows.wrong == 1).all()  # one element on one rank, every point


@needs_mpirun
@pytest.mark.parametrize("backend,launcher", [("mpi", "mpirun"), ("gloo", "local"), ("gloo", "torchrun")])
def test_hung_rank_is_killed_after_timeout(job, tmp_path, backend, launcher):
    if backend == "gloo":
        pytest.importorskip("torch")
    start = time.monotonic()
    proc = commbench("run", "-n", 3, "--backend", backend, "--launcher", launcher, "--sizes", "1K",
                     "-c", "all_reduce", "--in-place", "--timeout", 4, "--out", tmp_path / "r",
                     env=fault_env(hang=2))
    elapsed = time.monotonic() - start
    assert proc.returncode == FAILED
    assert "timed out after 4 s in all_reduce native" in proc.stderr
    assert "none finished; the job was killed" in proc.stderr
    assert elapsed < 4 + 40  # timeout plus start-up (torchrun: 3 torch imports on 2 cores) and teardown
    print(f"hung rank ({launcher}): exit after {elapsed:.2f} s with --timeout 4")
    time.sleep(0.5)
    assert _workers_alive(tmp_path) == 0
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert meta["status"] == "failed" and "timed out" in meta["error"]


@needs_mpirun
def test_sigint_keeps_rows_and_marks_interrupted(job, tmp_path):
    out = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, "-m", "commbench", "run", "-n", "2", "--sizes", "8,16,32,64,128,256",
                             "-c", "all_reduce", "--in-place", "--min-time", "1", "--max-iters", "1000000", "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        csv = out / "results.csv"
        if csv.exists() and len(csv.read_text().splitlines()) >= 3:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "commbench: interrupted: SIGINT; rows measured so far are kept", err
    rows, _, meta = load_run(out)
    assert 2 <= len(rows) < 6 and (rows.wrong == 0).all()
    assert meta["status"] == "interrupted"
    time.sleep(0.5)
    assert _workers_alive(out) == 0
    # --resume measures exactly the missing points, each once, with their samples
    commbench("run", "--resume", out, "--quiet", check_rc=OK)
    rows, samples, meta = load_run(out)
    assert sorted(rows.point) == list(range(6)) and (rows.wrong == 0).all()
    assert dict(samples.groupby("point").size()) == dict(zip(rows.point, rows.samples))
    assert meta["status"] == "completed" and meta["resumes"][0]["points_before"] >= 2


def _start(args, out):
    return subprocess.Popen([sys.executable, "-m", "commbench", "run", *map(str, args), "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_rows(out, n, timeout=90):
    csv = out / "results.csv"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if csv.exists() and len(csv.read_text().splitlines()) > n:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {n} rows in {timeout} s")


@needs_mpirun
@pytest.mark.parametrize("backend,launcher", [pytest.param("mpi", "mpirun", marks=pytest.mark.smoke), ("gloo", "torchrun"),
                                              ("gloo", "local")])
def test_sigkill_of_one_rank_mid_sweep(job, tmp_path, backend, launcher):
    if backend == "gloo":
        pytest.importorskip("torch")
    out = tmp_path / "r"
    proc = _start(["-n", 3, "--backend", backend, "--launcher", launcher, "-c", "all_reduce", "--in-place",
                   "--sizes", "8,16,32,64,128,256,512,1K", "--min-time", 0.5, "--max-iters", 10 ** 6], out)
    _wait_rows(out, 2)
    victim = max(_run_workers(out))  # the newest worker of this run: not rank 0
    os.kill(victim, signal.SIGKILL)
    killed = time.monotonic()
    _, err = proc.communicate(timeout=60)
    teardown = time.monotonic() - killed
    assert proc.returncode == FAILED
    assert "was killed by SIGKILL in all_reduce native" in err, err[-2000:]
    assert teardown < 15
    time.sleep(0.5)
    assert _workers_alive(out) == 0
    rows, _, meta = load_run(out)
    assert len(rows) >= 2 and (rows.wrong == 0).all()
    assert meta["status"] == "failed" and "SIGKILL" in meta["error"]
    print(f"teardown after SIGKILL ({launcher}): {teardown:.2f} s")


@needs_mpirun
@pytest.mark.smoke
def test_resume_repairs_a_cut_short_folder(job, tmp_path):
    """A crash mid-write: a partial last row and samples of a point without a row."""
    out = tmp_path / "r"
    commbench("run", "-n", 2, "--sizes", "8,1K,64K", "-c", "all_reduce", "--in-place", "--iters", 4, "--batch", 1,
              "--out", out, "--quiet", check_rc=OK)
    (out / "samples.parquet").unlink()  # as if the run never finished: samples only as CSV
    csv = out / "results.csv"
    lines = csv.read_text().splitlines(keepends=True)
    csv.write_text("".join(lines[:2]) + lines[2][:25])  # row of point 1 cut mid-line, point 2 gone
    (out / "samples.csv").write_text("run_id,point,iteration,time_us\n" + "".join(
        f"x,{p},{i},1.0\n" for p in (0, 1, 2) for i in range(4)))
    commbench("run", "--resume", out, "--quiet", check_rc=OK)
    rows, samples, meta = load_run(out)
    assert sorted(rows.point) == [0, 1, 2]
    assert dict(samples.groupby("point").size()) == {0: 4, 1: 4, 2: 4}
    assert meta["resumes"][0]["points_before"] == 1


def test_resume_without_a_run_is_bad_input(job, tmp_path):
    proc = commbench("run", "--resume", tmp_path)
    assert proc.returncode == BAD_INPUT and "nothing to resume" in proc.stderr and len(proc.stderr.splitlines()) == 1


@needs_mpirun
def test_resume_keeps_the_columns_the_run_started_with(job, tmp_path):
    """A folder written by an older commbench (one column fewer) resumed by this one: the new
    rows follow the file's header, so every value stays under its own column."""
    import csv as csvlib

    out = tmp_path / "r"
    commbench("run", "-n", 2, "--sizes", "8,1K,64K", "-c", "all_reduce", "--in-place", "--iters", 4,
              "--out", out, "--quiet", check_rc=OK)
    path = out / "results.csv"
    with open(path, newline="") as f:
        rows = list(csvlib.DictReader(f))
    old_columns = [c for c in rows[0] if c != "library_choice"]
    with open(path, "w", newline="") as f:  # the first point only, under the older header
        writer = csvlib.DictWriter(f, fieldnames=old_columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerow(rows[0])
    commbench("run", "--resume", out, "--quiet", check_rc=OK)
    with open(path, newline="") as f:
        lines = list(csvlib.reader(f))
    assert lines[0] == old_columns and all(len(line) == len(old_columns) for line in lines)
    resumed, _, _ = load_run(out)
    assert sorted(resumed.size_bytes) == [8, 1024, 65536] and (resumed.wrong == 0).all()
    assert (resumed.time_us > 0).all() and set(resumed.collective) == {"all_reduce"}


def _descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            kids = [int(c) for t in os.listdir(f"/proc/{p}/task")
                    for c in open(f"/proc/{p}/task/{t}/children").read().split()]
        except OSError:
            continue
        found |= set(kids)
        todo += kids
    return found


@needs_mpirun
@pytest.mark.parametrize("backend,launcher", [("mpi", "mpirun"), ("gloo", "local")])
def test_a_killed_parent_takes_its_job_with_it(job, tmp_path, backend, launcher):
    """Issue 67, M2: SIGKILL the commbench process while a rank hangs: its launcher (mpirun's prterun) and
    every rank end within seconds instead of running on; the folder stays resumable (its run.json is
    'running' under a pid that is gone, which --resume tells from a live writer)."""
    out = tmp_path / "r"
    env = dict(os.environ, **fault_env(hang=1))
    parent = subprocess.Popen([sys.executable, "-m", "commbench", "run", "-n", "2", "--backend", backend,
                               "--launcher", launcher, "-c", "all_reduce", "--sizes", "8", "--timeout", "120",
                               "--out", str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while _workers_alive(out) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _workers_alive(out) >= 2, "the job did not start"  # (under mpirun its prterun names the worker too)
    time.sleep(1)  # rank 1 hangs, rank 0 waits on it
    job_pids = _descendants(parent.pid)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in job_pids):
        time.sleep(0.2)
    left = [p for p in job_pids if os.path.exists(f"/proc/{p}")
            and open(f"/proc/{p}/stat").read().split(")")[-1].split()[0] != "Z"]
    assert left == [] and _workers_alive(out) == 0, left
    assert json.loads((out / "run.json").read_text())["status"] == "running"  # its writer died: resumable
