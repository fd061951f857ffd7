"""commbench.plan: the ordered list of points every rank builds from the spec."""

from itertools import product

from commbench.collectives import COLLECTIVES, Collective
from commbench.plan import Point, build_plan, rounding_twins
from commbench.spec import SweepSpec


def _spec(**kw):
    base = dict(collectives=["all_reduce", "all_gather", "reduce_scatter"], backends=["mpi"],
                algorithms=["native", "ring"], dtypes=["float32", "int8"], ops=["sum", "max"],
                in_place=[False, True], sizes=[8, 1024, 65536], nprocs=2, run_id="r", out_dir="/tmp/x")
    return SweepSpec(**(base | kw)).validate()


def test_indexes_are_positions():
    plan = build_plan(_spec())
    assert [p.index for p in plan] == list(range(len(plan)))
    assert len({(p.backend, p.collective, p.algorithm, p.dtype, p.op, p.in_place, p.size) for p in plan}) == len(plan)


def test_order_is_backend_collective_algorithm_dtype_op_mode_size():
    """Sizes vary fastest, so one table per (collective, algorithm, dtype, op, mode) is contiguous."""
    spec = _spec()
    expected = [(b, c, a, d, o if COLLECTIVES[c].reduces else None, m, s)
                for b, c, a, d in product(spec.backends, spec.collectives, spec.algorithms, spec.dtypes)
                for o in (spec.ops if COLLECTIVES[c].reduces else [None])
                for m, s in product(spec.in_place, spec.sizes)]
    got = [(p.backend, p.collective, p.algorithm, p.dtype, p.op, p.in_place, p.size) for p in build_plan(spec)]
    assert got == expected
    assert got[:3] == [("mpi", "all_reduce", "native", "float32", "sum", False, s) for s in (8, 1024, 65536)]


def test_ops_only_for_reducing_collectives():
    plan = build_plan(_spec())
    per = {c: [p for p in plan if p.collective == c] for c in ("all_reduce", "all_gather", "reduce_scatter")}
    assert {p.op for p in per["all_gather"]} == {None}
    assert {p.op for p in per["all_reduce"]} == {p.op for p in per["reduce_scatter"]} == {"sum", "max"}
    one_op = 2 * 2 * 2 * 3  # algorithms x dtypes x modes x sizes
    assert (len(per["all_gather"]), len(per["all_reduce"]), len(per["reduce_scatter"])) == (one_op, 2 * one_op, 2 * one_op)


def test_the_point_count_is_the_plans_without_building_it():
    """Issue 64: the count multiplied ops for collectives that do not reduce (--dry-run listed 4 combinations of
    all_reduce, all_gather x sum, max where 3 run; the point cap counted them too)."""
    for spec in (_spec(), _spec(collectives=["all_gather"]), _spec(collectives=["all_reduce", "all_gather"], dtypes=["float32"]),
                 _spec(backends=["mpi", "gloo"], collectives=["all_gather", "all_reduce"])):
        plan = build_plan(spec)
        assert spec.point_count() == len(plan)
        # one enumeration of the combinations: the plan's, each at every size in turn (and the dry run's lines)
        assert [(p.backend, p.collective, p.algorithm, p.dtype, p.op, p.in_place) for p in plan[::len(spec.sizes)]] \
            == spec.combinations()
        assert all(p.size == spec.sizes[p.index % len(spec.sizes)] for p in plan)
    from commbench.cli.points import spec_lines

    lines = spec_lines(_spec(collectives=["all_reduce", "all_gather"], algorithms=["native"], dtypes=["float32"],
                             in_place=[True]))
    assert [line.split()[:5] for line in lines] == [["all_reduce", "mpi", "native", "float32", "sum"],
                                                     ["all_reduce", "mpi", "native", "float32", "max"],
                                                     ["all_gather", "mpi", "native", "float32", "none"]]


def test_a_registered_collective_that_does_not_reduce_gets_no_op(monkeypatch):
    """The op axis follows the collective's own `reduces`, not a list of names."""
    class Toy(Collective):
        name, reduces = "toy_gather", False

    monkeypatch.setitem(COLLECTIVES, "toy_gather", Toy())
    plan = build_plan(_spec(collectives=["toy_gather"], algorithms=["native"], dtypes=["float32"]))
    assert len(plan) == 2 * 3 and {p.op for p in plan} == {None}


def test_done_points_do_not_move_indexes():
    """--resume passes the measured indexes; the plan, and so every index, stays the same."""
    spec = _spec()
    resumed = _spec(done_points=[0, 5, 17])
    assert build_plan(resumed) == build_plan(spec)


def test_every_rank_builds_the_same_plan_from_the_spec_it_receives():
    spec = _spec(label="x")
    assert build_plan(SweepSpec.from_json(spec.to_json())) == build_plan(spec)


def test_point_as_dict():
    p = build_plan(_spec(collectives=["all_gather"]))[0]
    assert p.as_dict() == {"index": 0, "backend": "mpi", "collective": "all_gather", "algorithm": "native",
                           "dtype": "float32", "op": None, "in_place": False, "size": 8}
    assert Point(**p.as_dict()) == p


def test_a_size_that_rounds_to_an_earlier_ones_is_measured_once():
    """`--sizes 8,9,10,16` over 2 ranks: 9 and 10 B of float32 are 8 B (whole elements; all-gather's
    count a multiple of the ranks as well), measured as size 8; 16 B is a point of its own; the same
    size in another table (int8) is not a repeat."""
    plan = build_plan(_spec(sizes=[8, 9, 10, 16], dtypes=["float32", "int8"]))
    twins = rounding_twins(plan, 2)
    f32 = [p for p in plan if p.dtype == "float32" and p.algorithm == "native" and p.op in (None, "sum")
           and not p.in_place and p.collective in ("all_reduce", "all_gather")]
    assert [(p.collective, p.size, twins.get(p.index)) for p in f32] == [
        ("all_reduce", 8, None), ("all_reduce", 9, 8), ("all_reduce", 10, 8), ("all_reduce", 16, None),
        ("all_gather", 8, None), ("all_gather", 9, 8), ("all_gather", 10, 8), ("all_gather", 16, None)]
    int8 = [p for p in plan if p.dtype == "int8" and p.collective == "all_reduce" and p.op == "sum"]
    assert all(p.index not in twins for p in int8)  # every size a count of its own
