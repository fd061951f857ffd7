"""What produced a run, for run.json: versions, hosts, devices, collective-relevant environment
variables, command line and git revision."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from commbench.tuning import PREFIX as TUNING_PREFIX
from commbench.machine.facts import facts
import commbench
from commbench import slurm

ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_", "OMPI_MCA_", "PRTE_MCA_", "PMIX_MCA_", "MPICH_",
                "I_MPI_", "UCX_", "FI_", "CUDA_", "OMP_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT", TUNING_PREFIX)
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")
# set by the launcher inside every rank: bookkeeping, not settings
LAUNCHER_INTERNAL = ("OMPI_MCA_PREFIXES", "OMPI_MCA_cpu_type", "OMPI_MCA_initial_wdir", "OMPI_MCA_num_procs")
# commbench's own for the Open MPI jobs it starts here (commbench.run.job_folders.sm_folder): where btl/sm's files go,
# a folder of each launch under SHM_ROOT/SM_PREFIX...; not a setting (a user's own value is recorded)
SM_DIR_VARIABLE = "OMPI_MCA_btl_sm_backing_directory"
SHM_ROOT, SM_PREFIX = "/dev/shm", "commbench-sm-"


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def collective_env(env=None) -> dict:
    """Environment variables that change how collectives behave."""
    env = os.environ if env is None else env
    own = f"{SHM_ROOT}/{SM_PREFIX}"
    return {k: v for k, v in sorted(env.items())
            if (k.startswith(ENV_PREFIXES) or k in ENV_NAMES) and k not in LAUNCHER_INTERNAL
            and not (k == SM_DIR_VARIABLE and v.startswith(own))}


def git_revision() -> str | None:
    """The commbench source's git revision (with '-dirty' for local changes), if it is a checkout."""
    src = Path(commbench.__file__).resolve().parent.parent
    try:
        rev = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return rev.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def parent_info(argv: list[str]) -> dict:
    """Recorded by the process the user started, before launching."""
    return {
        "command_line": argv,
        "cwd": os.getcwd(),
        "git_revision": git_revision(),
        "launch_host": platform.node(),
        "launch_pid": os.getpid(),
        "environment": collective_env(),
        "slurm": slurm.job_facts(),  # the job it ran in (id, nodes, partition); None outside Slurm
    }


def rank_facts(device: str, local_rank: int) -> dict:
    """What each rank reports about itself (gathered to rank 0)."""
    facts = {"hostname": platform.node(), "pid": os.getpid()}
    if device == "cuda":
        try:
            import torch

            idx = torch.cuda.current_device()
            facts["gpu"] = torch.cuda.get_device_name(idx)
            facts["gpu_index"] = idx
        except Exception as exc:  # noqa: BLE001 - recorded, not fatal
            facts["gpu"] = f"unavailable: {exc}"
    return facts


def software_versions(libraries: dict) -> dict:
    import numpy

    versions = {
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "commbench": commbench.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "cpu_count": facts().cpus,
    }
    versions.update(libraries)
    torch = sys.modules.get("torch")  # imported by a run that uses it (gloo, nccl, cuda); else not imported
    if torch is not None:           # here for its version: that costs a second or more of every start
        versions.setdefault("torch", torch.__version__)
        if torch.cuda.is_available():
            versions["cuda_runtime"] = torch.version.cuda
            versions["cuda_driver"] = _driver_version()
    else:
        try:
            versions.setdefault("torch", importlib.metadata.version("torch"))
        except importlib.metadata.PackageNotFoundError:
            pass
    return versions


def _driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlSystemGetDriverVersion()
    except Exception:  # noqa: BLE001 - NVML missing is normal off GPU machines
        return None
