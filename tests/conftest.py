import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def commbench(*args, env=None, timeout=600, check_rc=None):
    """Run the real CLI in a subprocess; returns CompletedProcess (text)."""
    proc = subprocess.run([sys.executable, "-m", "commbench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})), cwd=ROOT)
    if check_rc is not None:
        assert proc.returncode == check_rc, f"rc={proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc


def has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="no NVIDIA GPU visible on this machine")
    if not has_gpu():
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


def _mpirun_missing() -> bool:
    from commbench.run.launch import find_binary

    return find_binary("mpirun") is None


# CI installs MPI, so there a missing mpirun is a failure, not a skip
needs_mpirun = pytest.mark.skipif(_mpirun_missing() and not os.environ.get("CI"), reason="mpirun is not installed")


def _torch_is_a_gpu_build() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.version.cuda is not None or getattr(torch.version, "hip", None) is not None


# tests of what a CPU build of torch refuses (CI installs one)
needs_cpu_torch = pytest.mark.skipif(_torch_is_a_gpu_build(), reason="this torch is a CUDA build")


def cpu_torch_refusal() -> str:
    """What `--device cuda` with this (CPU) build of torch is refused with."""
    import torch

    return f"--device cuda needs a CUDA build of torch; this one ({torch.__version__}) is built without CUDA"


@pytest.fixture(scope="session")
def slurm():
    """A live one-node Slurm for the whole session (tests/slurm_cluster.py: installed as root with
    apt-get where missing), or a skip with the reason; stopped at the end."""
    import slurm_cluster

    reason = slurm_cluster.unavailable()
    if reason:
        pytest.skip(reason)
    cluster = slurm_cluster.start()  # installed but not starting is a failure, not a skip
    yield cluster
    slurm_cluster.stop(cluster)


def load_run(out: Path):
    import pandas as pd

    from commbench.analysis.load import read_samples

    return pd.read_csv(out / "results.csv"), read_samples(out), json.loads((out / "run.json").read_text())


@pytest.fixture(scope="session")
def slow_mpi(tmp_path_factory):
    """benchmarks/slow_mpi.c built (LD_PRELOAD: MPI collectives stretched by COMMBENCH_SLOW of their period)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from ab_gate import build_preload

    return build_preload(tmp_path_factory.mktemp("slow_mpi"))
