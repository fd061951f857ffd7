"""commbench.run.jobs (`--repeat N`) in parts and with the launch faked (tests/fake_ranks.py: each
launch plays back what its ranks would send; nothing starts): the plan's blocks, the CPU time others
took, the folder one launch after another writes, the job-after-job order of the launches, a point
the ranks skip not launched again, and a resume measuring exactly the missing (point, job) pairs."""

import csv
import io
import json
import platform
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from commbench.errors import InputError
from commbench.options import MAX_REPEAT
from commbench.backends import communicators as backends
from commbench.plan import build_plan
from commbench.run import api, jobs, launch
from commbench.run.jobs import JobFolder, blocks
from commbench.machine.facts import facts
from fake_ranks import rank0_events, scripted, spec_of


def _meta(d) -> dict:
    return json.loads((d / "run.json").read_text())


def _pairs(d) -> list[tuple[int, int]]:
    return sorted((int(r["point"]), int(r["job"])) for r in csv.DictReader(io.StringIO((d / "results.csv").read_text())))


def test_check_repeat():
    assert jobs.check_repeat(1) == 1 and jobs.check_repeat(MAX_REPEAT) == MAX_REPEAT
    for bad in (0, -1, MAX_REPEAT + 1, True, "3", 2.0, None):
        with pytest.raises(InputError, match=f"^--repeat: {bad!r} must be between 1 and {MAX_REPEAT}$"):
            jobs.check_repeat(bad)
    with pytest.raises(InputError, match="^run.json repeat: 0 must be"):
        jobs.check_repeat(0, "run.json repeat")


def test_blocks_are_runs_of_one_backend_collective_and_algorithm():
    p = [SimpleNamespace(index=i, backend=b, collective=c, algorithm=a) for i, (b, c, a) in enumerate(
        [("mpi", "ar", "native"), ("mpi", "ar", "native"), ("mpi", "ar", "ring"), ("mpi", "ag", "ring"),
         ("gloo", "ag", "ring"), ("mpi", "ar", "native")])]
    assert blocks(p) == [[0, 1], [2], [3], [4], [5]]  # consecutive only: the last is a block of its own
    assert blocks([]) == []
    spec = spec_of(Path("/x"), algorithms=["native", "ring"], dtypes=["float32", "int32"])
    plan = build_plan(spec)
    parts = blocks(plan)
    assert [i for b in parts for i in b] == [q.index for q in plan] and len(parts) == 4  # 2 collectives x 2 algorithms
    assert all(len({(plan[i].collective, plan[i].algorithm) for i in b}) == 1 for b in parts)
    assert len(parts[0]) == 2 * 2  # dtypes and sizes within the block


def test_background_cores():
    assert jobs._background(None, (1, 1, 1)) is None and jobs._background((1, 1, 1), None) is None
    assert jobs._background((10.0, 1.0, 5.0), (10.0, 1.0, 5.0)) is None  # no time passed
    assert jobs._background((100.0, 10.0, 0.0), (110.0, 12.0, 4.0)) == 2.0  # 8 s of others' CPU in 4 s
    assert jobs._background((100.0, 10.0, 0.0), (101.0, 15.0, 2.0)) == 0.0  # never below none
    assert jobs._background((0.0, 0.0, 0.0), (1.0, 0.0, 3.0)) == 0.333


def test_cpu_seconds(monkeypatch):
    first = jobs._cpu_seconds()
    assert first is not None and len(first) == 3 and all(v >= 0 for v in first)
    burn = sum(i * i for i in range(200_000))  # this process's own CPU time grows
    second = jobs._cpu_seconds()
    assert burn and second[1] >= first[1] and second[2] > first[2]

    def unreadable(*args, **kwargs):
        raise OSError("no /proc here")

    from commbench.machine import load

    monkeypatch.setattr(load, "open", unreadable, raising=False)
    assert jobs._cpu_seconds() is None


def test_the_job_folder_records_a_skip_once_and_stays_running_between_launches(tmp_path):
    f = JobFolder(tmp_path / "run")
    f.create({"run_id": "r1"})
    point = {"index": 3, "collective": "all_reduce"}
    assert f.record({"event": "skip", "point": point, "reason": "not here"})
    assert f.record({"event": "skip", "point": point, "reason": "not here"})  # a later job's: already noted
    assert f.skipped == [point | {"reason": "not here"}]
    f.record({"event": "facts", "run": {"ranks": [{"hostname": "b"}, {"hostname": "a"}, {"hostname": "b"}, {}]}})
    assert f.hosts == ["?", "a", "b"] and f.has_facts
    f.rows, f.wrong = 5, 1
    f.finish("completed", None)  # a launch completed, not the run
    meta = _meta(tmp_path / "run")
    assert "status" not in meta and (meta["points_measured"], meta["wrong_total"]) == (5, 1)
    f.finish("failed", "rank 1 died")  # a failure ends the run at once
    assert (_meta(tmp_path / "run")["status"], _meta(tmp_path / "run")["error"]) == ("failed", "rank 1 died")
    f.final = True
    f.finish("completed", None)
    assert _meta(tmp_path / "run")["status"] == "completed"


@pytest.fixture
def launches(monkeypatch):
    """Each launch plays back its ranks' events (point 2 cannot run here); the backends are there."""
    monkeypatch.setattr(backends, "missing", lambda name, device: None)
    return scripted(monkeypatch, per_launch=lambda spec: rank0_events(spec, skip={2}))


def _spec(tmp_path):
    return spec_of(tmp_path, algorithms=["native", "ring"], collectives=["all_reduce"])  # blocks [0, 1], [2, 3]


