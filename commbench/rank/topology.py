"""Where this rank sits: rank, world size, local rank and node, read from the launcher's
environment (the same code path on a laptop and on a cluster)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

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
    """SLURM_TASKS_PER_NODE looks like '4(x2),3'; this node's entry is by SLURM_NODEID."""
    spec, node = env.get("SLURM_TASKS_PER_NODE"), _int(env, "SLURM_NODEID")
    if not spec or node is None:
        return None
    counts = []
    for part in spec.split(","):
        value, _, repeat = part.partition("(x")
        counts += [int(value)] * (int(repeat.rstrip(")")) if repeat else 1)
    return counts[node] if node < len(counts) else None


def free_port() -> int:
    """A TCP port free right now on this host, for a rendezvous."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def inside_launched_job(env=None) -> bool:
    env = os.environ if env is None else env
    return any(m in env for m in LAUNCHED_MARKERS)


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
