"""How a workload's entries are measured here (commbench.workload.measure), without ranks: the
uneven all-to-all's size as its rows record it and its buffers, the groups at once of --concurrent
and what marks them, and the sweeps the plan makes of both."""

from commbench.collectives import COLLECTIVES
from commbench.collectives.peer_traffic import PeerTraffic
from commbench.workload.measure import Run, Target, at_once, plan, run_label, target
from commbench.workload.mix import Entry


def entry(collective="all_reduce", group_size=8, size=1 << 20, spread=None, kind="dp") -> Entry:
    return Entry(kind, kind, collective, group_size, group_size, size, 3, "float32", "note", spread)


def test_an_uneven_all_to_all_is_read_at_the_size_its_blocks_add_up_to():
    t = target(entry("all_to_allv", size=1000 * 4 * 3, spread=0.5), 4, 1.0, "float32")
    recorded = COLLECTIVES["all_to_allv"].counts_for(12000, 4, 4, PeerTraffic(spread=0.5)).size_bytes
    assert recorded < 12000 and (t.size_bytes, t.asked_bytes, t.sweep_bytes) == (recorded, 12000, 12000)
    even = target(entry("all_to_all", size=12000), 4, 1.0, "float32")
    assert even.asked_bytes is None and even.sweep_bytes == even.size_bytes == 12000


def test_an_all_to_allv_asked_in_place_is_measured_out_of_place_and_marked():
    t = target(entry("all_to_allv", spread=0.0), 4, 1.0, "float32", in_place=True)
    assert t.in_place is False and "out of place (it has no in-place form)" in t.marks
    assert target(entry("all_reduce"), 4, 1.0, "float32", in_place=True).in_place is True


def test_groups_at_once_as_the_job_lays_them_out():
    alone = Target(ranks=2, size_bytes=64)
    tp = at_once(alone, 8, stride=1)
    assert (tp.concurrent, tp.concurrent_as, tp.concurrent_marks) == ("tp=2", "div:2", ())
    dp = at_once(alone, 8, stride=4)  # the job's dp groups 4 apart, as dp=2 lays them out on 8 ranks
    assert (dp.concurrent, dp.concurrent_marks) == ("dp=2", ())
    other = at_once(alone, 8, stride=2)
    assert other.concurrent_marks == ("strided by 4 here (by 2 in the job)",)
    nodes = at_once(alone, 8, stride=4, per_node=2)  # alone on node 0; at once {0, 4}: nodes 0 and 2
    assert nodes.concurrent_marks == ("its group spans 2 node(s) at once, 1 alone",)
    assert at_once(alone, 2, stride=1).concurrent_why.startswith("not measured at once: 2 ranks here hold no second")
    assert at_once(alone, 5, stride=1).concurrent_why == "not measured at once: groups of 2 do not divide the 5 ranks here"
    assert at_once(Target(why="nope"), 8, 1).concurrent == ""


def test_the_plan_measures_groups_at_once_at_the_entries_sizes_and_no_ladder():
    e = entry()
    t = at_once(target(e, 4, 1.0, "float32"), 8, stride=1)
    runs = plan([(e, t)], "float32", calibrate=True)
    alone, once = Run("all_reduce", 4), Run("all_reduce", 4, "tp=4")
    assert list(runs) == [alone, once] and runs[once] == [t.size_bytes] and len(runs[alone]) > 1
    assert once.label == run_label("all_reduce", 4, "tp=4") == "all_reduce-4-at-once-tp4"
