"""`commbench stragglers` (commbench.analysis.stragglers): the rule on drawn per-rank samples, the
formats and exit codes on folders written through the one writer, and nccl-tests' per-process times
(-I 1 -J) read into the same table."""

import json

import numpy as np
import pytest

from commbench.analysis.stragglers import (CONSISTENT, LATE_SHARE, MIN_SAMPLES, SLOW_SHARE, analyze, judge_point,
                                           render)
from commbench.folder.write import RunFolder
from commbench.folder.schema import RANKS_CSV, build_row
from conftest import DATA, commbench


def _ranks(rng, ranks=4, samples=60, base=100.0, noise=0.02):
    return base * (1 + noise * np.abs(rng.standard_normal((ranks, samples))))


def _verdicts(report):
    return {r.rank: r.verdict for r in report.ranks}


def test_a_rank_late_to_every_call_is_slow_and_the_others_that_waited_are_not():
    rng = np.random.default_rng(0)
    own = _ranks(rng)
    late = np.zeros_like(own)
    late[2] = 30.0  # 30 % of the call, before entering it; the others waited inside theirs
    own[[0, 1, 3]] += 30.0
    rep = judge_point("r", 0, "t", own, late, same_role=True)
    assert _verdicts(rep) == {0: "ok", 1: "ok", 2: "slow", 3: "ok"}
    assert "arrives late" in rep.ranks[2].why and rep.ranks[2].late_us == pytest.approx(30.0)


def test_a_rank_whose_calls_take_longer_is_slow_where_every_rank_has_one_role_only():
    rng = np.random.default_rng(1)
    own = _ranks(rng)
    own[1] *= 1 + 2 * SLOW_SHARE
    assert _verdicts(judge_point("r", 0, "t", own, None, same_role=True))[1] == "slow"
    assert _verdicts(judge_point("r", 0, "t", own, None, same_role=False))[1] == "ok"  # a root differs by role
    own = _ranks(rng)
    own[1] *= 1 + SLOW_SHARE / 2  # under the bar
    assert set(_verdicts(judge_point("r", 0, "t", own, None, same_role=True)).values()) == {"ok"}


def test_spikes_alone_make_a_rank_noisy_and_spikes_shared_by_all_make_no_one_noisy():
    rng = np.random.default_rng(2)
    own = _ranks(rng, samples=100)
    own[3, ::10] *= 3  # 10 % of its samples, alone
    own[:, 5] *= 3  # every rank at once: a shared cause
    rep = judge_point("r", 0, "t", own, None, same_role=True)
    assert _verdicts(rep) == {0: "ok", 1: "ok", 2: "ok", 3: "noisy"}
    assert rep.ranks[3].spikes == 11 and rep.ranks[3].shared_spikes == 1 and rep.ranks[0].shared_spikes == 1


def test_too_few_samples_or_one_rank_is_not_judged_and_the_first_sample_is_measured():
    rng = np.random.default_rng(3)
    assert judge_point("r", 0, "t", _ranks(rng, samples=MIN_SAMPLES - 1), None, True) is None
    assert judge_point("r", 0, "t", _ranks(rng, ranks=1), None, True) is None
    own = _ranks(rng)
    own[:, 0] *= 4
    assert judge_point("r", 0, "t", own, None, True).first_effect == pytest.approx(4, rel=0.1)


def test_a_rank_late_in_fewer_than_the_consistent_share_of_samples_is_ok():
    rng = np.random.default_rng(4)
    own = _ranks(rng, samples=100)
    late = np.zeros_like(own)
    late[0, :int(100 * CONSISTENT) - 5] = 50.0
    assert _verdicts(judge_point("r", 0, "t", own, late, True))[0] == "ok"


