"""A live one-node Slurm for the tests: Debian's slurm-wlm and munge (and libpmix-dev, which
Slurm's pmix plugin loads), installed where root and apt-get are available and Slurm is not,
started once per test session in a private folder (its own munged, slurm.conf, ports and state;
nothing under /etc changes), stopped at the end. Elsewhere the tests skip with the reason.

By hand: `python tests/slurm_cluster.py` starts one and prints the SLURM_CONF to export; Ctrl-C
or SIGTERM stops it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("slurm-wlm", "munge", "libpmix-dev")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("srun", "salloc", "sbatch", "sinfo", "scontrol", "scancel")
INSTALL_LOG = Path(tempfile.gettempdir()) / "slurm-install.log"
START_TIMEOUT_S = 60
# this module runs before commbench is installed (.ci/run asks it for PACKAGES): it imports only the
# standard library, and the exit codes it reads are the system tools' (0: success)


@dataclass
class Cluster:
    root: Path
    env: dict  # the tests' environment: SLURM_CONF, this Python's bin/ first on PATH, no outer job

    def run(self, *argv, timeout=300, cwd=None) -> subprocess.CompletedProcess:
        return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout,
                              env=self.env, cwd=cwd)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                         for p in sorted(self.root.glob("*.log")))


def _sbin(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def unavailable() -> str | None:
    """Why no Slurm can run here, after installing it where that is possible; None when it can."""
    if not sys.platform.startswith("linux"):
        return "a live Slurm needs Linux"
    missing = [n for n in DAEMONS + CLIENTS if _sbin(n) is None]
    if not missing:
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"Slurm is not installed ({', '.join(missing)} missing) and installing it needs root and apt-get"
    with open(INSTALL_LOG, "w") as log:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        ok = all(subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=900).returncode == 0
                 for cmd in (["apt-get", "update", "-qq"],
                             ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]))
    if not ok or any(_sbin(n) is None for n in DAEMONS + CLIENTS):
        return f"apt-get could not install {' '.join(PACKAGES)} (see {INSTALL_LOG})"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(root: Path, host: str) -> str:
    cpus = max(4, os.cpu_count() or 1)  # more than the tests' 2 tasks: a finishing job does not hold the next
    return f"""ClusterName=commbench
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge.socket
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
KillWait=5
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def start() -> Cluster:
    """Start munged, slurmctld and slurmd in a new private folder; wait until the node is idle.
    RuntimeError (with the daemons' logs) when it does not come up."""
    root = Path(tempfile.mkdtemp(prefix="cbslurm-"))  # short: PMIx puts unix sockets below spool/
    for sub in ("state", "spool"):
        (root / sub).mkdir()
    host = socket.gethostname().split(".")[0]
    (root / "slurm.conf").write_text(_config(root, host))
    (root / "munge.key").write_bytes(os.urandom(1024))
    (root / "munge.key").chmod(0o400)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SALLOC_", "SBATCH_", "SRUN_"))}
    env.update(SLURM_CONF=str(root / "slurm.conf"), PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}")
    cluster = Cluster(root, env)
    munged = [_sbin("munged"), "--force", f"--socket={root}/munge.socket", f"--key-file={root}/munge.key",
              f"--pid-file={root}/munged.pid", f"--log-file={root}/munged.log", f"--seed-file={root}/munged.seed"]
    conf = str(root / "slurm.conf")
    for argv in (munged, [_sbin("slurmctld"), "-f", conf], [_sbin("slurmd"), "-f", conf]):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
        if proc.returncode != 0:
            stop(cluster)
            raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.strip()}\n{cluster.logs()}")
    end = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < end:
        state = cluster.run("sinfo", "-h", "-o", "%T", timeout=30).stdout.strip()
        if state == "idle":
            return cluster
        time.sleep(0.5)
    stop(cluster)
    raise RuntimeError(f"the Slurm node did not become idle in {START_TIMEOUT_S} s (state {state!r})\n{cluster.logs()}")


def stop(cluster: Cluster) -> None:
    """Cancel what is left, stop the daemons this cluster started (by their pid files), remove it."""
    if (cluster.root / "slurmctld.pid").exists():
        subprocess.run(["scancel", "--full", "--user", str(os.geteuid())], capture_output=True, env=cluster.env,
                       timeout=30)
    for name in ("slurmd", "slurmctld", "munged"):
        pid_file = cluster.root / f"{name}.pid"
        try:
            pid = int(pid_file.read_text().split()[0])
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            continue
        end = time.monotonic() + 10
        while time.monotonic() < end and _alive(pid):
            time.sleep(0.1)
    shutil.rmtree(cluster.root, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


if __name__ == "__main__":
    reason = unavailable()
    if reason:
        sys.exit(reason)
    c = start()
    print(f"export SLURM_CONF={c.env['SLURM_CONF']}  # Ctrl-C (or SIGTERM) stops the cluster", flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: (stop(c), sys.exit(0)))
    while True:
        signal.pause()
