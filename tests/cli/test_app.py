"""Bad input: one line, exit code 2, no traceback, nothing written."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import commbench, cpu_torch_refusal, has_gpu, needs_cpu_torch
from commbench.errors import BAD_INPUT, OK

BAD = [
    (["-c", "allreduce,broadcastx"], "unknown collective 'broadcastx'"),
    (["--backend", "ucx"], "unknown backend 'ucx'"),
    (["-d", "float8"], "unknown dtype 'float8'"),
    (["-o", "xor"], "unknown op 'xor'"),
    (["-b", "1M", "-e", "1K"], "larger than max bytes"),
    (["--sizes", "12Q"], "invalid size '12Q'"),
    (["--sizes", "-1"], "invalid size '-1'"),
    (["--sizes", ""], "no sizes given"),
    (["-b", ""], "invalid size ''"),
    (["-f", "1"], "step factor"),
    (["-f", "0.5"], "step factor"),
    (["-n", "0"], "at least 1"),
    (["-n", "two"], "nprocs"),
    (["--launcher", "ssh"], "unknown launcher 'ssh'"),
    (["--device", "tpu"], "unknown device 'tpu'"),
    (["--backend", "nccl", "--device", "cpu"], "cannot run on device 'cpu'"),
    (["--backend", "mpi", "--device", "cuda"], "cannot run on device 'cuda'"),
    (["--backend", "gloo", "--device", "cuda"], "peer algorithms only"),
    (["--backend", "mpi", "--launcher", "torchrun"], "needs an MPI launcher"),
    (["--in-place", "--both"], "choose one of --in-place, --out-of-place and --both"),
    (["--launcher-args", "--x 'open"], "invalid launcher arguments"),
    (["--iters", "0"], "iteration count"),
    (["--timeout", "-1"], "timeout"),
    (["--no-such-flag"], "no-such-flag"),
    (["--emulate", "2by2"], "invalid --emulate '2by2'"),
    (["--emulate", "0x2"], "invalid --emulate '0x2'"),
    (["--emulate", "1x2", "--backend", "mpi,gloo"], "one run each"),
    (["--emulate", "2x2", "--backend", "gloo"], "-n 2 does not match --emulate 2x2"),
    (["--emulate", "1x2", "--backend", "gloo", "--link-rate", "fast"], "invalid --link-rate 'fast'"),
    (["--emulate", "1x2", "--backend", "gloo", "--ranks-per-node", "1"], "--ranks-per-node and --emulate"),
    (["--emulate", "1x2", "--backend", "gloo", "--launcher", "local"], "launches with torchrun, not 'local'"),
    (["--emulate", "40x2", "--backend", "gloo"], "at most 64"),
    (["--placement", "round-robin"], "--placement applies to emulated clusters only"),
    (["--link-rate", "100mbit"], "--link-rate applies to emulated clusters only"),  # was ignored
    (["--placement", "diagonal"], "unknown placement 'diagonal'"),
]


@pytest.mark.parametrize("args,message", BAD)
def test_bad_input_one_line_exit_2(tmp_path, args, message):
    out = tmp_path / "out"
    proc = commbench("run", "-n", 2, *args, "--out", out)
    assert proc.returncode == BAD_INPUT, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert message in lines[0] and "Traceback" not in proc.stderr
    assert not out.exists()


def test_output_path_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    for out in (f, f / "sub"):
        proc = commbench("run", "-n", 2, "--out", out)
        assert proc.returncode == BAD_INPUT and "is a file" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(shutil.which("srun") is not None, reason="srun is installed here")
def test_launcher_not_installed(tmp_path):
    proc = commbench("run", "-n", 2, "--backend", "mpi", "--launcher", "srun", "--out", tmp_path / "o")
    assert proc.returncode == BAD_INPUT
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "launcher binary 'srun' is not installed" in proc.stderr
    assert not (tmp_path / "o").exists()


@needs_cpu_torch
def test_resume_checks_the_backend_again(job, tmp_path):
    """A cut-short CUDA run carried to a machine whose torch is a CPU build: --resume refuses it the
    way a new run is refused, and writes nothing."""
    out = tmp_path / "o"
    commbench("run", "-n", 1, "--backend", "gloo", "--sizes", "1K", "-c", "all_reduce", "--in-place", "--iters", 2,
              "--out", out, "--quiet", check_rc=OK)
    meta = json.loads((out / "run.json").read_text())
    meta["spec"].update(device="cuda", backends=["nccl"])
    meta["status"] = "interrupted"
    (out / "run.json").write_text(json.dumps(meta))
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    proc = commbench("run", "--resume", out)
    assert proc.returncode == BAD_INPUT, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"commbench: error: {cpu_torch_refusal()}"]
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_a_full_standard_output_is_named_in_one_line(tmp_path):
    """`commbench topo --json > /dev/full`: the write fails with ENOSPC and no file name; the line says
    it was standard output."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "commbench", "topo", "--json"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == BAD_INPUT, proc.stderr
    said = "commbench: error: cannot write standard output: No space left on device"
    assert proc.stderr.strip().splitlines() == [said]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_a_run_whose_standard_output_fills_stops_keeping_its_rows_and_blames_stdout(job, tmp_path):
    """`run --json > /dev/full` (issue 67, M4): the first row is on disk before it is shown; showing it fails,
    the job is stopped as for a closed pipe, run.json says why, and the line names standard output, never
    the results folder, which stays resumable."""
    out = tmp_path / "r"
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "commbench", "run", "-n", "2", "--backend", "gloo", "--sizes",
                               "8,16", "-c", "all_reduce", "--in-place", "--iters", "3", "--json", "--out", str(out)],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == BAD_INPUT, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == ("commbench: error: cannot write standard output: No space left on "
                                                    "device; rows measured so far are kept")
    meta = json.loads((out / "run.json").read_text())
    assert (meta["status"], meta["error"]) == ("interrupted", "standard output could not be written (no space left on device)")
    assert len((out / "results.csv").read_text().splitlines()) == 2  # the header and the row shown first


