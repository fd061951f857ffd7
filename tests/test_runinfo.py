"""What produced a run (commbench/runinfo.py): the environment variables that change collectives
(prefixes and names kept, the launcher's bookkeeping left out, sorted), the git revision of the
source (with -dirty for changes to tracked files; None outside a checkout or without git), the
parent's and each rank's facts, the versions, and UTC times."""

import os
import platform
import subprocess
import sys
from datetime import datetime, timedelta

import pytest

import commbench
from commbench import runinfo
from commbench.machine.facts import facts


def test_collective_env_keeps_what_changes_collectives_sorted():
    env = {"NCCL_ALGO": "ring", "PATH": "/bin", "OMPI_MCA_btl": "self,vader", "OMPI_MCA_num_procs": "4",
           "OMPI_MCA_PREFIXES": "x", "CUDA_VISIBLE_DEVICES": "0,1", "OMP_NUM_THREADS": "1", "HOME": "/root",
           "UCX_TLS": "rc", "MASTER_PORT": "29500", "TORCH_NCCL_BLOCKING_WAIT": "1", "GLOO_SOCKET_IFNAME": "eth0",
           "FI_PROVIDER": "efa", "I_MPI_DEBUG": "5", "MPICH_ASYNC_PROGRESS": "1", "PRTE_MCA_x": "1",
           "PMIX_MCA_y": "2", "nccl_algo": "lowercase is another variable", "XNCCL_ALGO": "not a prefix"}
    kept = runinfo.collective_env(env)
    assert list(kept) == sorted(kept)
    assert kept == {k: env[k] for k in ("CUDA_VISIBLE_DEVICES", "FI_PROVIDER", "GLOO_SOCKET_IFNAME", "I_MPI_DEBUG",
                                        "MASTER_PORT", "MPICH_ASYNC_PROGRESS", "NCCL_ALGO", "OMPI_MCA_btl",
                                        "OMP_NUM_THREADS", "PMIX_MCA_y", "PRTE_MCA_x", "TORCH_NCCL_BLOCKING_WAIT",
                                        "UCX_TLS")}
    assert runinfo.collective_env({}) == {}


def test_collective_env_reads_the_process_environment_by_default(monkeypatch):
    monkeypatch.setenv("NCCL_COMMBENCH_TEST", "on")
    monkeypatch.setenv("OMPI_MCA_initial_wdir", "/somewhere")
    assert runinfo.collective_env()["NCCL_COMMBENCH_TEST"] == "on"
    assert "OMPI_MCA_initial_wdir" not in runinfo.collective_env()


def test_utc_now_is_iso_with_milliseconds():
    stamp = runinfo.utc_now()
    parsed = datetime.fromisoformat(stamp)
    assert parsed.utcoffset() == timedelta(0) and stamp.endswith("+00:00")
    assert len(stamp.split(".")[1]) == len("123+00:00")  # milliseconds, not microseconds


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A git repository that holds a fake commbench package: git_revision() looks there."""
    def git(*args):
        return subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, text=True, check=True).stdout

    package = tmp_path / "commbench"
    package.mkdir()
    (package / "__init__.py").write_text("")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    monkeypatch.setattr(commbench, "__file__", str(package / "__init__.py"))
    return tmp_path, git("rev-parse", "HEAD").strip()


def test_git_revision_of_a_clean_then_changed_checkout(checkout):
    root, head = checkout
    assert len(head) == 40 and runinfo.git_revision() == head
    (root / "untracked.txt").write_text("not the source")
    assert runinfo.git_revision() == head  # untracked files do not make it dirty
    (root / "commbench" / "__init__.py").write_text("changed = True\n")
    assert runinfo.git_revision() == head + "-dirty"


def test_git_revision_outside_a_checkout_or_without_git_is_none(tmp_path, monkeypatch, checkout):
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(FileNotFoundError("git")))
    assert runinfo.git_revision() is None
    monkeypatch.undo()
    outside = tmp_path.parent / f"{tmp_path.name}-plain"
    (outside / "commbench").mkdir(parents=True)
    monkeypatch.setattr(commbench, "__file__", str(outside / "commbench" / "__init__.py"))
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # no repository above it counts
    assert runinfo.git_revision() is None


def test_git_revision_gives_up_on_a_git_that_hangs(checkout, monkeypatch):
    def hang(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs.get("timeout"))

    monkeypatch.setattr(subprocess, "run", hang)
    assert runinfo.git_revision() is None


def test_parent_info(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NCCL_PROTO", "LL")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setattr(runinfo, "git_revision", lambda: "abc")
    info = runinfo.parent_info(["commbench", "run", "-n", "2"])
    assert info == {"command_line": ["commbench", "run", "-n", "2"], "cwd": str(tmp_path), "git_revision": "abc",
                    "launch_host": platform.node(), "launch_pid": os.getpid(),
                    "environment": runinfo.collective_env(), "slurm": None}
    assert info["environment"]["NCCL_PROTO"] == "LL"
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n[1-2]")
    assert runinfo.parent_info([])["slurm"]["job_id"] == "42"


def test_rank_facts_on_the_cpu_and_a_gpu_that_cannot_answer(monkeypatch):
    assert runinfo.rank_facts("cpu", 0) == {"hostname": platform.node(), "pid": os.getpid()}
    torch = pytest.importorskip("torch")

    def no_device():
        raise RuntimeError("no CUDA GPUs are available")

    monkeypatch.setattr(torch.cuda, "current_device", no_device)
    facts = runinfo.rank_facts("cuda", 0)
    assert facts["gpu"] == "unavailable: no CUDA GPUs are available" and "gpu_index" not in facts


def test_rank_facts_of_a_gpu(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"GPU {i}")
    assert runinfo.rank_facts("cuda", 3) == {"hostname": platform.node(), "pid": os.getpid(), "gpu": "GPU 3",
                                             "gpu_index": 3}


def test_software_versions_with_the_libraries_given():
    import numpy

    versions = runinfo.software_versions({"mpi_library": "Open MPI v5", "torch": "given"})
    assert versions["python"] == sys.version.split()[0] and versions["numpy"] == numpy.__version__
    assert versions["commbench"] == commbench.__version__ and versions["cpu_count"] == facts().cpus
    assert versions["mpi_library"] == "Open MPI v5"
    assert versions["torch"] == "given"  # what the ranks reported wins over this process's torch
    try:
        import torch
    except ImportError:
        return
    assert runinfo.software_versions({})["torch"] == torch.__version__
    if not torch.cuda.is_available():
        assert "cuda_runtime" not in versions and "cuda_driver" not in versions
