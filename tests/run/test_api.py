"""commbench.run.api, the Python API under the CLI, with the launch faked (tests/fake_ranks.py:
a job that plays rank 0's events back; nothing starts): prepare and the checks before anything
starts, a sweep followed to its end (rows on disk, run.json's status and why it failed, a
Ctrl-C, a closed stdout, a folder that cannot be written), resume, and a suite's runs."""

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from commbench.errors import InputError, JobError
from commbench.rank import worker
from commbench.backends import communicators as backends
from commbench.machine import topology
from commbench.plan import build_plan
from commbench.run import api, emulate, jobs, launch, session
from commbench.folder.write import RunFolder
from commbench.run.suites import load_suite
from fake_ranks import rank0_events, scripted, spec_of


def _meta(d) -> dict:
    return json.loads((Path(d) / "run.json").read_text())


def _rows(d) -> list[int]:
    lines = (Path(d) / "results.csv").read_text().splitlines()[1:]
    return [int(line.split(",")[2]) for line in lines]  # run_id, label, point


# --- prepare and the checks before anything starts ---------------------------------------------------

def test_prepare_fixes_run_id_and_folder_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = api.prepare(spec_of(tmp_path, run_id="", out_dir=""))
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", spec.run_id)
    assert spec.out_dir == str(Path("results") / spec.run_id) and not (tmp_path / "results").exists()
    assert api.new_run_id() != api.new_run_id()
    given = api.prepare(spec_of(tmp_path, run_id="mine", out_dir=str(tmp_path / "x")))
    assert (given.run_id, given.out_dir) == ("mine", str(tmp_path / "x")) and not (tmp_path / "x").exists()


def test_prepare_refuses_before_anything_exists(tmp_path):
    spec = spec_of(tmp_path)
    spec.nprocs = 0
    with pytest.raises(InputError, match="invalid number of processes 0"):
        api.prepare(spec)
    RunFolder(tmp_path / "run").add({"run_id": "r0", "point": 0, "wrong": 0}, [1.0])
    with pytest.raises(InputError, match="already holds results"):
        api.prepare(spec_of(tmp_path))
    with pytest.raises(InputError, match="is inside the run folder"):
        api.prepare(spec_of(tmp_path, out_dir=str(tmp_path / "run" / "sub")))


def test_what_this_machine_cannot_run_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_DEBUG_FILE", "/tmp/nccl.log")
    with pytest.raises(InputError, match="--nccl-tuning sends rank 0's NCCL log to a file of its own: unset "
                                         "NCCL_DEBUG_FILE"):
        session.check_runnable(_with(spec_of(tmp_path), nccl_tuning=True))
    session.check_runnable(spec_of(tmp_path))  # without --nccl-tuning the variable is the user's
    asked = []
    monkeypatch.setattr(backends, "missing", lambda name, device: asked.append((name, device)) or
                        (f"backend {name!r} needs mpi4py" if name == "mpi" else None))
    with pytest.raises(InputError, match="^backend 'mpi' needs mpi4py$"):
        api.prepare(spec_of(tmp_path))
    assert asked == [("mpi", "cpu")] and not (tmp_path / "run").exists()
    monkeypatch.setattr(emulate, "check_available", lambda: (_ for _ in ()).throw(InputError("--emulate needs root")))
    with pytest.raises(InputError, match="--emulate needs root"):
        session.check_runnable(_with(spec_of(tmp_path, backends=["gloo"]), emulate="2x1"))


def _with(spec, **fields):
    spec.__dict__.update(fields)
    return spec


def test_a_repeated_run_is_jobs_business(tmp_path, monkeypatch):
    called = []
    monkeypatch.setattr(jobs, "run", lambda *args: called.append(args) or "jobs' result")
    spec = spec_of(tmp_path)
    assert api.run_sweep(spec, ["-x"], None, None, ["argv"], repeat=3) == "jobs' result"
    assert called == [(spec, 3, ["-x"], None, None, ["argv"])] and not (tmp_path / "run").exists()


# --- a sweep followed to its end ---------------------------------------------------------------------

