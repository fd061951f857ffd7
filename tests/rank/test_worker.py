"""commbench.rank.worker, the rank's entry point, in parts that need no job: a point bound or the
reason it cannot run here, the notes shown once, the row rank 0 sends, and the sweep's loop over
the plan (its session and points faked)."""

from types import SimpleNamespace

import numpy as np
import pytest

from commbench.dtypes import DTYPES
from commbench.rank import worker
from commbench.algorithms import ALGORITHMS, Context
from commbench.collectives import COLLECTIVES
from commbench.rank.harness import Measurement
from commbench.plan import build_plan, rounding_twins
from commbench.folder.schema import COLUMNS
from harness_fakes import FakeComm, FakeWorld, small_spec


# --- a point bound, or why it cannot run here ---------------------------------------------------------

class Comm(FakeComm):
    """A fake communicator whose library answers `answer` for its own collectives ("base": the
    Communicator's default, which finds no call in a library named fakelib)."""

    library_title = "fakelib"
    answer = None

    def __init__(self, *args):
        super().__init__(*args)
        self.asked = []

    def unsupported(self, collective, dtype, op, in_place, native=True):
        self.asked.append((collective, dtype.name, op, in_place, native))
        return super().unsupported(collective, dtype, op, in_place, native) if self.answer == "base" else (
            self.answer if native else None)


def _session(spec, world=2, nodes_of=None) -> worker.Session:
    comm = FakeWorld(world, comm_class=Comm).comm(0)
    nodes_of = nodes_of or [0] * world
    return worker.Session(spec, {"mpi": comm}, 0, world, nodes_of, build_plan(spec),
                          {"mpi": Context(comm, nodes_of)}, None, None)


def _bind(s, spec, point):
    return worker.bind_point(s, spec, point, rounding_twins(s.plan, s.world))


def _point(spec, **match):
    return next(p for p in build_plan(spec) if all(getattr(p, k) == v for k, v in match.items()))


def test_a_size_that_rounds_to_one_measured_before_in_its_plan_is_skipped(tmp_path):
    """9 B of float32 is 8 B: measured once, as size 8, in the plan the point is of (an ab side's own,
    whose indexes are not the merged session's)."""
    spec = small_spec(tmp_path, sizes=[8, 9, 16])
    s = _session(spec)
    assert isinstance(_bind(s, spec, _point(spec, size=8)), worker.Bound)
    assert _bind(s, spec, _point(spec, size=9)) == "9 B rounds to 8 B over 2 ranks, measured as size 8"
    assert isinstance(_bind(s, spec, _point(spec, size=16)), worker.Bound)
    side = small_spec(tmp_path, sizes=[9])  # a plan of its own: nothing before its 9 B
    assert isinstance(worker.bind_point(s, side, build_plan(side)[0], rounding_twins(build_plan(side), 2)), worker.Bound)


def test_a_native_point_binds_with_the_librarys_call(tmp_path):
    spec = small_spec(tmp_path, collectives=["all_gather"], dtypes=["float64"], in_place=[True])
    s = _session(spec)
    point = _point(spec, size=1024)
    b = _bind(s, spec, point)
    assert isinstance(b, worker.Bound) and b.binder is None and b.algo is None and b.backend == "mpi"
    assert b.comm is s.comms["mpi"] and b.coll is COLLECTIVES["all_gather"] and b.dtype is DTYPES["float64"]
    assert b.counts == COLLECTIVES["all_gather"].counts(1024, 8, 2)
    assert b.comm.asked == [("all_gather", "float64", None, True, True)]  # the library's own call asked about


def test_the_reasons_a_point_cannot_run(tmp_path):
    spec = small_spec(tmp_path, collectives=["all_reduce", "all_gather"], algorithms=["native", "tree", "hierarchical"],
                 sizes=[1, 1024])
    s = _session(spec, world=3, nodes_of=[0, 0, 1])
    s.comms["mpi"].answer = "base"
    assert _bind(s, spec, _point(spec, algorithm="native", size=1024)) == (
        "fakelib has no all-reduce here (commbench's algorithms may run it)")
    s.comms["mpi"].answer = "the library refuses"
    assert _bind(s, spec, _point(spec, algorithm="native", size=1024)) == "the library refuses"
    assert _bind(s, spec, _point(spec, algorithm="tree", collective="all_gather")) == (
        "tree has no all-gather (it runs all-reduce, broadcast, reduce)")
    assert _bind(s, spec, _point(spec, algorithm="hierarchical", size=1024)) == (
        "hierarchical needs the same number of ranks on every node (found [1, 2])")
    # an own algorithm asks the library for buffers and a reducer only (native=False)
    assert s.comms["mpi"].asked[-1][-1] is False
    assert _bind(s, spec, _point(spec, algorithm="tree", collective="all_reduce", size=1)) == (
        "1 B of float32 over 3 ranks is less than one element per rank")


