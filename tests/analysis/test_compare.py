"""compare: the job is the unit. Identical runs are not regressions, a real 25% slowdown measured by
3 jobs a side is, one job a side is inconclusive, an interval across the threshold is inconclusive
with what --repeat would settle it; exit codes 0 / 1 / 2 and --strict; context changes above the
verdicts; old folders (no `job` column, one folder per job) still load; several candidates give
each point's history and an HTML page."""

import json
import sys
from xml.etree import ElementTree as ET

import numpy as np
import pytest

from conftest import ROOT, commbench, needs_mpirun
from synthetic_runs import drop_job_column, write_run

sys.path.insert(0, str(ROOT / "benchmarks"))
from compare_false_positives import inject_slowdown  # noqa: E402
from commbench.errors import BAD_INPUT, FAILED, NO_VERDICT, OK

QUIET = [10.0, 10.15, 9.9]  # job medians: 1.5% spread between jobs, as on a quiet machine


def _json(*args, rc):
    proc = commbench("compare", *args, "--format", "json", check_rc=rc)
    return json.loads(proc.stdout)


def test_identical_runs_are_unchanged(tmp_path):
    base = write_run(tmp_path / "base", QUIET, seed=1)
    cand = write_run(tmp_path / "cand", [9.95, 10.1, 10.05], seed=2)
    doc = _json(base, cand, rc=OK)
    assert [p["verdict"] for p in doc["points"]] == ["unchanged", "unchanged"], doc["points"]
    assert all(p["jobs"] == [3, 3] and p["ci_low"] < 1 < p["ci_high"] for p in doc["points"])
    # JUnit: a passing case carries its figures too (properties, and a line in system-out)
    report = tmp_path / "junit.xml"
    commbench("compare", base, cand, "--format", "junit", "-o", report, check_rc=OK)
    case = ET.parse(report).getroot().find("testcase")
    props = {p.get("name"): p.get("value") for p in case.find("properties")}
    point = next(p for p in doc["points"] if p["key"]["size_bytes"] == 1024)
    assert case.get("name").endswith("1024 B x2") and props["verdict"] == "unchanged" and props["jobs"] == "3/3"
    assert [float(props[k]) for k in ("ratio", "ci_low", "ci_high")] == pytest.approx(
        [point["ratio"], point["ci_low"], point["ci_high"]], abs=1e-4)
    assert float(props["baseline_us"]) == pytest.approx(point["baseline_us"], abs=1e-3)
    assert case.find("system-out").text.startswith(f"unchanged, ratio {point['ratio']:.3f}: baseline ")


def test_real_25_percent_slowdown_with_3_jobs_is_a_regression(tmp_path):
    base = write_run(tmp_path / "base", QUIET, seed=1)
    cand = write_run(tmp_path / "cand", [12.4, 12.6, 12.55], seed=3)  # 25% slower, jobs of their own
    proc = commbench("compare", base, cand, check_rc=FAILED)
    assert "2 regressions, 0 improvements, 0 unchanged, 0 inconclusive" in proc.stdout
    doc = _json(base, cand, rc=FAILED)
    for p in doc["points"]:
        assert p["verdict"] == "regression" and p["ci_low"] > 1.05 and p["ci_low"] < 1.25 < p["ci_high"], p
        assert p["p_value"] < 0.01 and p["samples"] == [600, 600]


def test_faster_is_an_improvement(tmp_path):
    base = write_run(tmp_path / "base", QUIET, seed=1)
    faster = write_run(tmp_path / "fast", [8.0, 8.1, 7.95], seed=4)
    proc = commbench("compare", base, faster, "--format", "markdown", check_rc=OK)
    assert "2 improvements" in proc.stdout and proc.stdout.count(":rocket:") == 2


@pytest.mark.parametrize("factor", [1.0, 4.1])
def test_one_job_a_side_is_inconclusive_whatever_the_ratio(tmp_path, factor):
    base = write_run(tmp_path / "base", [10.0], seed=1)
    cand = write_run(tmp_path / "cand", [10.0 * factor], seed=2)
    proc = commbench("compare", base, cand, check_rc=NO_VERDICT)  # nothing judged: not a pass
    assert "0 regressions" in proc.stdout and "2 inconclusive" in proc.stdout
    assert proc.stdout.rstrip().endswith("no verdict: none of the 2 point(s) could be judged, so the comparison "
                                         "neither passes nor fails (exit 2)")
    assert "jobs per point: baseline 1, candidate 1" in proc.stdout
    assert "measure both sides with --repeat 3 or more" in proc.stdout
    strict = commbench("compare", base, cand, "--strict", check_rc=FAILED)
    assert "--strict: inconclusive points fail the comparison" in strict.stdout