def test_a_closed_standard_output_is_refused_before_any_work(job, tmp_path):
    """`commbench run >&-` (issue 67, M3): Python starts without sys.stdout; one line, exit 2, nothing made."""
    proc = subprocess.run([sys.executable, "-m", "commbench", "run", "-n", "2", "--sizes", "8", "--out",
                           str(tmp_path / "r")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=120, preexec_fn=lambda: os.close(1))
    assert proc.returncode == BAD_INPUT, proc.stderr
    assert proc.stderr.strip().splitlines() == ["commbench: error: standard output is closed: give the command a "
                                                "file (or /dev/null) to write to"]
    assert not (tmp_path / "r").exists()


def test_version_and_help():
    import commbench as pkg

    assert commbench("--version", check_rc=OK).stdout.strip() == f"commbench {pkg.__version__}"
    help_text = commbench("run", "--help", check_rc=OK).stdout
    for flag in ("--collective", "--backend", "--min-bytes", "--max-bytes", "--step-factor", "--sizes", "--dtype",
                 "--op", "--in-place", "--out-of-place", "--both", "--nprocs", "--launcher", "--device", "--warmup",
                 "--iters", "--min-time", "--timeout", "--out", "--label", "--quiet", "--json", "--power", "--nccl-tuning"):
        assert flag in help_text


@needs_cpu_torch
@pytest.mark.parametrize("args", [["--backend", "nccl"], ["--backend", "gloo", "-a", "peer_oneshot"]])
def test_cuda_with_a_cpu_build_of_torch(tmp_path, args):
    """The ranks run this same Python: a CPU build of torch is refused before anything starts."""
    proc = commbench("run", "-n", 2, *args, "--device", "cuda", "--out", tmp_path / "o")
    assert proc.returncode == BAD_INPUT, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"commbench: error: {cpu_torch_refusal()}"]
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(has_gpu(), reason="a GPU is visible here")
def test_a_rank_that_sees_no_gpu_says_so(monkeypatch):
    """Where the launching host has CUDA torch but a rank's host shows it no GPU."""
    from commbench.backends.torch_dist import TorchCommunicator

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(RuntimeError, match=r"--device cuda, but this rank sees no CUDA GPU on .* \(CUDA_VISIBLE_DEVICES=''\)"):
        TorchCommunicator("nccl", 0, 1, 0, 10.0, device="cuda")


def test_every_point_skipped_is_an_error(job, tmp_path):
    """A sweep that can measure nothing fails with the reasons, and says so in run.json."""
    out = tmp_path / "o"
    proc = commbench("run", "-n", 2, "--backend", "gloo", "-a", "peer_oneshot_gpuflags", "-c", "all_reduce",
                     "--sizes", "1K", "--quiet", "--out", out)
    assert proc.returncode == BAD_INPUT, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "commbench: error: nothing measured: all 2 points were skipped (peer_oneshot_gpuflags waits on its flags "
        "in a GPU kernel: it runs with --device cuda)"]
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "completed" and meta["points_measured"] == 0 and len(meta["skipped"]) == 2
    assert not (out / "results.csv").exists()


@pytest.mark.parametrize("backend,package", [("mpi", "mpi4py"), ("gloo", "torch"), ("nccl", "torch")])
def test_a_backend_whose_package_is_missing(monkeypatch, backend, package):
    import importlib.util

    from commbench.backends.communicators import missing

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == package else real(name, *a))
    extra = "mpi" if backend == "mpi" else "torch"
    assert missing(backend, "cpu") == f"backend {backend!r} needs {package}, which is not installed (pip install 'commbench[{extra}]')"
