"""One writer per folder, with real runs (issue 43, item 2): a second `run --out`, a `run --resume`
or a second sweep while a run is writing the folder is refused in one line (exit 2) before it
launches or writes anything, and the first ends normally; a full disk and an output encoding that
cannot take the text end with run.json's status final and no temporary file left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, needs_mpirun
from commbench.errors import BAD_INPUT, FAILED, OK
from commbench.folder.lock import LOCK_NAME

# 12 s of measuring (2 s a point): the two refusals after its first row take about 1 s each here, twice that
# on a loaded CI machine, and must end before it does
LONG = ["run", "-n", "2", "-c", "all_reduce", "--in-place", "--sizes", "64K,128K,256K,512K,1M,2M", "--min-time", "2",
        "--max-iters", "1000000", "--quiet"]
TEMP_PREFIXES = (".run.json.", ".samples.", ".spec.json.")


def _cli(*args, env=None, **kwargs):
    return subprocess.run([sys.executable, "-m", "commbench", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, **(env or {})), timeout=120, check=False, **kwargs)


def _background(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "commbench", *map(str, args)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the first command ended before {path.name} appeared: {proc.communicate()}"
        assert time.monotonic() < end, f"{path} did not appear"
        time.sleep(0.05)


def _snapshot(d: Path) -> dict:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in d.iterdir()}


def _refused(proc: subprocess.CompletedProcess, fragment: str = "is being written by another commbench") -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == BAD_INPUT and len(lines) == 1 and fragment in lines[0], proc.stderr


@needs_mpirun
def test_a_second_writer_is_refused_while_a_run_writes_its_folder(job, tmp_path):
    out = tmp_path / "run"
    first = _background(*LONG, "--out", out)
    try:
        _wait_for(out / "run.json", first)  # started, before its first row: no results.csv to refuse it yet
        before = _snapshot(out)
        _refused(_cli("run", "-n", "2", "-c", "all_reduce", "--sizes", "8", "--quiet", "--out", out))
        assert {n: v for n, v in _snapshot(out).items() if n in before and n != "run.json"} == \
               {n: v for n, v in before.items() if n != "run.json"}  # the spec file for the ranks not rewritten
        _wait_for(out / "results.csv", first)
        _refused(_cli("run", "-n", "2", "-c", "all_reduce", "--sizes", "8", "--quiet", "--out", out))
        _refused(_cli("run", "--resume", out))
        assert first.poll() is None, "the first run ended before the others were refused: the test proved nothing"
        _, stderr = first.communicate(timeout=120)
    finally:
        first.kill()
    assert first.returncode == OK and "OK: 6 points measured" in stderr, stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "completed" and "resumes" not in meta
    import pandas as pd

    assert set(pd.read_csv(out / "results.csv").run_id) == {meta["run_id"]}  # one run in the folder
    # the lock is the process's: once it ended, the folder is free again (a new run is refused only for its results)
    _refused(_cli("run", "-n", "2", "-c", "all_reduce", "--sizes", "8", "--quiet", "--out", out),
             "already holds results")


@needs_mpirun
def test_a_second_sweep_or_a_run_into_a_running_sweep_is_refused(job, tmp_path):
    suite = tmp_path / "s.yaml"
    # r1 measures for 12 s (4 points, 3 s each); the refusals below take about 1 s each here, twice that on a
    # loaded CI machine. The first two need r1 still measuring (the sweep makes r2 only when r1 ends), the
    # last two only the sweep. At 1 s a point a loaded CI machine once saw r1 complete before the last one.
    suite.write_text("name: tiny\ndefaults: {nprocs: 2, collective: all_reduce, mode: in-place, sizes: [64K, 128K, "
                     "256K, 512K], min_time: 3, max_iters: 1000000}\nruns:\n  - {label: r1}\n  - {label: r2, "
                     "sizes: [8]}\n")
    out = tmp_path / "sweep"
    first = _background("sweep", suite, "--out", out, "--quiet")
    try:
        _wait_for(out / "r1" / "run.json", first)
        _refused(_cli("run", "--resume", out / "r1"))
        _refused(_cli("run", "-n", "2", "-c", "all_reduce", "--sizes", "8", "--quiet", "--out", out / "r2"))
        assert not (out / "r2").exists(), "r1 ended before the two runs were refused: the test proved nothing"
        _refused(_cli("sweep", suite, "--out", out, "--quiet"))
        _refused(_cli("sweep", suite, "--out", out, "--resume", "--quiet"))
        assert first.poll() is None, "the sweep ended before the others were refused: the test proved nothing"
        _, stderr = first.communicate(timeout=180)
    finally:
        first.kill()
    assert first.returncode == OK and "2 runs, 0 failed" in stderr, stderr


@needs_mpirun
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_ends_the_run_failed_with_no_temporary_file(job, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", disk], capture_output=True, check=False).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        with open(disk / "filler", "wb") as f:  # 16 KB left: run.json and the spec file fit, the samples do not
            f.write(b"\0" * (48 << 10))
        out = disk / "run"
        proc = _cli("run", "-n", "2", "-c", "all_reduce", "--sizes", "8,16,32,64,128", "--quiet", "--out", out)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == FAILED and len(lines) == 1 and "No space left on device" in lines[0], proc.stderr
        meta = json.loads((out / "run.json").read_text())
        assert meta["status"] == "failed" and "No space left on device" in meta["error"] and meta["end_time"]
        names = [p.name for p in out.iterdir()]
        assert not [n for n in names if n.startswith(TEMP_PREFIXES)], names
        (disk / "filler").unlink()  # room again: the run resumes where it stopped
        proc = _cli("run", "--resume", out, "--quiet")
        assert proc.returncode == OK, proc.stderr
        assert json.loads((out / "run.json").read_text())["status"] == "completed"
    finally:
        subprocess.run(["umount", "-l", disk], check=False)


@needs_mpirun
def test_an_output_encoding_that_cannot_take_the_text_escapes_it(job, tmp_path):
    """PYTHONIOENCODING=ascii (and the C locale): what the terminal cannot take (the tables' "·", the
    label) is shown escaped, the run completes, its files stay UTF-8."""
    out = tmp_path / "run"
    env = {"PYTHONIOENCODING": "ascii", "LC_ALL": "C", "LANG": "C"}
    proc = _cli("run", "-n", "2", "-c", "all_reduce", "--sizes", "8", "--label", "é·€", "--out", out, env=env)
    assert proc.returncode == OK, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert "all_reduce \\xb7 mpi" in proc.stdout + proc.stderr  # the table's title, escaped
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "completed" and meta["label"] == "é·€"
    import pandas as pd

    assert set(pd.read_csv(out / "results.csv", encoding="utf-8").label) == {"é·€"}  # files stay UTF-8
    names = [p.name for p in out.iterdir()]
    assert LOCK_NAME in names and not [n for n in names if n.startswith(TEMP_PREFIXES)], names
