"""Where this rank sits: rank, world size, local rank and node, read from the launcher's
environment (the same code path on a laptop and on a cluster)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from commbench import slurm

# (rank, world size, local rank, local world size, node id) variables, by launcher
_SCHEMES = (
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"),
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", None),  # OMPI's NODE_RANK is a rank within the node, not a node index
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", None, "SLURM_NODEID"),
    ("pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", None),
)

# set by the emulated-cluster launcher: "round-robin" deals global ranks over the nodes
PLACEMENT_ENV = "COMMBENCH_PLACEMENT"

# variables that show this process was started as one rank of a parallel job
LAUNCHED_MARKERS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "TORCHELASTIC_RUN_ID")


@dataclass
class RankInfo:
    rank: int
    world: int
    local_rank: int
    local_world: int | None
    node: int | None  # node index from the launcher, when it gives one
    hostname: str
    source: str  # which launcher's variables were read


def _int(env, name):
    value = env.get(name) if name else None
    return int(value) if value not in (None, "") else None


def detect(env=None) -> RankInfo:
    env = os.environ if env is None else env
    host = socket.gethostname()
    for source, r, w, lr, lw, node in _SCHEMES:
        if source == "slurm" and "SLURM_JOB_ID" in env and not slurm.in_step(env):
            continue  # an sbatch script has SLURM_PROCID=0 and the job's SLURM_NTASKS: it is no rank
        if env.get(r) is not None and env.get(w) is not None:
            local_world = _int(env, lw)
            if local_world is None and source == "slurm":
                local_world = _slurm_tasks_on_node(env)
            info = RankInfo(int(env[r]), int(env[w]), _int(env, lr) or 0, local_world, _int(env, node), host, source)
            if env.get(PLACEMENT_ENV) == "round-robin":
                info.rank = round_robin_rank(info)
            return info
    return RankInfo(0, 1, 0, 1, 0, host, "single")


def round_robin_rank(info: RankInfo) -> int:
    """Global rank with ranks dealt over the nodes (rank r on node r mod M) instead of node by
    node; needs the node index and the ranks per node from the launcher."""
    if info.node is None or not info.local_world or info.world % info.local_world:
        raise RuntimeError("round-robin placement needs the node index and an equal number of ranks per node")
    return info.local_rank * (info.world // info.local_world) + info.node


def _slurm_tasks_on_node(env):
    """SLURM_TASKS_PER_NODE looks like '4(x2),3'; this node's entry is by SLURM_NODEID (a step's
    own layout, SLURM_STEP_TASKS_PER_NODE, first)."""
    layout = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE", "")
    counts, node = slurm.tasks_per_node(layout), _int(env, "SLURM_NODEID")
    return counts[node] if node is not None and node < len(counts) else None


def free_port() -> int:
    """A TCP port free right now on this host, for a rendezvous."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def inside_launched_job(env=None) -> bool:
    """One rank of a parallel job: an MPI or torchrun rank, or a task of a Slurm step of several
    tasks (`srun -n 2 commbench run`)."""
    env = os.environ if env is None else env
    return (any(m in env for m in LAUNCHED_MARKERS)
            or (slurm.in_step(env) and (_int(env, "SLURM_STEP_NUM_TASKS") or _int(env, "SLURM_NTASKS") or 1) > 1))


def run_defaults(launcher: str = "auto", env=None) -> dict:
    """What -n (and --ranks-per-node) mean when not given: the launcher's world inside a launched
    job or with --launcher none (the ranks run in place), the allocation's tasks (and tasks per
    node, when every node has the same number) inside a Slurm job; {} elsewhere (the option
    table's default)."""
    env = os.environ if env is None else env
    if launcher == "none" or inside_launched_job(env):
        return {"nprocs": detect(env).world}
    alloc = slurm.allocation(env)
    if alloc is None or alloc.tasks < 1:
        return {}
    even = alloc.per_node is not None and alloc.per_node * len(alloc.tasks_per_node) == alloc.tasks
    return {"nprocs": alloc.tasks, "ranks_per_node": alloc.per_node if even else None}


def node_layout(hostnames: list[str], ranks_per_node: int | None = None,
                launcher_nodes: list[int | None] | None = None) -> list[int]:
    """Node index of every rank: by --ranks-per-node when given (consecutive blocks), else the
    launcher's node ids when every rank has one (torchrun GROUP_RANK, SLURM_NODEID), else by
    hostname; numbered in order of first appearance."""
    if ranks_per_node:
        return [r // ranks_per_node for r in range(len(hostnames))]
    keys = launcher_nodes if launcher_nodes and None not in launcher_nodes else hostnames
    order: dict = {}
    return [order.setdefault(k, len(order)) for k in keys]