def _folder(path, own_by_point, late_by_point=None, hosts=("a", "a", "b", "b"), collective="all_reduce"):
    folder = RunFolder(path)
    folder.create({"run_id": "s1", "label": path.name, "status": "completed", "world_size": len(hosts),
                   "nodes": len(set(hosts)), "node_of_rank": [sorted(set(hosts)).index(h) for h in hosts],
                   "ranks": [{"rank": r, "hostname": h} for r, h in enumerate(hosts)]})
    for point, own in enumerate(own_by_point):
        late = None if late_by_point is None else late_by_point[point]
        per_call = own.max(axis=0)
        row = build_row(run_id="s1", point=point, collective=collective, backend="mpi", algorithm="native",
                        device="cpu", dtype="float32", op="sum", in_place=0, world_size=len(hosts),
                        size_bytes=1024 * (point + 1), time_us=float(np.median(per_call)), samples=own.shape[1], wrong=0)
        folder.add(row, per_call, ranks={r: (own[r].tolist(), None if late is None else late[r].tolist())
                                          for r in range(own.shape[0])})
    folder.finalize()
    return path


def test_a_run_folder_names_the_late_rank_in_every_format_and_exits_1(tmp_path):
    rng = np.random.default_rng(5)
    owns, lates = [], []
    for _ in range(3):
        own, late = _ranks(rng), np.zeros((4, 60))
        late[1], own[[0, 2, 3]] = 40.0, own[[0, 2, 3]] + 40
        owns.append(own)
        lates.append(late)
    d = _folder(tmp_path / "run", owns, lates)
    assert (d / RANKS_CSV).exists()
    out = commbench("stragglers", d, "--format", "json")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["verdict"] == "flagged"
    assert [(f["what"], f["ranks"], f["hosts"], f["nodes"]) for f in doc["flagged"]] == [("rank", [1], ["a"], [0])]
    assert doc["flagged"][0]["measured"] > LATE_SHARE == doc["flagged"][0]["expected"]
    text = commbench("stragglers", d)
    assert text.returncode == 1 and "FLAGGED: rank 1 (a) slow" in text.stdout and "arrives late" in text.stdout
    md = commbench("stragglers", d, "--format", "markdown").stdout
    assert md.splitlines()[0].startswith("| what | run |") and "| SLOW |" in md


def test_a_node_most_of_whose_ranks_are_slow_is_flagged_and_a_healthy_run_exits_0(tmp_path):
    rng = np.random.default_rng(6)
    owns = []
    for _ in range(2):
        own = _ranks(rng)
        own[2:] *= 1.5
        owns.append(own)
    doc = json.loads(commbench("stragglers", _folder(tmp_path / "slow", owns), "--json").stdout)
    # ranks 2 and 3 against the ranks' median of the sample (1.25x): 20 % over; their node b: both
    assert sorted((f["what"], tuple(f["ranks"])) for f in doc["flagged"]) == [
        ("node", (2, 3)), ("rank", (2,)), ("rank", (3,))]
    healthy = commbench("stragglers", _folder(tmp_path / "ok", [_ranks(rng), _ranks(rng)]))
    assert healthy.returncode == 0 and "OK: no rank or node flagged" in healthy.stdout


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    from synthetic_runs import write_run

    old = write_run(tmp_path / "old", [10.0])  # no ranks.csv: written before per-rank times
    out = commbench("stragglers", old)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "no per-rank samples" in out.stderr
    d = _folder(tmp_path / "run", [_ranks(np.random.default_rng(7))])
    out = commbench("stragglers", d, "--format", "yaml")
    assert out.returncode == 2 and "unknown format" in out.stderr
    (d / RANKS_CSV).write_text("run_id,point,job,iteration,rank,time_us,late_us\ns1,0,1,0,0,-5,\n")
    out = commbench("stragglers", d)
    assert out.returncode == 2 and "time_us" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_nccl_tests_per_process_times_give_the_straggler_table(tmp_path):
    """tests/data/nccl_tests_all_reduce_per_process.json: nccl-tests 2.19's -I 1 -J layout, process 2 30 % slower."""
    out = tmp_path / "imported"
    commbench("import", "nccl-tests", DATA / "nccl_tests_all_reduce_per_process.json", "--out", out, check_rc=0)
    doc = json.loads(commbench("stragglers", out, "--format", "json").stdout)
    assert [(f["what"], f["ranks"], f["hosts"]) for f in doc["flagged"]] == [("rank", [2], ["gpu-node-2"])]
    assert "30% longer" in doc["flagged"][0]["why"] and doc["flagged"][0]["late_us"] is None
    meta = json.loads((out / "run.json").read_text())
    assert meta["rank_hosts"] == ["gpu-node-1", "gpu-node-1", "gpu-node-2", "gpu-node-2"]


