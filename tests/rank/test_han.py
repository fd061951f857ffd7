"""native_han (commbench/rank/han.py): where it cannot run, the reason, the same on every rank; across
emulated nodes it runs (tests/run/test_emulate_mpi.py)."""

from commbench.errors import OK
from commbench.rank.han import HAN_COLLECTIVES, han_target
from conftest import commbench, load_run, needs_mpirun


def test_other_backends_and_collectives_coll_han_lacks_are_refused():
    han = object()  # the communicator, as open_han gives it
    assert han_target(han, "mpi", "all_reduce") is han
    assert han_target(han, "gloo", "all_reduce") == "native_han is Open MPI's coll/han: the mpi backend only, not gloo"
    assert han_target(han, "mpi", "reduce_scatter") == ("Open MPI's coll/han has no reduce_scatter (it would run "
                                                        "coll/tuned's, as native)")
    assert han_target("why", "mpi", "all_gather") == "why"  # open_han's reason
    assert set(HAN_COLLECTIVES) == {"all_reduce", "all_gather", "broadcast", "reduce", "gather", "scatter"}


@needs_mpirun
def test_on_one_node_it_is_skipped_and_native_runs(job, tmp_path):
    out = tmp_path / "run"
    job("run", "-n", 2, "--backend", "mpi", "-a", "native,native_han", "-c", "all_reduce,reduce_scatter",
        "--sizes", "1K", "--iters", 2, "-w", 0, "--out", out, "--quiet", check_rc=OK, timeout=300)
    rows, _, meta = load_run(out)
    assert set(rows.algorithm) == {"native"} and len(rows) == 4 and (rows.wrong == 0).all()
    reasons = {(s["collective"], s["reason"]) for s in meta["skipped"] if s["algorithm"] == "native_han"}
    assert reasons == {("all_reduce", "native_han is Open MPI's coll/han, which works across nodes: these ranks are on "
                                      "one node, where it leaves the calls to coll/tuned (native)"),
                       ("reduce_scatter", "Open MPI's coll/han has no reduce_scatter (it would run coll/tuned's, as "
                                          "native)")}
    assert len(meta["skipped"]) == 4