def test_a_sweep_is_followed_into_its_folder(tmp_path, monkeypatch):
    spec = spec_of(tmp_path, label="lab")
    s = scripted(monkeypatch, events=rank0_events(spec, skip={2}), stderr=["mpirun: a warning"])
    seen, relayed = [], []
    result = api.run_sweep(spec, ["--bind-to", "none"], seen.append, relayed.append, argv=["commbench", "run"])
    assert result.status == "completed" and result.wrong == 0 and result.out_dir == tmp_path / "run"
    assert [r["point"] for r in result.rows] == [0, 1, 3] and [sk["index"] for sk in result.skipped] == [2]
    assert result.skipped[0]["reason"] == "not here" and _rows(tmp_path / "run") == [0, 1, 3]
    assert [e["event"] for e in seen][:2] == ["facts", "ready"] and seen[-1]["event"] == "done"
    assert [line.text for line in relayed] == ["mpirun: a warning"]
    assert s.built == [([], "mpirun", ["--bind-to", "none"])]
    meta = _meta(tmp_path / "run")
    assert (meta["status"], meta["error"], meta["run_id"], meta["label"], meta["launcher"]) == (
        "completed", None, "r1", "lab", "mpirun")
    assert meta["launcher_args"] == ["--bind-to", "none"] and meta["launch_argv"][:3] == ["mpirun", "--bind-to", "none"]
    assert meta["points_measured"] == 3 and [sk["index"] for sk in meta["skipped"]] == [2]
    assert meta["world_size"] == 2 and meta["samples_file"] in ("samples.parquet", "samples.csv")
    assert not s.jobs[0].killed


IN_POINT_2 = "in all_gather native on mpi, float32, out-of-place, 8 B"  # the point the ranks had entered


@pytest.mark.parametrize("code,events,message", [
    (1, lambda spec: rank0_events(spec, done=False), f"the launcher exited with code 1 {IN_POINT_2}; rank 1 "
                                                     "never reached it (rank 0 waited in it)"),
    (0, lambda spec: rank0_events(spec, done=False), f"the ranks exited before the sweep finished {IN_POINT_2}"),
    (1, lambda spec: rank0_events(spec)[:3] + [{"event": "error", "rank": 1, "message": "ValueError: bad"}],
     f"rank 1: ValueError: bad ({IN_POINT_2})"),
    (0, lambda spec: [e for e in rank0_events(spec) if e["event"] != "facts"],
     "rank 0's facts for run.json (world, versions, machines) did not arrive whole"),
    (0, lambda spec: [e for e in rank0_events(spec) if e.get("point") != 1],  # point 1's samples lost: its row too
     "1 of the 4 rows rank 0 sent did not arrive whole; resume the run"),
])
def test_a_failed_job_is_one_error_and_recorded(tmp_path, monkeypatch, code, events, message):
    spec = spec_of(tmp_path)
    enter = {"event": "enter", "rank": 0, "point": build_plan(spec)[2].as_dict()}
    evs = events(spec)
    scripted(monkeypatch, code=code, events=evs[:-1] + [enter] + evs[-1:])
    with pytest.raises(JobError) as err:
        api.run_sweep(spec)
    assert message in str(err.value)
    meta = _meta(tmp_path / "run")
    assert meta["status"] == "failed" and meta["error"] == str(err.value)


@pytest.mark.parametrize("interrupt,why", [(KeyboardInterrupt(), "interrupted by the user"),
                                           (BrokenPipeError(), "standard output was closed")])
def test_a_signal_or_a_closed_stdout_kills_the_job_and_says_so(tmp_path, monkeypatch, interrupt, why):
    spec = spec_of(tmp_path)
    s = scripted(monkeypatch, events=rank0_events(spec), interrupt=interrupt, interrupt_after=4)  # after point 0
    with pytest.raises(type(interrupt)):
        api.run_sweep(spec)
    meta = _meta(tmp_path / "run")
    assert (meta["status"], meta["error"], meta["points_measured"]) == ("interrupted", why, 1)
    assert s.jobs[0].killed and _rows(tmp_path / "run") == [0]


def test_an_interrupt_after_the_last_row_completes_the_run(tmp_path, monkeypatch):
    spec = spec_of(tmp_path)
    events = rank0_events(spec)
    scripted(monkeypatch, events=events, interrupt=KeyboardInterrupt(), interrupt_after=len(events) - 1)  # no done
    with pytest.raises(KeyboardInterrupt):
        api.run_sweep(spec)
    meta = _meta(tmp_path / "run")
    assert meta["status"] == "completed" and meta["error"] is None and "samples_file" in meta  # what done writes


