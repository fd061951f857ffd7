"""commbench.rank.world: one world of the requested size, checked before the first point. Every
backend's communicator must hold the ranks the launcher started (no singletons, no short world), as
many as -n asked for, in the layout --ranks-per-node asks for; anything else is a WorldError of one
line naming the cause and the fix, and `stop` ends the rank (rank 0 reporting it)."""

import json
import sys
from types import SimpleNamespace

import pytest

from commbench.events import PREFIX
from commbench.rank import world
from commbench.machine import topology
from commbench.rank.world import WorldError, check, check_rendezvous_world
from commbench.spec import SweepSpec


def _info(world_size=4, source="openmpi", rank=0):
    return topology.RankInfo(rank, world_size, 0, None, None, "a", source)


def _comms(**sizes):
    return {name: SimpleNamespace(size=size) for name, size in sizes.items()}


def _spec(backends=("mpi",), nprocs=4, ranks_per_node=None):
    return SweepSpec(backends=list(backends), nprocs=nprocs, ranks_per_node=ranks_per_node).validate()


def test_a_whole_world_passes_and_says_what_was_checked(monkeypatch):
    monkeypatch.setenv("SLURM_MPI_TYPE", "pmix")
    assert check(_spec(), _info(), _comms(mpi=4), ["a", "a", "b", "b"], [None] * 4) == {
        "size": 4, "nodes": 2, "pmi": None}  # the MPI plugin only under srun
    assert check(_spec(), _info(source="slurm"), _comms(mpi=4), ["a"] * 4, [None] * 4)["pmi"] == "pmix"


def test_mpi_singletons_name_the_launcher_and_the_fix(monkeypatch):
    with pytest.raises(WorldError, match=r"^mpirun started 4 separate MPI processes \(each an MPI world of 1\): MPI "
                                         r"needs an MPI launcher; use --launcher mpirun"):
        check(_spec(), _info(), _comms(mpi=1), ["a"] * 4, [None] * 4)
    with pytest.raises(WorldError, match="^the launcher started 4 separate MPI processes"):
        check(_spec(), _info(source="torchrun"), _comms(mpi=1), ["a"] * 4, [None] * 4)
    monkeypatch.delenv("SLURM_MPI_TYPE", raising=False)
    with pytest.raises(WorldError, match=r"^srun started 4 separate MPI processes: this MPI has no PMI support for "
                                         r"srun; use --launcher mpirun inside the allocation, or srun --mpi=pmix"):
        check(_spec(), _info(source="slurm"), _comms(mpi=1), ["a"] * 4, [None] * 4)
    monkeypatch.setenv("SLURM_MPI_TYPE", "pmi2")
    with pytest.raises(WorldError, match=r"^srun --mpi=pmi2 started 4 separate MPI processes: .* for srun --mpi=pmi2;"):
        check(_spec(), _info(source="slurm"), _comms(mpi=1), ["a"] * 4, [None] * 4)


def test_a_short_world_of_any_backend():
    with pytest.raises(WorldError, match="^the MPI launcher started 4 ranks but backend 'gloo' formed a world of 1$"):
        check(_spec(["gloo"]), _info(source="pmi"), _comms(gloo=1), ["a"] * 4, [None] * 4)  # only MPI has singletons
    with pytest.raises(WorldError, match="backend 'mpi' formed a world of 2"):
        check(_spec(), _info(), _comms(mpi=2), ["a"] * 4, [None] * 4)


def test_an_mpi_world_opened_only_for_the_rendezvous_is_not_measured():
    """gloo measured, MPI opened to share torch's rendezvous: MPI's world is not checked."""
    assert check(_spec(["gloo"]), _info(), _comms(gloo=4, mpi=1), ["a"] * 4, [None] * 4)["size"] == 4


def test_the_launchers_ranks_must_be_what_n_asked_for():
    with pytest.raises(WorldError, match="^mpirun started 3 ranks, not the 4 asked for with -n: give -n 3, or leave "
                                         "-n out inside a job you started$"):
        check(_spec(), _info(3), _comms(mpi=3), ["a"] * 3, [None] * 3)
    with pytest.raises(WorldError, match="^mpirun started 1 rank, not the 4"):
        check(_spec(), _info(1), _comms(mpi=1), ["a"], [None])


def test_ranks_per_node_must_match_the_hosts():
    spec = _spec(ranks_per_node=2)
    with pytest.raises(WorldError) as err:
        check(spec, _info(), _comms(mpi=4), ["a", "a", "a", "b"], [None] * 4)
    assert str(err.value).startswith("the ranks sit on 2 hosts as 0 x3,1, not in blocks of --ranks-per-node 2")
    assert str(err.value).endswith("or give --ranks-per-node matching the hosts")
    with pytest.raises(WorldError, match="or give --ranks-per-node 2$"):  # evenly placed, but not in blocks
        check(spec, _info(), _comms(mpi=4), ["a", "b", "a", "b"], [None] * 4)
    # the launcher's node ids, where every rank has one, count over the host names
    assert check(spec, _info(), _comms(mpi=4), ["x"] * 4, [0, 0, 1, 1])["nodes"] == 2
    assert check(spec, _info(), _comms(mpi=4), ["a", "b", "a", "b"], [0, 0, 1, 1])["nodes"] == 2


def test_runs_of_nodes_read_short():
    assert world._runs([0, 1, 0, 1]) == "0,1,0,1"
    assert world._runs([0, 0, 1, 1, 1, 0]) == "0 x2,1 x3,0"
    assert world._runs([]) == ""


def test_the_rendezvous_world_is_checked_before_torch_waits_on_it():
    check_rendezvous_world(_info(), SimpleNamespace(size=4))
    with pytest.raises(WorldError, match="^mpirun started 4 separate MPI processes"):
        check_rendezvous_world(_info(), SimpleNamespace(size=1))
    with pytest.raises(WorldError, match="^mpirun started 4 ranks but MPI formed a world of 2$"):
        check_rendezvous_world(_info(), SimpleNamespace(size=2))


class Exited(Exception):
    pass


@pytest.fixture
def no_exit(monkeypatch):
    """os._exit raises Exited(code) instead of ending the test run; the grace period is short."""
    def exit_(code):
        raise Exited(code)

    monkeypatch.setattr(world.os, "_exit", exit_)
    monkeypatch.setattr(world, "STOP_GRACE_S", 0.01)


def test_stop_rank_0_reports_the_others_wait_and_all_exit_1(no_exit, capsys, monkeypatch):
    with pytest.raises(Exited) as ended:
        world.stop(0, "the world is short")
    out, err = capsys.readouterr()
    assert ended.value.args == (1,) and err == "commbench rank 0: the world is short\n" and out == ""
    with pytest.raises(Exited) as ended:
        world.stop(3, "the world is short")
    assert ended.value.args == (1,) and capsys.readouterr() == ("", "")  # only rank 0 says it
    # started by a launcher as the worker: rank 0 also tells the parent, as an event
    monkeypatch.setitem(sys.modules, "__main__", SimpleNamespace(__spec__=SimpleNamespace(name="commbench.rank.worker")))
    with pytest.raises(Exited):
        world.stop(0, "the world is short")
    out, _ = capsys.readouterr()
    assert out.startswith(PREFIX) and json.loads(out[len(PREFIX):]) == {"event": "error", "rank": 0,
                                                                        "message": "the world is short"}
