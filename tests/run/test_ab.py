"""commbench.run.ab's decisions before anything is launched: which points pair up, which grain the
sides allow, the order of turns, the arena's layout; the ranks' hello check; a side's options."""

import pytest

from commbench.errors import InputError
from commbench.rank import arena
from commbench.rank.turns import PROTOCOL
from commbench.run import ab, ab_rounds
from commbench.run.turn_server import hello_problem
from commbench.spec import SweepSpec


def _side(name, **fields):
    spec = SweepSpec(**{"backends": ["mpi"], "nprocs": 2, "sizes": [8, 4096], "collectives": ["all_reduce"],
                        "in_place": [False], **fields}).validate()
    return ab.AbSide(name, spec)


def test_points_pair_on_everything_but_what_the_sides_set_differently():
    pairs = ab.match(_side("A", algorithms=["native"]), _side("B", algorithms=["ring_kernel"]))
    assert [(p.a.algorithm, p.b.algorithm, p.a.size, p.b.size) for p in pairs] == [
        ("native", "ring_kernel", 8, 8), ("native", "ring_kernel", 4096, 4096)]
    assert pairs[0].key["algorithm"] == "native→ring_kernel" and "native→ring_kernel" in pairs[0].title
    same = ab.match(_side("A"), _side("B"))
    assert all(p.a.index == p.b.index for p in same) and "→" not in same[0].title
    dtypes = ab.match(_side("A", dtypes=["float32"]), _side("B", dtypes=["float64"]))
    assert dtypes[0].key["dtype"] == "float32→float64"


def test_a_side_with_several_partners_for_a_point_is_refused():
    with pytest.raises(InputError, match="not one each per point"):
        ab.match(_side("A", algorithms=["native"]), _side("B", algorithms=["native", "ring"]))


@pytest.mark.parametrize("change,grain", [({}, "in-process"), ({"env": {"X": "1"}}, "token"),
                                          ({"python": "/other/python"}, "token"), ({"nprocs": 3}, "token")])
def test_the_finest_grain_the_sides_allow(change, grain):
    a, b = _side("A"), _side("B", **({"nprocs": change["nprocs"]} if "nprocs" in change else {}))
    b.env, b.python = change.get("env", {}), change.get("python", b.python)
    assert ab.choose_grain(a, b, "mpirun")[0] == grain


def test_jobs_that_cannot_live_together_take_rounds_of_launches():
    a, b = _side("A"), _side("B")
    b.env = {"X": "1"}
    grain, why = ab.choose_grain(a, b, "srun")
    assert grain == "launch" and "Slurm" in why
    assert ab.choose_grain(a, b, "mpirun", "launch") == ("launch", "asked for (--grain launch); token was possible")
    with pytest.raises(InputError, match="--grain in-process is not possible: the sides' environments differ"):
        ab.choose_grain(a, b, "mpirun", "in-process")
    with pytest.raises(InputError, match="unknown grain"):
        ab.choose_grain(a, b, "mpirun", "fine")


def test_turns_alternate_abba_and_every_pair_has_one_turn_a_side():
    for round_no in (1, 2):
        order = ab_rounds.turn_order(round_no, 8)
        assert len(order) == 16
        for k in range(8):
            assert sorted(side for side, pair in order if pair == k) == ["A", "B"]
        firsts = [order[2 * k][0] for k in range(8)]
        assert firsts.count("A") == firsts.count("B") == 4
    assert ab_rounds.turn_order(1, 8)[0][0] != ab_rounds.turn_order(2, 8)[0][0]


def test_the_arena_holds_every_point_of_both_sides_one_region_a_rank():
    a, b = _side("A", sizes=[8, 1 << 20], in_place=[False, True]), _side("B", sizes=[8, 1 << 20], nprocs=3)
    stride, nbytes = ab.arena_layout(a.spec, b.spec)
    assert nbytes == 3 * stride
    out_of_place = arena.region_bytes(1 << 18, 1 << 18, 4, False)  # all-reduce of 1 MB: send, then recv a page on
    assert out_of_place == 2 << 20 and stride >= out_of_place and stride % 64 == 0


def _hello(**over):
    return {"rank": 1, "protocol": PROTOCOL, "host": "h", "env": {"X": "1"}, **over}


