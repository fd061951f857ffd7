"""One world, opened and checked before the first point: each backend's communicator opened (the
MPI-world ones first, a torch world's rendezvous shared over MPI or Slurm where the launcher set
none); every communicator holds the ranks the launcher started (no singletons, no short world), as
many as -n asked for, and, across hosts, in the layout asked for. Anything else stops the run with
one line naming the cause and the fix."""

from __future__ import annotations

import os
import socket
import sys
import time

from commbench import slurm
from commbench.algorithms import ALGORITHMS
from commbench.backends import BACKENDS, MPI_WORLD, TORCH_WORLD
from commbench.events import emit_stdout
from commbench.library_calls import LIBRARY_CALLS
from commbench.machine import topology
from commbench.backends.communicators import Communicator, open_backend
from commbench.spec import SweepSpec

# what started the ranks, by the variables topology.detect read (torchrun's are also the local launcher's)
_LAUNCHER_NAMES = {"slurm": "srun", "openmpi": "mpirun", "pmi": "the MPI launcher"}
STOP_GRACE_S = 2.0  # how long ranks other than 0 wait before they exit on a WorldError (see stop)


class WorldError(RuntimeError):
    """The ranks do not form the world asked for."""


STARTUP_TIMEOUT_S = 300.0  # seconds a backend may take to open its communicator


def _torch_rendezvous(info: topology.RankInfo, mpi: Communicator | None) -> None:
    """Make sure MASTER_ADDR/MASTER_PORT are set for torch.distributed. Launchers that do not
    set them (mpirun, srun) get them from rank 0 over MPI, or under srun from Slurm's variables."""
    if "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ:
        return
    if info.source == "slurm" and (mpi is None or mpi.size != info.world):  # no MPI world to share them over
        os.environ.update(slurm.rendezvous())
        return
    if mpi is None:
        raise RuntimeError("torch backends need MASTER_ADDR and MASTER_PORT (or an MPI launch or srun to share them)")
    check_rendezvous_world(info, mpi)
    hosts = mpi.allgather_object(info.hostname)
    addr = "127.0.0.1" if len(set(hosts)) == 1 else socket.gethostbyname(hosts[0])
    port = mpi.allgather_object(topology.free_port() if mpi.rank == 0 else None)[0]
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = addr, str(port)


def open_communicators(spec: SweepSpec, info: topology.RankInfo) -> dict[str, Communicator]:
    comms: dict[str, Communicator] = {}
    launched_by_mpi = info.source in ("openmpi", "pmi") or "PMIX_RANK" in os.environ
    # the MPI-world backends first: a torch world launched by an MPI launcher makes its rendezvous over
    # MPI, opened for that alone where no backend asked for it (world.check does not measure it)
    mpi_world = [b for b in spec.backends if BACKENDS[b].world == MPI_WORLD]
    if not mpi_world and launched_by_mpi and "MASTER_ADDR" not in os.environ:
        mpi_world = ["mpi"]
    threads = any(ALGORITHMS[a].threads for a in spec.algorithms if a not in LIBRARY_CALLS)
    for name in mpi_world:
        comms[name] = open_backend(name, info.rank, info.world, info.local_rank, STARTUP_TIMEOUT_S, threads=threads)
    for name in spec.backends:
        if name not in comms:
            if BACKENDS[name].world == TORCH_WORLD:
                _torch_rendezvous(info, comms.get("mpi"))
            comms[name] = open_backend(name, info.rank, info.world, info.local_rank, STARTUP_TIMEOUT_S, spec.device)
            comms[name].register_buffers(spec.registration)  # (NCCL's only: spec.validate refuses it elsewhere)
    return comms


