"""Start the ranks: argv lists for mpirun (Open MPI, MPICH), torchrun, srun and a local
launcher (never a shell string), and a Job that runs them, relays their output, reads rank 0's
events and kills the whole process group on a timeout, an error or Ctrl-C."""

from __future__ import annotations

import functools
import importlib.util
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from commbench import slurm
from commbench.runinfo import SM_DIR_VARIABLE, TUNING_PREFIX
from commbench.backends import LOCAL_STORE_ENV, emulated_launcher, needs_mpi_launcher
from commbench.binaries import find_binary
from commbench.errors import InputError
from commbench.machine.facts import facts
from commbench.options import LOCAL_RANKS_PER_CORE
from commbench.presentation.terminal import printable
from commbench.plugins import PLUGINS_ENV
from commbench.machine import topology
from commbench.folder.spec_file import encode_spec, spec_path
from commbench.run import emulate, processes, srun
from commbench.run.job_folders import local_store, sm_folder, unusable_tmpdir
from commbench.spec import SweepSpec, format_size

MPI_LAUNCHERS = ("mpirun", "srun", "none")
KILL_GRACE_S = 3.0
# mpirun arguments and variables that place ranks on other hosts (Open MPI, MPICH's Hydra, batch systems)
HOST_FLAGS = ("-H", "--host", "-host", "--hosts", "-hosts", "--hostfile", "-hostfile", "--machinefile",
              "-machinefile", "--default-hostfile", "-f")
HOST_VARIABLES = ("SLURM_JOB_ID", "PBS_NODEFILE", "LSB_HOSTS", "HYDRA_HOST_FILE", "OMPI_MCA_orte_default_hostfile",
                  "PRTE_MCA_prte_default_hostfile")
# python -m puts the current folder first on sys.path: never for the ranks (a numpy.py where the user types
# commbench run, or in a received folder resumed from inside, would run in every rank). Python 3.11+ honours it.
SAFE_PATH = {"PYTHONSAFEPATH": "1"}
BUFFERS_PER_RANK = 2  # a rank's buffers at the largest size, at least: send and receive (commbench.rank.harness)


def resolve_launcher(spec: SweepSpec) -> str:
    """'auto' becomes: none inside a launched job; inside a Slurm allocation srun, or for MPI
    mpirun where no srun plugin forms an MPI world; elsewhere mpirun for MPI, else the local
    launcher. --emulate launches across its namespaces ("emulated": commbench.run.emulate).
    Inside an allocation, more ranks than it has tasks is refused."""
    launcher = spec.launcher
    if spec.emulate is not None:
        return "emulated"
    alloc = slurm.allocation()
    if launcher == "auto":
        if topology.inside_launched_job():
            launcher = "none"
        elif alloc is not None:
            launcher = _slurm_launcher(spec, alloc)
        else:
            launcher = "mpirun" if needs_mpi_launcher(spec.backends) else "local"
    if needs_mpi_launcher(spec.backends) and launcher not in MPI_LAUNCHERS:
        which = next(b for b in spec.backends if needs_mpi_launcher([b]))
        raise InputError(f"backend {which!r} needs an MPI launcher, not {launcher!r} (accepted: {', '.join(MPI_LAUNCHERS)})")
    if launcher == "none" and spec.nprocs > 1 and not topology.inside_launched_job():
        raise InputError(f"--launcher none runs this process as a rank of a job already started (mpirun, srun, "
                         f"torchrun), and none is here: -n {spec.nprocs} needs a launcher (leave --launcher out)")
    if alloc is not None and launcher != "none" and spec.nprocs > alloc.tasks:
        raise InputError(f"-n {spec.nprocs} is more ranks than Slurm job {alloc.job_id} has tasks ({alloc.tasks}): "
                         f"leave -n out to use them all, or ask salloc/sbatch for -n {spec.nprocs}")
    return launcher


def _slurm_launcher(spec: SweepSpec, alloc: slurm.Allocation) -> str:
    """srun, unless MPI forms no world through any srun plugin here: then mpirun, which reads the
    allocation itself (Open MPI's own way inside Slurm)."""
    if not needs_mpi_launcher(spec.backends):
        return "srun"
    runner = find_binary("srun")
    return "srun" if runner and srun.mpi_plugin(runner, alloc) is not None else "mpirun"


def _which(binary: str) -> str:
    path = find_binary(binary)
    if path is None:
        raise InputError(f"launcher binary {binary!r} is not installed (not found on PATH)")
    return path