def test_a_folder_that_cannot_be_written_fails_the_job(tmp_path, monkeypatch):
    spec = spec_of(tmp_path)
    s = scripted(monkeypatch, events=rank0_events(spec))

    def full(self, row, samples, tags=None, ranks=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(RunFolder, "add", full)
    with pytest.raises(JobError, match=f"^cannot write {str(tmp_path / 'run')!r}: No space left on device$"):
        api.run_sweep(spec)
    assert s.jobs[0].killed and _meta(tmp_path / "run")["status"] == "failed"


def test_in_a_job_started_by_the_user_this_process_is_a_rank(tmp_path, monkeypatch):
    """--launcher none: the worker runs here; rank 0 writes the folder as a launched job's parent."""
    monkeypatch.setattr(topology, "inside_launched_job", lambda env=None: True)  # (a job the user started)
    spec = spec_of(tmp_path, launcher="none")

    def run(spec, emit, progress):
        for event in rank0_events(spec):
            emit(event.pop("event"), **event)

    monkeypatch.setattr(worker, "run", run)
    result = api.run_sweep(spec)
    assert result.status == "completed" and result.reports and len(result.rows) == 4
    assert _meta(tmp_path / "run")["launcher"] == "none" and _rows(tmp_path / "run") == [0, 1, 2, 3]

    class Failed(Exception):
        pass

    def broken(spec, emit, progress):
        raise RuntimeError("no MPI here")

    monkeypatch.setattr(worker, "run", broken)
    monkeypatch.setattr(worker, "fail", lambda exc: (_ for _ in ()).throw(Failed(exc)))
    with pytest.raises(Failed):
        api.run_sweep(spec_of(tmp_path, launcher="none", out_dir=str(tmp_path / "two")))
    meta = _meta(tmp_path / "two")
    assert meta["status"] == "failed" and meta["error"] == "RuntimeError: no MPI here"
    monkeypatch.setattr(topology, "detect", lambda: topology.RankInfo(1, 2, 1, 2, 0, "h", "openmpi"))
    monkeypatch.setattr(worker, "run", run)
    other = api.run_sweep(spec_of(tmp_path, launcher="none", out_dir=str(tmp_path / "three")))
    assert not other.reports and other.rows == [] and not (tmp_path / "three").exists()  # rank 0 writes


# --- resume ------------------------------------------------------------------------------------------

def _cut_after(d: Path, rows: int, **meta) -> None:
    lines = (d / "results.csv").read_text().splitlines(keepends=True)
    (d / "results.csv").write_text("".join(lines[:rows + 1]))
    (d / "run.json").write_text(json.dumps(dict(_meta(d), **{"status": "interrupted", **meta})))


def test_resumable_checks_everything_and_writes_nothing(tmp_path, monkeypatch):
    spec = spec_of(tmp_path)
    scripted(monkeypatch, events=rank0_events(spec))
    api.run_sweep(spec, ["-x", "y" * 400])
    d = tmp_path / "run"
    _cut_after(d, 2)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    folder, meta, found, args = api.resumable(d, ["-x", "mine"])
    assert found.done_points == [0, 1] and found.out_dir == str(d) and args == ["-x", "mine"]
    assert meta["status"] == "interrupted" and isinstance(folder, RunFolder) and folder.rows == 2
    with pytest.raises(InputError) as err:
        api.resumable(d)  # the recorded arguments, shown cut short, never used
    assert "[-x yyyy" in str(err.value) and "... (the rest in run.json)], which commbench does not take" in str(err.value)
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before


def test_a_run_still_going_or_an_ab_folder_is_not_resumed(tmp_path, monkeypatch):
    spec = spec_of(tmp_path)
    scripted(monkeypatch, events=rank0_events(spec))
    api.run_sweep(spec)
    d = tmp_path / "run"
    _cut_after(d, 1, status="running", launch_host=platform.node(), launch_pid=os.getpid())
    with pytest.raises(InputError, match=f"still in progress \\(pid {os.getpid()}\\); resume it once it has stopped"):
        api.resumable(d, [])
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _cut_after(d, 1, status="running", launch_pid=gone.pid)  # its process is gone: resumable
    assert api.resumable(d, [])[2].done_points == [0]
    _cut_after(d, 1, status="running", launch_host="another-host", launch_pid=os.getpid())  # not this host's pid
    assert api.resumable(d, [])[2].done_points == [0]
    _cut_after(d, 1, kind="ab")
    with pytest.raises(InputError, match="holds a `commbench ab` comparison, which is not resumed"):
        api.resumable(d, [])


def test_resume_measures_the_missing_points_and_records_the_session(tmp_path, monkeypatch):
    spec = spec_of(tmp_path)
    s = scripted(monkeypatch, events=rank0_events(spec))
    api.run_sweep(spec)
    d = tmp_path / "run"
    _cut_after(d, 2)
    rest = spec_of(tmp_path)
    rest.done_points = [0, 1]
    s.events = rank0_events(rest)
    result = api.resume_sweep(d, [], argv=["commbench", "run", "--resume"])
    assert [r["point"] for r in result.rows] == [2, 3] and result.status == "completed"
    assert s.built[-1] == ([0, 1], "mpirun", []) and sorted(_rows(d)) == [0, 1, 2, 3]
    meta = _meta(d)
    assert meta["status"] == "completed" and meta["points_measured"] == 4
    assert [(r["points_before"], r["command_line"]) for r in meta["resumes"]] == [(2, ["commbench", "run", "--resume"])]


# --- helpers ------------------------------------------------------------------------------------------

def test_short_values_in_messages():
    assert api._short("abc") == "'abc'" and api._short([1, 2]) == "'[1, 2]'"
    assert api._short("x" * 100) == repr("x" * 80 + "...") and api._short("x" * 10, limit=4) == "'xxxx...'"


def test_every_point_recorded(tmp_path):
    spec = spec_of(tmp_path)
    spec.done_points = [0]
    result = api.RunResult(tmp_path, rows=[{"point": "1"}, {"point": 3}], skipped=[{"index": 2}])
    assert session.every_point_recorded(spec, result)
    result.skipped = []
    assert not session.every_point_recorded(spec, result)


# --- a suite's runs ----------------------------------------------------------------------------------

def _suite(tmp_path, runs="[{label: one}, {label: two, sizes: [64]}]"):
    f = tmp_path / "s.yaml"
    f.write_text("name: tiny\ndefaults: {nprocs: 2, sizes: [8], iters: 2, collective: all_reduce, backend: mpi}\n"
                 f"runs: {runs}\n")
    return load_suite(str(f))


def test_a_suite_checks_every_run_before_any_starts(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(api, "run_sweep", lambda *a, **k: started.append(a))
    monkeypatch.setattr(launch, "resolve_launcher", lambda spec: "mpirun")
    monkeypatch.setattr(launch, "find_binary", lambda name: None)
    with pytest.raises(InputError, match=r"s\.yaml: run 'one': it needs 'mpirun', which is not installed"):
        api.run_suite(_suite(tmp_path), tmp_path / "sweep")
    monkeypatch.setattr(launch, "find_binary", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(launch, "check_local_ranks", lambda spec, launcher, args: None)
    (tmp_path / "sweep" / "two").mkdir(parents=True)
    RunFolder(tmp_path / "sweep" / "two").add({"run_id": "x", "point": 0, "wrong": 0}, [1.0])
    with pytest.raises(InputError, match="already holds a sweep"):
        api.run_suite(_suite(tmp_path), tmp_path / "sweep")
    with pytest.raises(InputError, match="run 'two': output folder .* already holds results"):  # resume too
        api.run_suite(_suite(tmp_path), tmp_path / "sweep", resume=True)
    assert started == [] and not (tmp_path / "sweep" / "suite.yaml").exists()


def test_a_suite_runs_on_past_a_failed_run_and_a_resume_keeps_completed_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "check_local_ranks", lambda spec, launcher, args: None)
    monkeypatch.setattr(launch, "find_binary", lambda name: "/usr/bin/" + name)
    s = scripted(monkeypatch)
    suite, out = _suite(tmp_path), tmp_path / "sweep"
    calls = []

    def run_sweep(spec, launcher_args=None, on_event=None, relay=None, argv=None, repeat=1):
        calls.append(spec.out_dir)
        s.events = rank0_events(api.prepare(spec))  # the run id the rows carry
        if spec.out_dir.endswith("one"):
            s.code = 1
        try:
            return real(spec, launcher_args, on_event, relay, argv, repeat)
        finally:
            s.code = 0

    real = api.run_sweep
    monkeypatch.setattr(api, "run_sweep", run_sweep)
    said = []
    outcomes = api.run_suite(suite, out, on_run=lambda label, what: said.append((label, what)))
    assert [(label, error is None) for label, _, error in outcomes] == [("one", False), ("two", True)]
    assert "the launcher exited with code 1" in outcomes[0][2] and outcomes[1][1].status == "completed"
    assert said == [("one", "running"), ("two", "running")] and (out / "suite.yaml").read_text() == suite.path.read_text()
    assert _meta(out / "one")["run_id"] != _meta(out / "two")["run_id"]  # each run its own
    # resumed: two is kept, one (failed after its last row) resumed, nothing measured twice
    said.clear()
    rows_of_one = (out / "one" / "results.csv").read_text()
    s.events = [e for e in rank0_events(_meta_spec(out / "one")) if e["event"] in ("facts", "ready", "done")]
    s.events[-1]["rows"] = 0
    outcomes = api.run_suite(suite, out, resume=True, on_run=lambda label, what: said.append((label, what)))
    assert said == [("one", "resuming"), ("two", "already complete")]
    assert outcomes[1] == ("two", None, None) and outcomes[0][1].status == "completed" and outcomes[0][1].rows == []
    assert len(calls) == 2 and (out / "one" / "results.csv").read_text() == rows_of_one


def _meta_spec(d):
    from commbench.spec import SweepSpec

    spec = SweepSpec.from_json(json.dumps(_meta(d)["spec"]))
    spec.done_points = _rows(d)
    return spec
