"""Slurm's environment as commbench reads it, with no Slurm running: host lists, the allocation and
the defaults it implies, a batch script that is no rank, a step's rendezvous, and the world check's
answers for what one node cannot produce (ranks spread over hosts against --ranks-per-node)."""

from types import SimpleNamespace

import pytest

from commbench import slurm
from commbench.rank import world
from commbench.machine import topology
from commbench.spec import SweepSpec

# salloc -n 2 on host vm, then the batch script of sbatch -n 3 -N 2, then a task of srun -n 2
SALLOC = {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2", "SLURM_TASKS_PER_NODE": "2", "SLURM_JOB_NODELIST": "vm",
          "SLURM_JOB_PARTITION": "debug"}
BATCH = {"SLURM_JOB_ID": "8", "SLURM_NTASKS": "3", "SLURM_TASKS_PER_NODE": "2,1", "SLURM_JOB_NODELIST": "n[1-2]",
         "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0"}
STEP = {"SLURM_JOB_ID": "9", "SLURM_STEP_ID": "3", "SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "1",
        "SLURM_NODEID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_TASKS_PER_NODE": "4",
        "SLURM_STEP_NODELIST": "vm", "SLURM_JOB_NODELIST": "vm"}


@pytest.mark.parametrize("text, hosts", [
    ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
    ("gpu-a[1-2]b[3,5],x", ["gpu-a1b3", "gpu-a1b5", "gpu-a2b3", "gpu-a2b5", "x"]),
    ("c[098-101]", ["c098", "c099", "c100", "c101"]),
    ("a,b", ["a", "b"]), ("", []),
])
def test_hostlist(text, hosts):
    assert slurm.expand_hostlist(text) == hosts


def test_bad_hostlist_range():
    with pytest.raises(ValueError, match="invalid range"):
        slurm.expand_hostlist("n[5-2]")


def test_allocation_and_its_defaults():
    alloc = slurm.allocation(SALLOC)
    assert (alloc.job_id, alloc.nodes, alloc.tasks, alloc.per_node, alloc.partition) == ("7", ["vm"], 2, 2, "debug")
    assert topology.run_defaults(env=SALLOC) == {"nprocs": 2, "ranks_per_node": 2}
    assert topology.run_defaults(env=BATCH) == {"nprocs": 3, "ranks_per_node": None}  # 2 + 1: no even layout
    no_ntasks = {"SLURM_JOB_ID": "1", "SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_JOB_NODELIST": "n[1-2]"}
    assert slurm.allocation(no_ntasks).tasks == 8 and slurm.allocation(no_ntasks).nodes == ["n1", "n2"]
    assert slurm.allocation({}) is None and topology.run_defaults(env={}) == {}
    assert slurm.allocation(STEP) is None  # a task of a step is a rank, not where ranks start from
    assert topology.run_defaults("none", env={}) == {"nprocs": 1}  # --launcher none: the ranks already running


def test_batch_script_is_no_rank_and_a_step_is():
    assert topology.detect(BATCH).source == "single" and not topology.inside_launched_job(BATCH)
    info = topology.detect(STEP)
    assert (info.source, info.rank, info.world, info.local_world) == ("slurm", 1, 2, 2)
    assert topology.inside_launched_job(STEP) and topology.run_defaults(env=STEP) == {"nprocs": 2}
    assert not topology.inside_launched_job(STEP | {"SLURM_STEP_NUM_TASKS": "1", "SLURM_NTASKS": "1"})


def test_step_rendezvous():
    one = slurm.rendezvous(STEP)
    assert one["MASTER_ADDR"] == "127.0.0.1" and one == slurm.rendezvous(STEP | {"SLURM_PROCID": "0"})
    two = slurm.rendezvous(STEP | {"SLURM_STEP_NODELIST": "gpu[07-08]"})
    assert two["MASTER_ADDR"] == "gpu07"
    next_step = slurm.rendezvous(STEP | {"SLURM_STEP_ID": "4"})["MASTER_PORT"]
    assert 10000 <= int(one["MASTER_PORT"]) < 32400 and next_step != one["MASTER_PORT"]


def test_ranks_over_hosts_must_match_ranks_per_node():
    spec = SweepSpec(backends=["gloo"], nprocs=4, ranks_per_node=2).validate()
    info = topology.RankInfo(0, 4, 0, 2, None, "a", "openmpi")
    comms = {"gloo": SimpleNamespace(size=4)}
    assert world.check(spec, info, comms, ["a", "a", "b", "b"], [None] * 4)["nodes"] == 2
    assert world.check(spec, info, comms, ["a"] * 4, [None] * 4)["nodes"] == 1  # one host: an override, not a fault
    with pytest.raises(world.WorldError, match=r"sit on 2 hosts as 0,1,0,1, not in blocks of --ranks-per-node 2"):
        world.check(spec, info, comms, ["a", "b", "a", "b"], [None] * 4)
    with pytest.raises(world.WorldError, match="mpirun started 4 ranks but backend 'gloo' formed a world of 3"):
        world.check(spec, info, {"gloo": SimpleNamespace(size=3)}, ["a"] * 4, [None] * 4)