def test_interval_across_the_threshold_is_inconclusive_and_says_what_settles_it(tmp_path):
    base = write_run(tmp_path / "base", [10.0, 10.6, 9.5], seed=1)  # jobs 5% apart
    cand = write_run(tmp_path / "cand", [11.0, 10.4, 11.5], seed=2)  # about 7% slower
    doc = _json(base, cand, rc=NO_VERDICT)
    for p in doc["points"]:
        assert p["verdict"] == "inconclusive" and p["ci_low"] < 1.05 < p["ci_high"], p
        assert p["repeat_needed"] and 3 < p["repeat_needed"] <= 100 and f"--repeat {p['repeat_needed']}" in p["note"]
    assert "would likely settle" in doc["advice"][0]
    assert _json(base, cand, "--strict", rc=FAILED)["exit_code"] == 1


def test_the_summary_says_how_large_a_slowdown_the_jobs_can_see(tmp_path):
    """(1 + threshold) x the interval's upper half-width: 5 % jobs see about 13 % at best; 1.5 %
    jobs, 8 %; one job a side has no spread, so no such line."""
    base = write_run(tmp_path / "base", [10.0, 10.6, 9.5], seed=1)
    cand = write_run(tmp_path / "cand", [11.0, 10.4, 11.5], seed=2)
    doc = _json(base, cand, rc=NO_VERDICT)
    reach = [1.05 * p["ci_high"] / p["ratio"] for p in doc["points"]]
    [line] = [a for a in doc["advice"] if "smaller ones go unseen" in a]
    assert f"about {np.median(reach) - 1:.0%} or more" in line and f"{min(reach) - 1:.0%} at the steadiest" in line
    assert 1.10 < min(reach) < 1.30
    quiet = _json(write_run(tmp_path / "q1", QUIET, seed=1), write_run(tmp_path / "q2", [9.95, 10.1, 10.05], seed=2),
                  rc=OK)
    [line] = [a for a in quiet["advice"] if "smaller ones go unseen" in a]
    assert 1.05 < 1 + int(line.split("about ")[1].split("%")[0]) / 100 < 1.12
    one = _json(write_run(tmp_path / "o1", [10.0], seed=1), write_run(tmp_path / "o2", [10.0], seed=2), rc=NO_VERDICT)
    assert not [a for a in one["advice"] if "unseen" in a]


def test_a_slower_side_beside_other_work_is_inconclusive(tmp_path):
    base = write_run(tmp_path / "base", QUIET, seed=1, background=[0.0, 0.02, 0.0])
    busy = write_run(tmp_path / "busy", [12.4, 12.6, 12.55], seed=3, background=[0.9, 1.0, 0.8])
    doc = _json(base, busy, rc=NO_VERDICT)
    assert all(p["verdict"] == "inconclusive" and "ran beside other work" in p["note"] for p in doc["points"])
    quiet = write_run(tmp_path / "quiet", [12.4, 12.6, 12.55], seed=3, background=[0.0, 0.0, 0.1])
    assert all(p["verdict"] == "regression" for p in _json(base, quiet, rc=FAILED)["points"])


def test_context_changes_are_printed_above_the_verdicts(tmp_path):
    base = write_run(tmp_path / "base", QUIET, seed=1)
    cand = write_run(tmp_path / "cand", [9.95, 10.1, 10.05], seed=2, meta={
        "versions": {"mpi_library": "Open MPI v5.0.12\x00", "python": "3.11.7", "commbench": "0.1.0"},
        "ranks": [{"hostname": "node-b", "rank": 0}, {"hostname": "node-b", "rank": 1}],
        "world_size": 2, "launcher": "srun", "rank0_environment": {"OMPI_MCA_btl": "self,vader", "NCCL_ALGO": "Ring"}})
    out = commbench("compare", base, cand, check_rc=OK).stdout
    context, verdicts = out.split("point ", 1)
    assert "context changes, baseline -> candidate:" in context
    for line in ("version mpi_library: Open MPI v5.0.11 -> Open MPI v5.0.12", "hosts: node-a -> node-b",
                 "launcher: mpirun -> srun", "env NCCL_ALGO: (unset) -> Ring"):
        assert line in context, context
    assert "python" not in context and "OMPI_MCA_btl" not in context  # unchanged facts are not listed
    twin = write_run(tmp_path / "twin", QUIET, seed=3)  # measured under the same facts as base
    assert "context changes" not in commbench("compare", base, twin, check_rc=OK).stdout
    itself = commbench("compare", base, base, check_rc=BAD_INPUT).stderr
    assert "is the baseline itself" in itself and len(itself.strip().splitlines()) == 1


