"""Several communicators at once (issue 65, --split): nccl-tests' NCCL_TESTS_SPLIT colors and the tp=/dp=
shorthands; in real jobs every group runs the same collective at the same moment, exact, each group's time
and bus bandwidth recorded beside the aggregate; what cannot be split refused in one line."""

import pytest

from commbench.errors import BAD_INPUT, OK, InputError
from commbench.spec import SweepSpec
from commbench.split import Split, parse
from conftest import commbench, load_run, needs_mpirun


@pytest.mark.parametrize("text,world,groups", [
    ("mod:2", 4, [[0, 2], [1, 3]]), ("MOD 2", 4, [[0, 2], [1, 3]]), ("%2", 4, [[0, 2], [1, 3]]),
    ("div:2", 4, [[0, 1], [2, 3]]), ("and:0x1", 4, [[0, 2], [1, 3]]), ("AND 0b10", 4, [[0, 1], [2, 3]]),
    ("or:1", 4, [[0, 1], [2, 3]]), ("tp=2", 8, [[0, 1], [2, 3], [4, 5], [6, 7]]),
    ("dp=2", 8, [[0, 4], [1, 5], [2, 6], [3, 7]]), ("div:4", 4, [[0, 1, 2, 3]])])
def test_colors_are_nccl_tests(text, world, groups):
    assert parse(text, world).groups(world) == groups


def test_values_in_nccl_tests_bases():
    assert parse("mod:0x2", 4) == parse("MOD 2", 4) == parse("mod:02", 4) == Split("mod", 2)
    assert parse("AND 0b1", 4) == Split("and", 1) and parse("mod:08", 8) == Split("mod", 8)


@pytest.mark.parametrize("text,why", [("mod:3", "groups of 1 and 2 ranks out of 4"), ("xor:1", "expected MODE:V"),
                                      ("mod:0", "needs a value from 1"), ("tp=3", "tp=G needs G to divide"),
                                      ("dp=0", "dp=G needs G to divide"), ("div:", "expected MODE:V")])
def test_a_split_that_is_no_split_is_one_line(text, why):
    with pytest.raises(InputError, match=why):
        parse(text, 4)


def test_the_spec_keeps_the_canonical_split_and_the_group_size():
    spec = SweepSpec.from_options(nprocs=4, backend="mpi", split="MOD 2")
    assert spec.split == "mod:2" and spec.group_size() == 2 and Split("mod", 2).text == spec.split
    for bad, why in [(dict(algorithm="native_han"), "--split runs"), (dict(algorithm="ring_kernel"), "--split runs"),
                     (dict(collective="broadcast", root=3), "--root 3"), (dict(split="mod:3"), "groups of")]:
        with pytest.raises(InputError, match=why):
            SweepSpec.from_options(nprocs=4, backend="mpi", **({"split": "mod:2"} | bad))


def test_ab_refuses_split():
    proc = commbench("ab", "--split", "mod:2", check_rc=BAD_INPUT)
    assert proc.stderr.count("\n") == 1 and "--split" in proc.stderr


def _groups(row) -> tuple[list[float], list[float]]:
    return ([float(t) for t in str(row["group_time_us"]).split(";")],
            [float(b) for b in str(row["group_busbw_gbps"]).split(";")])


@needs_mpirun
@pytest.mark.parametrize("backend,split,world", [pytest.param("mpi", "mod:2", 4, marks=pytest.mark.smoke),
                                                 ("mpi", "tp=2", 6), ("gloo", "div:2", 4)])
def test_every_group_runs_at_once_exact(job, tmp_path, backend, split, world):
    if backend == "gloo":
        pytest.importorskip("torch")
    out = tmp_path / "run"
    job("run", "-n", world, "--backend", backend, "--split", split, "-c", "all_reduce,all_gather,all_to_allv",
        "-a", "native,ring,pairwise", "--sizes", "64,4100", "--iters", 4, "-w", 1, "--oversubscribe", "--out", out,
        "--quiet", check_rc=OK)
    rows, _, meta = load_run(out)
    groups = parse(split, world).groups(world)
    assert (rows.wrong == 0).all() and len(rows) > 0
    assert (rows.world_size == len(groups[0])).all() and (rows.groups == len(groups)).all()
    assert set(rows.split) == {parse(split, world).text} and meta["spec"]["split"] == parse(split, world).text
    for r in rows.to_dict("records"):
        times, busbw = _groups(r)
        assert len(times) == len(busbw) == len(groups) and min(times) > 0 and min(busbw) > 0  # every group's
        # each group's median is at most the median of the per-sample maxima over all groups (the row's time);
        # group_time_us is written to 4 decimals, which may round a group's median up by 5e-5
        assert max(times) <= r["time_us"] * (1 + 1e-6) + 5e-5
        assert r["busbw_total_gbps"] == pytest.approx(sum(busbw), rel=1e-3)
    assert set(rows.algorithm) == {"native", "ring", "pairwise"}


@needs_mpirun
def test_a_wrong_element_in_one_group_is_caught(job, tmp_path):
    from conftest import fault_env

    out = tmp_path / "run"
    proc = job("run", "-n", 4, "--backend", "mpi", "--split", "mod:2", "-c", "all_reduce", "--sizes", "4096",
               "--iters", 2, "-w", 1, "--oversubscribe", "--out", out, "--quiet", env=fault_env(wrong=3))
    assert proc.returncode != OK
    rows, _, _ = load_run(out)
    assert (rows.wrong > 0).all()


def test_compare_names_a_changed_split_as_a_context_change():
    from commbench.analysis.conditions import changes

    plain, split = {"spec": {"split": None}, "world_size": 4}, {"spec": {"split": "mod:2"}, "world_size": 4}
    assert [str(c) for c in changes([plain], [split]) if c.fact == "split"] == ["split: none -> mod:2"]