def test_an_algorithms_point_gets_its_binder_and_context(tmp_path):
    spec = small_spec(tmp_path, algorithms=["ring"], sizes=[1 << 20], dtypes=["float64"], segment_bytes=4096,
                      timeout=50.0, channels=3)
    s = _session(spec)
    b = _bind(s, spec, _point(spec))
    assert b.algo is ALGORITHMS["ring"] and callable(b.binder) and b.binder.alloc is None  # ring: the comm's buffers
    ctx = s.contexts["mpi"]
    assert ctx.segment_elems == 4096 // 8 and ctx.channels == 3
    assert ctx.timeout_s == pytest.approx(worker.KERNEL_TIMEOUT_SHARE * 50.0)  # the kernel reports before the watchdog
    spec.segment_bytes = 1  # less than an element: one
    _bind(s, spec, _point(spec))
    assert ctx.segment_elems == 1


def test_notes_are_shown_once(tmp_path):
    spec = small_spec(tmp_path)
    s = _session(spec)
    b = _bind(s, spec, _point(spec, size=8))
    b.comm.reducer = SimpleNamespace(fallback="bfloat16 is reduced in numpy")
    b.comm.notes = ["the C loop did not build", ""]
    s.contexts["mpi"].notes.append("the ring ran in rank order")
    first = worker.notes_of(s, b, ("the CUDA graph was not captured", "the C loop did not build"))
    assert first == ["bfloat16 is reduced in numpy", "the C loop did not build", "the ring ran in rank order",
                     "the CUDA graph was not captured"]
    assert worker.notes_of(s, b) == [] and worker.notes_of(s, b, ("the CUDA graph was not captured",)) == []
    assert worker.notes_of(s, b, ("something new",)) == ["something new"]
    b.comm.reducer = SimpleNamespace()  # no fallback: nothing to say
    assert s.warned == first + ["something new"]


# --- rank 0's row ------------------------------------------------------------------------------------

def test_make_row_is_a_results_row_of_the_measurement(tmp_path):
    spec = small_spec(tmp_path, collectives=["all_gather"], label="lab")
    point = _point(spec, size=1024)
    counts = COLLECTIVES["all_gather"].counts(1024, 4, 2)
    m = Measurement(samples_s=np.array([3e-6, 1e-6, 2e-6]), batch=4, wrong=2, warmup=5, timer="native")
    row = worker.make_row(spec, point, counts, m, 2, 1, 2, "cpu", internode_bytes_measured=7)
    assert list(row) == [c for c in COLUMNS if c in row]  # in column order
    assert (row["run_id"], row["label"], row["point"], row["collective"], row["op"]) == ("r1", "lab", point.index,
                                                                                        "all_gather", "none")
    assert (row["size_bytes"], row["count"], row["world_size"], row["nodes"], row["ranks_per_node"]) == (
        counts.size_bytes, counts.count, 2, 1, 2)
    assert row["time_us"] == pytest.approx(2.0) and row["time_us_min"] == pytest.approx(1.0)
    assert (row["samples"], row["iterations"], row["batch"], row["warmup"]) == (3, 12, 4, 5)
    assert (row["timer"], row["wrong"], row["placement"], row["internode_bytes_measured"]) == ("native", 2, "", 7)
    assert row["busbw_gbps"] == pytest.approx(counts.size_bytes / 2e-6 / 1e9 * COLLECTIVES["all_gather"].bus_factor(2))
    spec.emulate, spec.placement = "2x2", "round-robin"  # an emulated cluster records where the ranks sat
    assert worker.make_row(spec, point, counts, m, 4, 2, 2, "cpu")["placement"] == "round-robin"
    with pytest.raises(ValueError, match="not results columns: colour"):
        worker.make_row(spec, point, counts, m, 2, 1, 2, "cpu", colour="red")


# --- the sweep's loop ---------------------------------------------------------------------------------

class Closing:
    def __init__(self):
        self.closed = 0

    def close(self):
        self.closed += 1


@pytest.mark.parametrize("rank", [0, 1])
def test_run_measures_the_points_not_done_and_rank_0_says_done(tmp_path, monkeypatch, rank):
    spec = small_spec(tmp_path, sizes=[8, 16, 32, 64])
    spec.done_points = [1]
    comm, tuning = Closing(), Closing()
    session = SimpleNamespace(plan=build_plan(spec), rank=rank, comms={"mpi": comm}, tuning=tuning, han=None)
    measured = []

    def run_point(s, point, emit, progress):
        assert s is session
        measured.append(point.index)
        return {0: 3, 2: None, 3: 4}[point.index]  # point 2 cannot run here

    monkeypatch.setattr(worker, "open_session", lambda s, emit: session)
    monkeypatch.setattr(worker, "run_point", run_point)
    events = []
    total = worker.run(spec, emit=lambda kind, **data: events.append((kind, data)), progress=lambda *a, **k: None)
    assert measured == [0, 2, 3] and total == 7
    assert events == ([("done", {"wrong": 7, "rows": 2})] if rank == 0 else [])
    assert comm.closed == 1 and tuning.closed == 1


def test_a_rows_library_choice_is_what_the_call_ran_or_what_the_algorithm_fixes():
    """run's rows and ab's alike (commbench.rank.turns): the bound call's schedule where it has one,
    coll/han for native_han, else nothing."""
    point = SimpleNamespace(algorithm="native_han")
    assert worker.library_choice(point, None) == "coll/han"
    assert worker.library_choice(SimpleNamespace(algorithm="hierarchical_kernel"), "in order") == "in order"
    assert worker.library_choice(SimpleNamespace(algorithm="native"), None) is None