@functools.lru_cache(maxsize=None)
def _mpirun_version(mpirun: str) -> str:
    """What `mpirun --version` prints, lower-cased (asked once per mpirun)."""
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        raise InputError(f"cannot run {mpirun} --version: {exc}") from None
    return (out.stdout + out.stderr).lower()


def _mpirun_flavor(mpirun: str) -> str:
    text = _mpirun_version(mpirun)
    return "openmpi" if "open mpi" in text or "open-mpi" in text or "openrte" in text else "mpich"


def _open_mpi_major(mpirun: str) -> int | None:
    """Open MPI's major version, or None for another MPI (or a version it does not print)."""
    found = re.search(r"open mpi\)?\s+v?(\d+)\.", _mpirun_version(mpirun))
    return int(found.group(1)) if found and _mpirun_flavor(mpirun) == "openmpi" else None


def ranks_here(launcher: str, extra: list[str], env=None) -> bool:
    """Do the ranks of this launch all run on this machine? local, torchrun (one node) and the
    emulated cluster always; mpirun unless --launcher-args or the environment give it hosts."""
    env = os.environ if env is None else env
    if launcher == "mpirun":
        return not (any(a in HOST_FLAGS or a.split("=", 1)[0] in HOST_FLAGS for a in extra)
                    or any(v in env for v in HOST_VARIABLES))
    return launcher in ("local", "torchrun", "emulated")


def _cores() -> int:
    return facts().usable_cpus


def _memory_bytes() -> int | None:
    """This machine's memory, or its container's limit where lower; None where unknown."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        limit = "max"
    return min(total, int(limit)) if limit.isdigit() else total


def check_local_ranks(spec: SweepSpec, launcher: str, extra: list[str]) -> None:
    """Ranks started on this machine: at most LOCAL_RANKS_PER_CORE per core of it (unless
    --oversubscribe), and on the CPU their buffers at the largest size within its memory. An
    InputError before anything starts; launches to other hosts (Slurm, mpirun with hosts) are the
    scheduler's to place."""
    if not ranks_here(launcher, extra):
        return
    if (problem := unusable_tmpdir()) is not None:
        raise InputError(problem)
    n, cores = spec.nprocs, _cores()
    if n > LOCAL_RANKS_PER_CORE * cores and not spec.oversubscribe:
        raise InputError(f"-n {n} starts {n} ranks on this machine, more than {LOCAL_RANKS_PER_CORE} per core of its "
                         f"{cores}: add --oversubscribe to run them anyway, or give mpirun hosts in --launcher-args")
    memory, largest = _memory_bytes(), max(spec.sizes)
    if spec.device == "cpu" and memory and n * BUFFERS_PER_RANK * largest > memory:
        raise InputError(f"size {format_size(largest)} on {n} ranks of this machine needs at least "
                         f"{n * BUFFERS_PER_RANK * largest / 1e9:.3g} GB ({BUFFERS_PER_RANK} buffers a rank), more than "
                         f"its {memory / 1e9:.3g} GB of memory: choose smaller sizes (-e, --sizes) or fewer ranks")


def build_commands(spec: SweepSpec, launcher: str, extra: list[str], worker: list[str] | None = None,
                   ranks_env: dict[str, str] | None = None) -> list[tuple[list[str], dict]]:
    """One (argv, env) per process to start (only the local launcher starts several), once this
    machine can take the ranks (check_local_ranks). The spec reaches the ranks as a file in the
    run folder (commbench.folder.spec_file.encode_spec), written once nothing refused the launch.
    worker: the ranks' program (default: this Python's commbench.rank.worker on the spec file; its
    first item is the Python that torchrun runs under too); ranks_env: variables for every rank."""
    check_local_ranks(spec, launcher, extra)
    worker = worker or [sys.executable, "-m", "commbench.rank.worker", "--spec", str(spec_path(spec))]
    commands = _commands(spec, launcher, extra, worker, {**SAFE_PATH, **(ranks_env or {})})
    if worker[2:3] == ["commbench.rank.worker"]:
        encode_spec(spec)
    return commands