def test_jobs_run_job_after_job_and_skips_are_not_launched_again(tmp_path, launches):
    seen = []
    result = api.run_sweep(_spec(tmp_path), ["--bind-to", "none"], seen.append, argv=["commbench"], repeat=3)
    d = tmp_path / "run"
    plan = [0, 1, 2, 3]
    assert [sorted(set(plan) - set(done)) for done, _, _ in launches.built] == [[0, 1], [2, 3], [0, 1], [3], [0, 1], [3]]
    assert all(args == ["--bind-to", "none"] for _, _, args in launches.built)
    meta = _meta(d)
    assert [(j["job"], j["block"], j["points"]) for j in meta["jobs"]] == [
        (1, 1, [0, 1]), (1, 2, [2, 3]), (2, 1, [0, 1]), (2, 2, [3]), (3, 1, [0, 1]), (3, 2, [3])]
    assert all(j["hosts"] == ["h1", "h2"] and j["measured_on"] == platform.node() and j["cpu_count"] == facts().cpus
               and (j["background_cores"] is None or j["background_cores"] >= 0) for j in meta["jobs"])
    assert _pairs(d) == [(p, j) for p in (0, 1, 3) for j in (1, 2, 3)]
    assert (meta["status"], meta["repeat"], meta["points_measured"]) == ("completed", 3, 9)
    assert [s["index"] for s in meta["skipped"]] == [2] and meta["spec"]["done_points"] == []  # the run's spec
    assert len(result.rows) == 9 and [s["index"] for s in result.skipped] == [2] and result.status == "completed"
    ready = [e for e in seen if e["event"] == "ready"]
    assert len(ready) == 1 and ready[0]["total"] == 12 and ready[0]["repeat"] == 3 and ready[0]["already"] == 0
    assert ready[0]["note"] == "3 jobs per point: job 1 measures the 2 block(s) of points, then job 2, and so on"
    assert [e for e in seen if e["event"] == "done"] == [{"event": "done", "wrong": 0, "rows": 9}]  # once, at the end


def test_repeat_needs_a_launcher_it_starts(tmp_path, launches, monkeypatch):
    monkeypatch.setattr(launch, "resolve_launcher", lambda spec: "none")
    with pytest.raises(InputError, match="--repeat starts its jobs itself; with --launcher none you start the job"):
        jobs.run(_spec(tmp_path), 2)
    assert not (tmp_path / "run").exists() and launches.built == []
    with pytest.raises(InputError, match="--repeat: 0 must be"):
        jobs.run(_spec(tmp_path), 0)


def test_an_interrupt_marks_the_run_and_keeps_its_spec(tmp_path, launches):
    original = launches.per_launch

    def second_fails(spec):
        events = original(spec)
        if len(launches.built) == 2:
            launches.interrupt, launches.interrupt_after = KeyboardInterrupt(), 4  # after its first row
        return events

    launches.per_launch = second_fails
    with pytest.raises(KeyboardInterrupt):
        api.run_sweep(_spec(tmp_path), repeat=2)
    meta = _meta(tmp_path / "run")
    assert (meta["status"], meta["error"]) == ("interrupted", "interrupted by the user")
    assert meta["spec"]["done_points"] == [] and [j["points"] for j in meta["jobs"]] == [[0, 1]]
    assert _pairs(tmp_path / "run") == [(0, 1), (1, 1)]  # the second launch: point 2 skipped, cut before 3's row


def test_resume_measures_exactly_the_missing_point_job_pairs(tmp_path, launches):
    api.run_sweep(_spec(tmp_path), repeat=3)
    d = tmp_path / "run"
    # as if killed during job 2: its block 2 and all of job 3 missing, the run marked failed
    keep = {(0, 1), (1, 1), (3, 1), (0, 2), (1, 2)}
    lines = (d / "results.csv").read_text().splitlines(keepends=True)
    rows = list(csv.DictReader(io.StringIO("".join(lines))))
    (d / "results.csv").write_text(lines[0] + "".join(
        line for line, r in zip(lines[1:], rows, strict=True) if (int(r["point"]), int(r["job"])) in keep))
    samples = pd.read_parquet(d / "samples.parquet")
    samples[[(p, j) in keep for p, j in zip(samples.point, samples.job, strict=True)]].to_parquet(
        d / "samples.parquet", index=False)
    meta = _meta(d)
    (d / "run.json").write_text(json.dumps(dict(meta, status="failed", jobs=meta["jobs"][:3])))
    launches.built.clear()
    launched = len(launches.jobs)
    result = api.resume_sweep(d, [])
    # the first: resume_sweep's check that the launch would be taken (its commands built, not run)
    assert [sorted({0, 1, 2, 3} - set(done)) for done, _, _ in launches.built] == [[2], [3], [0, 1], [3]]
    assert len(launches.jobs) - launched == 3
    assert _pairs(d) == [(p, j) for p in (0, 1, 3) for j in (1, 2, 3)] and len(result.rows) == 4
    meta = _meta(d)
    assert meta["status"] == "completed" and len(meta["resumes"]) == 1 and meta["resumes"][0]["points_before"] == 3
    assert [(j["job"], j["block"], j["points"]) for j in meta["jobs"]][3:] == [(2, 2, [3]), (3, 1, [0, 1]), (3, 2, [3])]
    assert [s["index"] for s in meta["skipped"]] == [2]  # still known: point 2 is not launched again


def test_a_repeated_run_resumes_only_with_a_launcher(tmp_path, launches, monkeypatch):
    api.run_sweep(_spec(tmp_path), repeat=2)
    spec = spec_of(tmp_path)
    monkeypatch.setattr(launch, "resolve_launcher", lambda spec: "none")
    with pytest.raises(InputError, match="a repeated run resumes with the launcher it was started with"):
        jobs.resume(spec, _meta(tmp_path / "run"), [])