def test_a_hello_is_checked_for_protocol_the_sides_variables_and_rank():
    assert hello_problem(_hello(), {"X": "1"}, 2, {0}) is None
    assert "did not reach rank 1 on h (it has None)" in hello_problem(_hello(env={}), {"X": "1"}, 2, set())
    assert "speaks ab protocol 0" in hello_problem(_hello(protocol=0), {}, 2, set())
    assert "rank 1 of 2" in hello_problem(_hello(), {}, 2, {1})
    assert "rank 5 of 2" in hello_problem(_hello(rank=5), {}, 2, set())
    assert "rank True" in hello_problem(_hello(rank=True), {}, 2, set())


def test_a_sides_options_are_runs_options_over_the_common_ones():
    from commbench import options
    from commbench.cli.ab import AB_TABLE, _side_values, _spec

    common = {o.name: o.default for o in AB_TABLE} | {"out_of_place": True, "nprocs": 2, "backend": "mpi"}
    values, chosen = _side_values(common, "-a ring_kernel --in-place -d float64", "--args-b")
    spec = _spec(values)
    assert spec.algorithms == ["ring_kernel"] and spec.in_place == [True] and spec.dtypes == ["float64"]
    assert set(chosen) == {"algorithm", "in_place", "dtype"}
    assert _spec(_side_values(common, "", "--args-a")[0]).in_place == [False]
    # a side's size range replaces the common list (as -b/-e/-f replace a suite's sizes), not ignored beside it
    assert _spec(_side_values(common | {"sizes": "8,1K"}, "-b 1K -e 4K", "--args-b")[0]).sizes == [1024, 2048, 4096]
    with pytest.raises(InputError, match="--out cannot differ"):
        _side_values(common, "--out x", "--args-b")
    assert all(o.name not in ("repeat", "resume") for o in AB_TABLE) and options.BY_NAME["label"] in AB_TABLE
    with pytest.raises(InputError, match=r"^--args-a '--nprocs two': Invalid value for '-n' / '--nprocs'"):
        _side_values(common, "--nprocs two", "--args-a")  # click's usage error: one line


def test_both_sides_run_on_one_emulated_cluster():
    """The cluster is the comparison's (one, built once): sides that would need two are refused before
    anything starts; on it, sides that cannot share a process take rounds of launches (one job at a time)."""
    from commbench.run import ab_sides

    for other in ({}, {"emulate": "2x2", "link_rate": "2gbit"}, {"emulate": "2x2", "placement": "round-robin"}):
        with pytest.raises(InputError, match="both sides run on one emulated cluster"):
            ab_sides.prepare_sides(_side("A", emulate="2x2", nprocs=4), _side("B", nprocs=4, **other), None)
    with pytest.raises(InputError, match="both sides need one launcher: MPI .mpirun. and gloo .torchrun."):
        ab_sides.prepare_sides(_side("A", emulate="2x2", nprocs=4), _side("B", emulate="2x2", nprocs=4,
                                                                          backends=["gloo"]), None)
    a, b = _side("A", emulate="2x2", nprocs=4), _side("B", emulate="2x2", nprocs=4, algorithms=["ring"])
    assert ab.choose_grain(a, b, "emulated")[0] == "in-process"
    b.env = {"OMPI_MCA_coll_han_priority": "100"}
    grain, why = ab.choose_grain(a, b, "emulated")
    assert grain == "launch" and "an emulated cluster holds one job at a time" in why
    with pytest.raises(InputError, match="--grain token is not possible: an emulated cluster holds one job"):
        ab.choose_grain(a, b, "emulated", "token")


def test_what_a_launch_refuses_is_refused_before_the_folder_or_the_cluster(tmp_path, monkeypatch):
    """An Open MPI before 5 cannot start ranks across emulated nodes: refused as `run` refuses it,
    before the cluster is built or the folder written (it was found at the first launch, leaving a
    folder "running" for ever)."""
    from commbench.run import emulate, launch

    monkeypatch.setattr(launch, "_mpirun_version", lambda mpirun: "mpirun (Open MPI) 4.1.2\n")
    monkeypatch.setattr(emulate, "cluster", lambda spec: pytest.fail("the cluster was built"))
    a, b = _side("A", emulate="2x2", nprocs=4), _side("B", emulate="2x2", nprocs=4, algorithms=["ring"])
    with pytest.raises(InputError, match="needs Open MPI 5 or later"):
        ab.run_ab(a, b, out_dir=str(tmp_path / "ab"))
    assert not (tmp_path / "ab").exists()