def test_the_same_per_rank_times_give_the_same_table_from_a_commbench_run_and_an_nccl_tests_report(tmp_path):
    """A commbench folder's per-rank times written as nccl-tests would (per_process_max_times_us), imported:
    every column but the lateness (nccl-tests has none) reads the same."""
    rng = np.random.default_rng(8)
    owns = [np.round(_ranks(rng, samples=20) * (1 + 0.3 * (np.arange(4) == 2))[:, None], 2) for _ in range(2)]
    run = _folder(tmp_path / "run", owns, hosts=("h1", "h1", "h2", "h2"))
    report = {"version": 2, "args": ["./build/all_reduce_perf", "-I", "1", "-J", "x.json"], "nccl_version": 22807,
              "config": {"nthreads": 1, "ngpus": 1, "iterations": 20, "per_iter_timing": True,
                         "devices": [{"rank": r, "hostname": h, "device": r % 2, "device_info": "NVIDIA H100"}
                                     for r, h in enumerate(("h1", "h1", "h2", "h2"))]},
              "results": [{"size": 1024 * (p + 1), "count": 256 * (p + 1), "type": "float", "redop": "sum", "root": -1,
                           "out_of_place": {"time": float(np.median(o.max(axis=0))), "alg_bw": 1.0, "bus_bw": 1.0,
                                            "nwrong": 0.0},
                           "out_of_place_per_iter": {"times_us": o.max(axis=0).tolist(),
                                                     "per_process_max_times_us": o.tolist()}}
                          for p, o in enumerate(owns)]}
    (tmp_path / "report.json").write_text(json.dumps(report))
    commbench("import", "nccl-tests", tmp_path / "report.json", "--out", tmp_path / "imp", check_rc=0)
    ours, theirs = (analyze([str(d)]) for d in (run, tmp_path / "imp"))
    keep = ("time_us", "cv_pct", "spread_pct", "spikes", "shared_spikes")
    assert [(s.what, s.ranks, s.hosts, s.verdict, s.why, [round(s.cells[k], 6) for k in keep if k in s.cells])
            for s in ours.subjects] == [(s.what, s.ranks, s.hosts, s.verdict, s.why,
                                         [round(s.cells[k], 6) for k in keep if k in s.cells]) for s in theirs.subjects]
    assert [s.ranks for s in ours.flagged] == [[2]]
    assert "FLAGGED: rank 2 (h2) slow" in render(theirs, "text")


@pytest.mark.parametrize("change, fragment", [
    (lambda r: r["results"][0]["out_of_place_per_iter"].update(per_process_max_times_us=[[1.0]]),
     "is not 4 lists"),
    (lambda r: r["results"][0]["out_of_place_per_iter"]["per_process_max_times_us"][0].append(5.0),
     "iterations long"),
    (lambda r: r["results"][0]["out_of_place_per_iter"]["times_us"].__setitem__(0, 1e6), "the processes' maximum"),
])
def test_per_process_times_that_do_not_fit_their_report_are_refused(tmp_path, change, fragment):
    report = json.loads((DATA / "nccl_tests_all_reduce_per_process.json").read_text())
    change(report)
    (tmp_path / "r.json").write_text(json.dumps(report))
    out = commbench("import", "nccl-tests", tmp_path / "r.json", "--out", tmp_path / "imp")
    assert out.returncode == 2 and fragment in out.stderr and len(out.stderr.strip().splitlines()) == 1