def test_old_folders_load_one_folder_per_job(tmp_path):
    """Before `job`: a suite's repeat made folders <label>.1..N, each one job, with CSV samples."""
    base, cand = tmp_path / "base", tmp_path / "cand"
    for k, (b, c) in enumerate(zip(QUIET, [12.4, 12.6, 12.55], strict=True), 1):
        drop_job_column(write_run(base / f"native.{k}", [b], seed=k, run_id=f"b{k}"))
        drop_job_column(write_run(cand / f"native.{k}", [c], seed=10 + k, run_id=f"c{k}"))
    doc = _json(base, cand, rc=FAILED)
    assert all(p["jobs"] == [3, 3] and p["verdict"] == "regression" for p in doc["points"])
    commbench("report", base, cand, "-o", tmp_path / "r.html", check_rc=OK)


def test_trend_over_several_candidates(tmp_path):
    base = write_run(tmp_path / "base", QUIET, seed=1)
    nights = [write_run(tmp_path / f"night{i}", [m * f for m in QUIET], seed=20 + i)
              for i, f in enumerate([1.0, 0.99, 1.3])]
    html = tmp_path / "trend.html"
    proc = commbench("compare", base, *nights, "--html", html, check_rc=FAILED)
    assert "candidates (oldest first)" in proc.stdout and "history" in proc.stdout
    doc = _json(base, *nights, rc=FAILED)
    assert doc["candidate"] == str(nights[-1]) and doc["candidates"] == [str(n) for n in nights]
    for p in doc["points"]:
        assert [h["verdict"] for h in p["history"]] == ["unchanged", "unchanged", "regression"], p["history"]
        assert all(h["level"][1] < h["level"][0] < h["level"][2] for h in p["history"])
    page = html.read_text()
    assert page.count('class="plotly-graph-div"') == 1 and "night2" in page and "95% band" in page


def test_junit_inconclusive_is_skipped_unless_strict(tmp_path):
    base = write_run(tmp_path / "base", [10.0], seed=1)
    partial = write_run(tmp_path / "cand", [10.0], seed=2)
    rows = (partial / "results.csv").read_text().splitlines()
    (partial / "results.csv").write_text("\n".join(rows[:-1]) + "\n")
    report = tmp_path / "junit.xml"
    commbench("compare", base, partial, "--format", "junit", "-o", report, "--allow-missing", check_rc=NO_VERDICT)
    suite = ET.parse(report).getroot()
    assert (suite.get("tests"), suite.get("skipped"), suite.get("failures")) == ("2", "2", "0")
    commbench("compare", base, partial, "--format", "junit", "-o", report, "--strict", "--allow-missing",
              check_rc=FAILED)
    suite = ET.parse(report).getroot()
    assert (suite.get("skipped"), suite.get("failures")) == ("1", "1")


def test_a_point_the_candidate_lacks_fails_the_gate_unless_allowed(tmp_path):
    """A point that was not measured is no point that did not regress."""
    base = write_run(tmp_path / "base", [10.0], seed=1)
    partial = write_run(tmp_path / "cand", [10.0], seed=2)
    rows = (partial / "results.csv").read_text().splitlines()
    (partial / "results.csv").write_text("\n".join(rows[:-1]) + "\n")  # one job: its last point is gone
    report = tmp_path / "junit.xml"
    proc = commbench("compare", base, partial, "--format", "junit", "-o", report, check_rc=FAILED)
    suite = ET.parse(report).getroot()
    assert suite.get("failures") == "1" and suite.find("testcase[@classname='commbench.missing']/failure") is not None
    text = commbench("compare", base, partial, check_rc=FAILED).stdout
    assert "missing in candidate:" in text and "fail the comparison" in text
    doc = json.loads(commbench("compare", base, partial, "--format", "json", "--allow-missing",
                               check_rc=NO_VERDICT).stdout)  # its one point, inconclusive: nothing judged
    assert doc["allow_missing"] is True and len(doc["missing"]) == 1 and doc["exit_code"] == NO_VERDICT
    assert proc.stdout.startswith("<?xml")  # what --format says goes to stdout too


@needs_mpirun
def test_real_repeated_run_against_a_slowed_copy(job, tmp_path):
    """Through real jobs: a --repeat 3 run tags rows and samples with their job, compare finds 3 jobs
    a side and the exact injected ratio, and its exit code follows its verdicts (1 on a regression, else 2: no
    point judged)."""
    base = tmp_path / "base"
    commbench("run", "-n", 2, "-c", "all_reduce", "-b", 8, "-e", 64, "--iters", 5, "--out-of-place", "--repeat", 3,
              "--out", base, "--quiet", check_rc=OK)
    slowed = inject_slowdown(base, tmp_path / "slow", 3.0)
    proc = commbench("compare", base, slowed, "--format", "json")
    doc = json.loads(proc.stdout)
    assert len(doc["points"]) == 4 and all(p["jobs"] == [3, 3] for p in doc["points"])
    assert all(abs(p["ratio"] - 3.0) < 1e-6 for p in doc["points"])
    assert {p["verdict"] for p in doc["points"]} <= {"regression", "inconclusive"}
    # a regression fails the gate; with none, every point was inconclusive, so there is no verdict
    regressed = any(p["verdict"] == "regression" for p in doc["points"])
    assert proc.returncode == (FAILED if regressed else NO_VERDICT) == doc["exit_code"]