def _commands(spec: SweepSpec, launcher: str, extra: list[str], worker: list[str],
              ranks_env: dict[str, str]) -> list[tuple[list[str], dict]]:
    inherited = {k: v for k, v in os.environ.items() if k != LOCAL_STORE_ENV}  # a store is the local launch's own
    env = dict(inherited, PYTHONUNBUFFERED="1", **ranks_env)
    n = spec.nprocs
    if launcher in ("mpirun", "emulated") and SM_DIR_VARIABLE not in env and ranks_here(launcher, extra, env):
        folder = sm_folder()  # (Open MPI's shared-memory files: a folder of this launch's own, not /dev/shm's names)
        if folder:
            env[SM_DIR_VARIABLE] = tempfile.mkdtemp(prefix="launch-", dir=folder)
    if launcher == "mpirun":
        return [(_mpirun(n, env, ranks_env) + extra + worker, env)]
    if launcher == "srun":
        return [srun.command(_which("srun"), spec, extra, worker, env)]
    placing = [a for a in extra if a in HOST_FLAGS or a.split("=", 1)[0] in HOST_FLAGS]
    if launcher == "emulated" and placing:  # else mpirun's hosts win over the emulated layout, silently
        raise InputError(f"--launcher-args {placing[0]} places ranks on hosts, which --emulate lays out itself "
                         "(its nodes, --ranks-per-node, --placement): leave it out")
    if launcher == "emulated" and emulated_launcher(spec.backends) == "mpirun":
        mpirun = _mpirun(n, env, ranks_env)
        if (_open_mpi_major(mpirun[0]) or 0) < 5:
            raise InputError(f"--emulate with MPI needs Open MPI 5 or later (its launch agent enters the namespaces); "
                             f"{mpirun[0]} is {(_mpirun_version(mpirun[0]).strip().splitlines() or ['?'])[0][:60]!r}")
        return emulate.mpirun_command(spec, mpirun, extra, worker, env)
    if launcher in ("torchrun", "emulated") and importlib.util.find_spec("torch") is None:
        raise InputError(f"launcher {launcher!r} needs torch, which is not installed (pip install 'commbench[torch]')")
    if launcher == "emulated":
        return emulate.commands(spec, extra, worker, env)
    if launcher == "torchrun":
        run = [worker[0], "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc-per-node", str(n)]
        return [(run + extra + worker[1:], env)]
    if launcher == "local":
        port = topology.free_port()
        local = dict(env, WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n), GROUP_RANK="0", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(port), GLOO_SOCKET_IFNAME=LOOPBACK, **{LOCAL_STORE_ENV: local_store()})
        return [(worker, dict(local, RANK=str(r), LOCAL_RANK=str(r))) for r in range(n)]
    raise ValueError(f"no command for launcher {launcher!r}")


LOOPBACK = "lo"  # the ranks of a local launch talk through it alone (gloo's pairs: GLOO_SOCKET_IFNAME)


def _mpirun(n: int, env: dict, ranks_env: dict[str, str]) -> list[str]:
    """mpirun and its own arguments for n ranks (Open MPI's: as root, oversubscribed, the variables
    it must pass to other hosts)."""
    mpirun = _which("mpirun")
    args = [mpirun, "-n", str(n)]
    if _mpirun_flavor(mpirun) == "openmpi":
        if os.geteuid() == 0:
            args.append("--allow-run-as-root")
        if n > facts().cpus:
            args.append("--oversubscribe")
        tuned = sorted(k for k in env if k.startswith(TUNING_PREFIX))  # the kernels' tuning variables
        for name in ([PLUGINS_ENV] if PLUGINS_ENV in env else []) + tuned + sorted(ranks_env):
            args += ["-x", name]  # Open MPI passes variables to other hosts only when told
    return args


@dataclass
class Line:
    text: str
    stream: str  # "stdout" or "stderr"


def relay_stderr(line: Line) -> None:
    """A job's line that is not an event, passed on to this process's stderr terminal-safe: a rank's or a
    launcher's output may hold escape sequences or NUL bytes, which reach the terminal as escapes."""
    print(printable(line.text), file=sys.stderr)