def check(spec: SweepSpec, info: topology.RankInfo, comms: dict[str, Communicator], hostnames: list[str],
          launcher_nodes: list[int | None]) -> dict:
    """Raise WorldError unless the ranks form one world of the requested size and layout; what
    was checked, for run.json."""
    started = _LAUNCHER_NAMES.get(info.source, "the launcher")
    for name in spec.backends:  # an MPI world opened only to share torch's rendezvous is not measured
        comm = comms[name]
        if comm.size == info.world:
            continue
        if comm.size == 1 and BACKENDS[name].world == MPI_WORLD:  # singletons: ranks started outside one MPI job
            raise WorldError(_singletons(started, info.world))
        raise WorldError(f"{started} started {info.world} ranks but backend {name!r} formed a world of {comm.size}")
    if info.world != spec.nprocs:
        ranks = f"{info.world} rank{'s' * (info.world != 1)}"
        raise WorldError(f"{started} started {ranks}, not the {spec.nprocs} asked for with -n: "
                         f"give -n {info.world}, or leave -n out inside a job you started")
    hosts = topology.node_layout(hostnames, None, launcher_nodes)
    if spec.ranks_per_node and len(set(hosts)) > 1 and hosts != topology.node_layout(hostnames, spec.ranks_per_node):
        counts = [hosts.count(n) for n in sorted(set(hosts))]
        raise WorldError(f"the ranks sit on {len(counts)} hosts as {_runs(hosts)}, not in blocks of "
                         f"--ranks-per-node {spec.ranks_per_node} (inside Slurm: the allocation's tasks per node); "
                         f"place them node by node (srun/sbatch --distribution=block), or give --ranks-per-node "
                         f"{counts[0] if len(set(counts)) == 1 else 'matching the hosts'}")
    return {"size": info.world, "nodes": len(set(hosts)),
            "pmi": os.environ.get("SLURM_MPI_TYPE") if info.source == "slurm" else None}  # srun --mpi=


def stop(rank: int, message: str) -> None:
    """End this rank after a WorldError, which every rank finds: rank 0 reports it (on stderr, and
    as an event to the parent when commbench launched it), the others wait a moment first so that a
    launcher killing the job on their exit (srun --kill-on-bad-exit) does not cut rank 0 short."""
    if rank == 0:
        sys.stderr.write(f"commbench rank 0: {message}\n")
        sys.stderr.flush()
        if getattr(getattr(sys.modules["__main__"], "__spec__", None), "name", None) == "commbench.rank.worker":
            emit_stdout("error", rank=0, message=message)
    else:
        time.sleep(STOP_GRACE_S)
    os._exit(1)


def check_rendezvous_world(info: topology.RankInfo, mpi: Communicator) -> None:
    """Before torch's rendezvous is shared over MPI: an MPI world smaller than the launcher's (each
    rank a singleton) would give every rank its own MASTER_PORT and torch would wait for ranks
    that never come; say why now instead."""
    if mpi.size != info.world:
        started = _LAUNCHER_NAMES.get(info.source, "the launcher")
        raise WorldError(_singletons(started, info.world) if mpi.size == 1 else
                         f"{started} started {info.world} ranks but MPI formed a world of {mpi.size}")


def _singletons(started: str, world: int) -> str:
    if started == "srun":
        plugin = os.environ.get("SLURM_MPI_TYPE")
        how = f"srun --mpi={plugin}" if plugin else "srun"
        return (f"{how} started {world} separate MPI processes: this MPI has no PMI support for {how}; "
                "use --launcher mpirun inside the allocation, or srun --mpi=pmix (srun --mpi=list shows the plugins)")
    return (f"{started} started {world} separate MPI processes (each an MPI world of 1): MPI needs an MPI "
            "launcher; use --launcher mpirun (inside Slurm: srun --mpi=pmix)")


def _runs(nodes: list[int]) -> str:
    """The node of every rank, short: 0,1,0,1 or 0 x2,1 x2."""
    runs: list[list[int]] = []
    for n in nodes:
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    return ",".join(f"{n}" if k == 1 else f"{n} x{k}" for n, k in runs)