@pytest.mark.parametrize("setup,message", [
    (lambda d: None, "does not exist"),
    (lambda d: d.mkdir(), "holds no results.csv"),
    (lambda d: (d.mkdir(), (d / "results.csv").write_text("a,b\n1,2\n"), (d / "samples.csv").write_text("x\n")),
     "missing columns"),
])
def test_unusable_input_exit_2(tmp_path, setup, message):
    d = tmp_path / "x"
    setup(d)
    proc = commbench("compare", d, d)
    assert proc.returncode == BAD_INPUT and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_bad_arguments_exit_2(tmp_path):
    run = write_run(tmp_path / "run", QUIET)
    for args, message in ((["--threshold", "abc"], "invalid threshold"), (["--threshold", "150%"], "invalid threshold"),
                          (["--format", "xml"], "unknown format"),
                          (["-o", tmp_path / "no" / "such" / "f"], "does not exist"),
                          (["--html", tmp_path], "is a folder")):
        proc = commbench("compare", run, run, *args)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == BAD_INPUT and message in proc.stderr and len(lines) == 1, proc.stderr
    proc = commbench("compare", run)
    assert proc.returncode == BAD_INPUT and "Missing argument" in proc.stderr


def test_verdict_rules():
    from commbench.analysis.verdicts import judge

    same = np.array([10.0, 10.1, 9.9])
    assert judge(same, same * 1.25, 0.05).verdict == "regression"
    assert judge(same, same * 0.75, 0.05).verdict == "improvement"
    assert judge(same, same, 0.05).verdict == "unchanged"
    assert judge(same, same * 1.04, 0.05).verdict == "inconclusive"  # 1.04, but the interval reaches past 1.05
    tight = np.array([10.0, 10.01, 9.99])
    assert judge(tight, tight * 1.04, 0.05).verdict == "unchanged"  # 1.04, and certainly below 1.05
    assert judge(same[:2], same[:2] * 2, 0.05).verdict == "inconclusive"  # two jobs: too few
    j = judge(np.array([10.0]), np.array([41.0]), 0.05)
    assert (j.verdict, j.ci_low, j.p_value) == ("inconclusive", None, None) and j.ratio == pytest.approx(4.1)
    # a side whose jobs agree to the last digit (copies): no spread, no interval, no verdict
    flat = np.array([10.0, 10.0, 10.0])
    for j in (judge(flat, flat * 1.1, 0.05), judge(flat, flat, 0.05), judge(flat, same, 0.05)):
        assert (j.verdict, j.ci_low, j.ci_high, j.p_value) == ("inconclusive", None, None, None)
        assert "identical medians" in j.note


def test_the_threshold_is_said_as_given():
    """`--threshold 0.05%` read `threshold 0%` (a rounding to whole percents)."""
    from types import SimpleNamespace

    from commbench.analysis.compare import Comparison

    said = [Comparison.threshold_text(SimpleNamespace(threshold=t)) for t in (0.05, 0.0005, 0.125, 1 / 3)]
    assert said == ["5%", "0.05%", "12.5%", "33.3%"]


def test_the_counts_are_said_in_the_singular_for_one():
    """Issue 66: "1 improvements"."""
    from types import SimpleNamespace

    from commbench.analysis.compare import Comparison

    said = Comparison("a", "b", 0.05, verdicts=[SimpleNamespace(verdict=v) for v in
                                                ("regression", "improvement", "improvement", "unchanged")])
    assert said.counts_text() == "1 regression, 2 improvements, 1 unchanged, 0 inconclusive"


def test_points_are_listed_by_size_as_numbers():
    """Issue 66: ab listed 1024, 1048576, 65536."""
    from types import SimpleNamespace

    from commbench.analysis.compare import Comparison
    from commbench.analysis.compare_formats import in_order

    def verdict(size, world=2, kind="unchanged"):
        return SimpleNamespace(verdict=kind, name=lambda: f"all_reduce native mpi float32 sum in-place {size} B x{world}")

    listed = in_order(Comparison("a", "b", 0.05, verdicts=[verdict(1024), verdict(1048576), verdict(65536),
                                                           verdict(8, 16), verdict(8, 2), verdict(1 << 30, 2, "regression")]))
    assert [v.name().split()[-3:] for v in listed] == [["1073741824", "B", "x2"], ["8", "B", "x2"], ["8", "B", "x16"],
                                                        ["1024", "B", "x2"], ["65536", "B", "x2"], ["1048576", "B", "x2"]]
