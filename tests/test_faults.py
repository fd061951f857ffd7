"""A wrong result is caught; a hung or killed rank ends the whole job, keeps earlier rows."""

import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, commbench, load_run, needs_mpirun


def _workers_alive() -> int:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return sum("commbench.worker" in line for line in out.splitlines())


@needs_mpirun
@pytest.mark.parametrize("backend", ["mpi", "gloo"])
def test_corrupted_element_is_caught(tmp_path, backend):
    if backend == "gloo":
        pytest.importorskip("torch")
    proc = commbench("run", "-n", 3, "--backend", backend, "--sizes", "1K,4K", "-c", "all_reduce,reduce_scatter",
                     "--in-place", "--iters", 2, "--out", tmp_path / "r", env={"COMMBENCH_INJECT_WRONG_RANK": "1"})
    assert proc.returncode == 1
    assert "FAILED" in proc.stderr
    rows, _, _ = load_run(tmp_path / "r")
    assert (rows.wrong == 1).all()  # one element on one rank, every point


@needs_mpirun
@pytest.mark.parametrize("backend,launcher", [("mpi", "mpirun"), ("gloo", "local"), ("gloo", "torchrun")])
def test_hung_rank_is_killed_after_timeout(tmp_path, backend, launcher):
    if backend == "gloo":
        pytest.importorskip("torch")
    start = time.monotonic()
    proc = commbench("run", "-n", 3, "--backend", backend, "--launcher", launcher, "--sizes", "1K",
                     "-c", "all_reduce", "--in-place", "--timeout", 4, "--out", tmp_path / "r",
                     env={"COMMBENCH_INJECT_HANG_RANK": "2"})
    elapsed = time.monotonic() - start
    assert proc.returncode == 1
    assert "timed out in all_reduce native" in proc.stderr
    assert elapsed < 4 + 20  # timeout plus start-up and teardown
    time.sleep(0.5)
    assert _workers_alive() == 0
    _, _, meta = load_run(tmp_path / "r") if (tmp_path / "r" / "results.csv").exists() else (None, None, None)
    import json

    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert meta["status"] == "failed" and "timed out" in meta["error"]


@needs_mpirun
def test_sigint_keeps_rows_and_marks_interrupted(tmp_path):
    out = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, "-m", "commbench", "run", "-n", "2", "--sizes", "8,16,32,64,128,256",
                             "-c", "all_reduce", "--in-place", "--min-time", "1", "--max-iters", "10000000", "--out", str(out)],
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
    rows, _, meta = load_run(out)
    assert 2 <= len(rows) < 6 and (rows.wrong == 0).all()
    assert meta["status"] == "interrupted"
    time.sleep(0.5)
    assert _workers_alive() == 0
