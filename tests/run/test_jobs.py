"""`commbench run --repeat N` and a suite's `repeat: N`: N separate jobs per point, job after job,
into one folder whose rows and samples carry their job; resume finishes exactly the missing
(point, job) pairs; bad values are one line and exit 2."""

import json

import pandas as pd
import pytest

from commbench.folder.load import load_run as load_checked
from conftest import commbench, load_run, needs_mpirun
from commbench.errors import BAD_INPUT, OK


def _pairs(rows: pd.DataFrame) -> list[tuple[int, int]]:
    return sorted(zip(rows.point, rows.job, strict=True))


@needs_mpirun
def test_repeat_runs_job_after_job_into_one_folder(job, tmp_path):
    out = tmp_path / "run"
    proc = commbench("run", "-n", 2, "-c", "all_reduce,all_gather", "-d", "float32,bfloat16", "--sizes", "8,64",
                     "--iters", 5, "--out-of-place", "--repeat", 3, "--out", out, check_rc=OK)
    assert "3 jobs per point" in proc.stdout + proc.stderr and "job 3 of 3" in proc.stdout
    rows, samples, meta = load_run(out)
    # MPI has no bfloat16: 2 collectives x 2 sizes measured, by jobs 1..3 each
    assert _pairs(rows) == sorted((p, j) for p in (0, 1, 4, 5) for j in (1, 2, 3))
    assert (rows.wrong == 0).all() and rows.run_id.nunique() == 1
    counts = samples.groupby(["point", "job"]).size()
    assert {(p, j): n for (p, j), n in counts.items()} == {(p, j): n for p, j, n in
                                                            zip(rows.point, rows.job, rows.samples, strict=True)}
    assert meta["status"] == "completed" and meta["repeat"] == 3 and meta["spec"]["done_points"] == []
    # job after job: job 1 measures all_reduce then all_gather, then job 2, then job 3 (a point's jobs as
    # far apart as the run allows); a point the ranks skipped is not relaunched
    assert [(j["block"], j["job"], j["points"]) for j in meta["jobs"]] == [
        (1, 1, [0, 1, 2, 3]), (2, 1, [4, 5, 6, 7]), (1, 2, [0, 1]), (2, 2, [4, 5]), (1, 3, [0, 1]), (2, 3, [4, 5])]
    assert sorted(s["index"] for s in meta["skipped"]) == [2, 3, 6, 7]  # each skip recorded once
    assert all(j["hosts"] and j["measured_on"] and j["cpu_count"] for j in meta["jobs"])
    assert all(j["background_cores"] is None or j["background_cores"] >= 0 for j in meta["jobs"])
    checked, _ = load_checked(out, samples=True)  # the one loader pairs each row with its job's samples
    assert all(len(v) == n for v, n in zip(checked.sample_values, checked.samples, strict=True))


@needs_mpirun
def test_resume_measures_the_missing_point_job_pairs(job, tmp_path):
    out = tmp_path / "run"
    commbench("run", "-n", 2, "-c", "all_reduce,all_gather", "--sizes", "8,64", "--iters", 5, "--out-of-place",
              "--repeat", 2, "--out", out, "--quiet", check_rc=OK)
    full, _, _ = load_run(out)
    # as if killed once block 1's first job had finished: later rows and samples gone, the run marked failed
    lines = (out / "results.csv").read_text().splitlines()
    (out / "results.csv").write_text("\n".join(lines[:3]) + "\n")
    samples = pd.read_parquet(out / "samples.parquet")
    samples[samples.job == 1].loc[lambda s: s.point < 2].to_parquet(out / "samples.parquet", index=False)
    meta = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps(dict(meta, status="failed", jobs=meta["jobs"][:1])))
    proc = commbench("run", "--resume", out, "--quiet", check_rc=OK)
    rows, _, meta = load_run(out)
    assert _pairs(rows) == _pairs(full) and len(set(_pairs(rows))) == len(rows)
    assert meta["status"] == "completed" and len(meta["resumes"]) == 1
    assert [(j["block"], j["job"], j["points"]) for j in meta["jobs"]] == [
        (1, 1, [0, 1]), (2, 1, [2, 3]), (1, 2, [0, 1]), (2, 2, [2, 3])]
    checked, _ = load_checked(out, samples=True)
    assert all(len(v) == n for v, n in zip(checked.sample_values, checked.samples, strict=True)), proc.stderr


@needs_mpirun
def test_suite_repeat_means_the_same(job, tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text("name: tiny\ndefaults: {nprocs: 2, sizes: [8], iters: 3, mode: out-of-place, "
                     "collective: all_reduce, backend: mpi}\nruns:\n  - {label: twice, repeat: 2}\n  - {label: once}\n")
    commbench("sweep", suite, "--out", tmp_path / "sweep", "--quiet", check_rc=OK)
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_dir()) == ["once", "twice"]
    twice, _, meta = load_run(tmp_path / "sweep" / "twice")
    once, _, _ = load_run(tmp_path / "sweep" / "once")
    assert _pairs(twice) == [(0, 1), (0, 2)] and meta["repeat"] == 2 and _pairs(once) == [(0, 1)]


@pytest.mark.parametrize("args,message", [
    (["--repeat", "0"], "--repeat: 0 must be between 1 and 100"),
    (["--repeat", "101"], "--repeat: 101 must be between 1 and 100"),
    (["--repeat", "2", "--launcher", "none"], "with --launcher none you start the job"),
    (["--repeat", "2", "--resume", "somewhere"], "--resume takes the jobs per point recorded with the run"),
])
def test_bad_repeat_is_one_line(tmp_path, args, message):
    proc = commbench("run", "-n", 2, "--backend", "mpi", "--sizes", "8", "--out", tmp_path / "x", *args)
    assert proc.returncode == BAD_INPUT and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "x").exists()