def _dies_with_this_process():
    """A preexec_fn: the launched process gets SIGTERM when the process that started it dies, however it dies
    (SIGKILL included: an mpirun or a hung rank outlived its parent, run.json left "running": issue 67, M2).
    mpirun and torchrun end their ranks on SIGTERM. Linux's prctl; elsewhere nothing. Resolved before the fork
    (the child only calls it), and the parent's death before the call is caught by its pid."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl, parent = ctypes.CDLL(None, use_errno=True).prctl, os.getpid()

    def arm():
        prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died between the fork and the call
            os.kill(os.getpid(), signal.SIGTERM)
    return arm


class LauncherHung(Exception):
    """The launcher outlived every rank it had started on this machine (Open MPI 5's prterun after a rank's
    failed MPI_Init: PMIX_ERR_UNREACH, its report of the rank held back): nothing will end the job."""


ORPHAN_GRACE_S = 10.0  # a launcher with no rank left here this long is hung (mpirun and torchrun end a job in ~1 s)
RANK_PARENTS = ("mpirun", "torchrun")  # launchers whose children here are the ranks (Job's `launcher`)


class Job:
    """The launched processes, in one process group that is killed as a whole, and that ends when this
    process does (_dies_with_this_process)."""

    def __init__(self, commands: list[tuple[list[str], dict]], launcher: str = ""):
        self.procs: list[subprocess.Popen] = []
        self.launcher = launcher  # which launcher started it (resolve_launcher): mpirun and torchrun are judged hung
        self.queue: queue.Queue = queue.Queue()
        self._open = 0
        pgid, arm = 0, _dies_with_this_process()
        for argv, env in commands:
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, bufsize=1, errors="replace",
                                    process_group=pgid, preexec_fn=arm)
            pgid = pgid or proc.pid
            self.procs.append(proc)
            for stream, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
                self._open += 1
                threading.Thread(target=self._pump, args=(stream, name), daemon=True).start()
        self.pgid = pgid
        self._had_ranks, self._alone_since = False, None  # (_launcher_hung)
        self.finished = False  # set by the watchdog when the ranks said they are done: no longer judged hung

    def _pump(self, stream, name):
        for text in stream:
            self.queue.put(Line(text.rstrip("\n"), name))
        self.queue.put(None)

    def lines(self, deadline: Callable[[], float]) -> Iterator[Line]:
        """Every output line until all streams close; raises TimeoutError past deadline()."""
        while self._open:
            remaining = deadline() - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            try:
                item = self.queue.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                if self._failed_early():
                    return
                if self._launcher_hung():
                    raise LauncherHung
                continue
            if item is None:
                self._open -= 1
            else:
                yield item

    def ready_lines(self) -> list[Line]:
        """The output lines that have arrived, without waiting (None marks a stream that closed)."""
        out = []
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return out
            if item is None:
                self._open -= 1
            else:
                out.append(item)

    def streams_open(self) -> bool:
        """Has a stream of the job's output not yet been read to its end (ready_lines or lines)?"""
        return self._open > 0

    def exited(self) -> bool:
        """Has every process of the job ended?"""
        return all(p.poll() is not None for p in self.procs)

    def drain(self, within: float) -> list[Line]:
        """The lines still to come until every stream closes, waiting at most `within` seconds."""
        out, end = [], time.monotonic() + within
        while self._open and time.monotonic() < end:
            try:
                item = self.queue.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                break
            if item is None:
                self._open -= 1
            else:
                out.append(item)
        return out

    def _launcher_hung(self) -> bool:
        """mpirun or torchrun (one process) that had started ranks on this machine and has had none for
        ORPHAN_GRACE_S, still running. Ranks elsewhere (srun, a hostfile) are not its children here, and the local
        launcher's processes are the ranks themselves: never judged hung."""
        if (self.finished or self.launcher not in RANK_PARENTS or len(self.procs) != 1
                or self.procs[0].poll() is not None):
            return False  # (a local rank's own children, a compiler it ran, are no ranks)
        kids = processes.children(self.procs[0].pid)
        if kids is None:
            return False
        living, exited = kids
        self._had_ranks = self._had_ranks or living + exited > 0
        if living or not self._had_ranks:
            self._alone_since = None
            return False
        self._alone_since = self._alone_since or time.monotonic()
        return time.monotonic() - self._alone_since > ORPHAN_GRACE_S

    def _failed_early(self) -> bool:
        """Local launcher: one rank died while the others wait for it forever."""
        return len(self.procs) > 1 and any(p.poll() not in (None, 0) for p in self.procs)

    def wait(self) -> int:
        codes = [p.wait() for p in self.procs]
        return next((c for c in codes if c != 0), 0)

    def kill(self) -> None:
        """SIGTERM the whole group, then SIGKILL what is left after a grace period."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                return
            end = time.monotonic() + KILL_GRACE_S
            while time.monotonic() < end and any(p.poll() is None for p in self.procs):
                time.sleep(0.05)
            if all(p.poll() is not None for p in self.procs) and not processes.group_alive(self.pgid):
                return

