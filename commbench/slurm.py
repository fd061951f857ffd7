"""Slurm's environment, read (nothing here starts a job): the allocation a command runs in
(salloc's shell, an sbatch script), host lists expanded (node[01-03,07]), the run defaults it
implies, the rendezvous a step's torch ranks share, and the job's facts for run.json."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

from commbench.binaries import find_binary

RENDEZVOUS_PORT_BASE = 10000  # a step's MASTER_PORT: 10000-32399, below Linux's ephemeral range
_BRACKET = re.compile(r"\[([^\]]*)\]")


@dataclass
class Allocation:
    job_id: str
    nodes: list[str]
    tasks_per_node: list[int]
    tasks: int
    partition: str | None

    @property
    def per_node(self) -> int | None:
        """Tasks on every node when that number is the same on all of them."""
        return self.tasks_per_node[0] if len(set(self.tasks_per_node)) == 1 else None


def in_step(env=None) -> bool:
    """A task of a job step (srun), as opposed to the job's own shell or batch script."""
    env = os.environ if env is None else env
    return "SLURM_JOB_ID" in env and ("SLURM_STEP_ID" in env or "SLURM_STEPID" in env)


def allocation(env=None) -> Allocation | None:
    """The Slurm job this command runs inside (salloc's shell, an sbatch script); None outside
    Slurm and in a task of a step (a rank, not the place to start ranks from)."""
    env = os.environ if env is None else env
    if "SLURM_JOB_ID" not in env or in_step(env):
        return None
    per_node = tasks_per_node(env.get("SLURM_TASKS_PER_NODE", ""))
    tasks = int(env["SLURM_NTASKS"]) if env.get("SLURM_NTASKS") else sum(per_node)
    return Allocation(env["SLURM_JOB_ID"], hostnames(env.get("SLURM_JOB_NODELIST", env.get("SLURM_NODELIST", ""))),
                      per_node, tasks, env.get("SLURM_JOB_PARTITION"))


def tasks_per_node(text: str) -> list[int]:
    """SLURM_TASKS_PER_NODE ('4(x2),3') as one count per node ([4, 4, 3])."""
    counts: list[int] = []
    for part in filter(None, text.split(",")):
        value, _, repeat = part.partition("(x")
        counts += [int(value)] * (int(repeat.rstrip(")")) if repeat else 1)
    return counts


def expand_hostlist(text: str) -> list[str]:
    """Slurm's host list syntax in Python: 'node[01-03,07],gpu[1-2]' -> node01 node02 node03
    node07 gpu1 gpu2 (zero padding kept; several bracket groups multiply: a[1-2]b[3,5])."""
    names: list[str] = []
    for item in _split_top(text):
        m = _BRACKET.search(item)
        if m is None:
            names.append(item)
            continue
        head, tail = item[:m.start()], item[m.end():]
        for piece in filter(None, m.group(1).split(",")):
            lo, dash, hi = piece.partition("-")
            if not dash:
                names += expand_hostlist(head + lo + tail)
                continue
            if not (lo.isdigit() and hi.isdigit()) or int(hi) < int(lo):
                raise ValueError(f"invalid range {piece!r} in host list {text!r}")
            names += [n for i in range(int(lo), int(hi) + 1) for n in expand_hostlist(f"{head}{i:0{len(lo)}d}{tail}")]
    return names


def _split_top(text: str) -> list[str]:
    """Split at the commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [i.strip() for i in items if i.strip()]


def hostnames(text: str) -> list[str]:
    """A host list expanded: by `scontrol show hostnames` where Slurm's tools are installed (they
    are the authority), else by expand_hostlist."""
    if not text:
        return []
    scontrol = find_binary("scontrol")
    if scontrol and "[" in text:
        try:
            out = subprocess.run([scontrol, "show", "hostnames", text], capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and out.stdout.split():
                return out.stdout.split()
        except (OSError, subprocess.SubprocessError):
            pass
    return expand_hostlist(text)


def rendezvous(env=None) -> dict[str, str]:
    """MASTER_ADDR/MASTER_PORT for the torch ranks of a step: the step's first host (loopback when
    the step has one node) and a port from the job and step ids, the same on every rank."""
    env = os.environ if env is None else env
    hosts = hostnames(env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "")
    if not hosts:
        raise RuntimeError("srun gave this rank no node list (SLURM_STEP_NODELIST) to find rank 0's host in")
    addr = "127.0.0.1" if len(set(hosts)) == 1 else hosts[0]
    job, step = int(env["SLURM_JOB_ID"]), int(env.get("SLURM_STEP_ID", env.get("SLURM_STEPID", "0")) or 0)
    return {"MASTER_ADDR": addr, "MASTER_PORT": str(RENDEZVOUS_PORT_BASE + (job % 1400) * 16 + step % 16)}


def job_facts(env=None) -> dict | None:
    """What run.json records of the Slurm job a run ran in; None outside Slurm."""
    env = os.environ if env is None else env
    if "SLURM_JOB_ID" not in env:
        return None
    nodes = hostnames(env.get("SLURM_JOB_NODELIST", env.get("SLURM_NODELIST", "")))
    facts = {"job_id": env["SLURM_JOB_ID"], "job_name": env.get("SLURM_JOB_NAME"),
             "partition": env.get("SLURM_JOB_PARTITION"), "cluster": env.get("SLURM_CLUSTER_NAME"),
             "nodes": nodes, "num_nodes": len(nodes),
             "tasks": int(env["SLURM_NTASKS"]) if env.get("SLURM_NTASKS") else None,
             "tasks_per_node": env.get("SLURM_TASKS_PER_NODE")}
    if in_step(env):
        facts["step_id"] = env.get("SLURM_STEP_ID", env.get("SLURM_STEPID"))
    return facts
