"""The Python API under the CLI: `run_sweep(spec)` launches the ranks, follows rank 0's events,
writes them into the run folder (commbench.folder.write: the only writer) and returns what was
measured. Script it directly:

    from commbench.run.api import run_sweep
    from commbench.spec import SweepSpec
    result = run_sweep(SweepSpec(backends=["mpi"], nprocs=4, out_dir="results/x"))
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from commbench import runinfo
from commbench.folder import outputs
from commbench.errors import InputError, JobError
from commbench.options import MAX_REPEAT
from commbench.plan import build_plan
from commbench.machine import topology
from commbench.run import jobs, launch, processes, session
from commbench.folder import lock as folder_lock
from commbench.folder.write import RunFolder
from commbench.folder.place import check_place
from commbench.folder.place import new_run_id  # noqa: F401 - the API's: a run id as commbench makes them
from commbench.run.session import RunResult, prepare
from commbench.folder.schema import RESULTS_CSV, RunStatus
from commbench.spec import SweepSpec

__all__ = ["RunResult", "new_run_id", "prepare", "resumable", "resume_sweep", "run_suite", "run_sweep"]


def run_sweep(spec: SweepSpec, launcher_args: list[str] | None = None,
              on_event: Callable[[dict], None] | None = None,
              relay: Callable[[launch.Line], None] | None = None,
              argv: list[str] | None = None, repeat: int = 1) -> RunResult:
    """Run one sweep to the end. Raises InputError before anything starts, JobError when the
    ranks fail; KeyboardInterrupt kills the ranks and marks the run interrupted. repeat: jobs
    per point, into the one folder (commbench.run.jobs)."""
    if repeat != 1:
        return jobs.run(spec, repeat, launcher_args, on_event, relay, argv)
    spec = prepare(spec)
    launcher = launch.resolve_launcher(spec)
    folder = RunFolder(spec.out_dir)
    writer = launcher != "none" or topology.detect().rank == 0
    try:
        with _claim(folder, writer):  # the lock, before the first file (the ranks' spec) is written
            if writer:
                folder.check_new()  # again, holding it: another run may have come first
            commands = launch.build_commands(spec, launcher, launcher_args or []) if launcher != "none" else []
        if writer:
            folder.create({"run_id": spec.run_id, "label": spec.label, "start_time": runinfo.utc_now(),
                           **runinfo.parent_info(argv or sys.argv)})
        return session.start(spec, folder, launcher, commands, launcher_args or [], on_event, relay)
    finally:
        folder.release()


class _claim:
    """Hold the folder's lock (RunFolder.lock: the folder made if need be) for the writer (writer:
    False, nothing); an InputError inside (the launch refused) removes what taking it made (the lock
    file, the folders made for it), so a refused run leaves nothing behind."""

    def __init__(self, folder: RunFolder, writer: bool = True):
        self.folder, self.writer = folder, writer

    def __enter__(self):
        if self.writer:
            d = self.folder.dir
            self.made = [p for p in (d, *d.parents) if not os.path.lexists(p)]
            self.had_lock = os.path.lexists(d / folder_lock.LOCK_NAME)
            self.folder.lock()
        return self

    def __exit__(self, kind, exc, tb):
        if self.writer and kind is not None and issubclass(kind, InputError):
            try:
                if not self.had_lock:
                    os.unlink(self.folder.dir / folder_lock.LOCK_NAME)
                for p in self.made:
                    p.rmdir()
            except OSError:
                pass
            self.folder.release()
        return False


def resume_sweep(out_dir: str | Path, launcher_args: list[str] | None = None,
                 on_event: Callable[[dict], None] | None = None,
                 relay: Callable[[launch.Line], None] | None = None,
                 argv: list[str] | None = None, oversubscribe: bool = False) -> RunResult:
    """Run the points of an earlier run that have no row yet (it was interrupted or failed),
    with its spec, appending to its files. launcher_args: the launcher's arguments (None: none
    given; a run started with some is then refused, since nothing read from a folder is run
    unconfirmed). oversubscribe: allow more ranks per core here than the run was started with.
    The folder is checked whole before anything in it changes."""
    folder, meta, spec, launcher_args = resumable(out_dir, launcher_args)
    spec.oversubscribe = spec.oversubscribe or oversubscribe
    launcher = launch.resolve_launcher(spec)
    writer = launcher != "none" or topology.detect().rank == 0
    seen = _state(folder.dir)
    try:
        with _claim(folder, writer):  # held to the end; nothing is written before it is taken
            if writer and _state(folder.dir) != seen:
                raise InputError(f"{str(folder.dir)!r} changed while it was being checked: another commbench "
                                 "wrote it; resume it once that one has stopped")
            commands = launch.build_commands(spec, launcher, launcher_args) if launcher != "none" else []
        if writer:
            folder.repair()  # checked above: only now is anything written
        resumes = meta.get("resumes", []) + [{"time": runinfo.utc_now(), "points_before": len(spec.done_points),
                                              "command_line": argv or sys.argv}]
        if writer:
            folder.update({"resumes": resumes})
        if meta.get("repeat", 1) != 1:  # several jobs a point (commbench.run.jobs)
            return jobs.resume(spec, meta, launcher_args, on_event, relay)
        return session.start(spec, folder, launcher, commands, launcher_args, on_event, relay)
    finally:
        folder.release()


def _state(d: Path) -> list:
    """What a resume's checks read, as (size, mtime) of each of the run's files (a change between the
    checks and the lock: another writer)."""
    out = []
    for name in folder_lock.OWN_FILES:
        try:
            st = os.lstat(d / name)
            if name != folder_lock.LOCK_NAME:
                out.append((name, st.st_size, st.st_mtime_ns))
        except OSError:
            pass
    return out


# run.json fields a resume uses, and what each must be where present
_RESUME_FIELDS = {
    "status": (lambda v: isinstance(v, str), "a text"),
    "launch_host": (lambda v: v is None or isinstance(v, str), "a host name"),
    "launch_pid": (lambda v: v is None or type(v) is int and 0 < v <= 1 << 22, "a process id (1 to 2^22)"),
    "launcher_args": (lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v), "a list of texts"),
    "resumes": (lambda v: isinstance(v, list), "a list"),
    "repeat": (lambda v: type(v) is int and 1 <= v <= MAX_REPEAT, f"an integer from 1 to {MAX_REPEAT}"),
    "skipped": (lambda v: isinstance(v, list) and all(isinstance(s, dict) and type(s.get("index", 0)) is int
                                                      for s in v), "a list of points with an integer index"),
}


def resumable(out_dir: str | Path, launcher_args: list[str] | None = None):
    """(folder, run.json, spec with the points to skip, launcher arguments) of a run to resume,
    everything checked and nothing written: run.json's fields and its recorded spec, read like
    command-line input (the spec validated again); the run not still going; its launcher
    arguments only when given again (None: none given); the rows and samples on disk
    (RunFolder.check); and that this machine can run it. InputError otherwise."""
    out = Path(out_dir)
    if not out.is_dir():
        raise InputError(f"{str(out)!r} {'is not a folder' if out.exists() else 'does not exist'}: nothing to resume")
    if topology.detect().rank == 0:  # a run still being written: refused however its run.json reads
        folder_lock.check_free(out)
    folder_lock.own_files(out)  # a resume writes into them: none may be a link
    record = out / "run.json"
    if not record.exists():
        raise InputError(f"{str(out)!r} holds no run.json: nothing to resume")
    folder = RunFolder(out)
    meta = folder.read_meta()
    for key, (fits, what) in _RESUME_FIELDS.items():
        if key in meta and not fits(meta[key]):
            raise InputError(f"{out}: run.json field {key!r} must be {what}, not {_short(meta[key])}")
    if meta.get("kind") == "ab":
        raise InputError(f"{out} holds a `commbench ab` comparison, which is not resumed: run the comparison again")
    if not isinstance(meta.get("spec"), dict):
        raise InputError(f"{out}: run.json is not a commbench run record (it holds no spec)")
    try:
        spec = SweepSpec.from_json(json.dumps(meta["spec"])).validate()
    except InputError as exc:
        raise InputError(f"{out}: run.json: the recorded spec is refused: {exc}") from None
    if meta.get("status") == RunStatus.RUNNING and _alive(meta):
        raise InputError(f"the run in {str(out)!r} is still in progress (pid {meta['launch_pid']}); "
                         "resume it once it has stopped")
    recorded = shlex.join(meta.get("launcher_args") or [])
    if launcher_args is None and recorded:
        shown = recorded if len(recorded) <= 300 else f"{recorded[:300]} ... (the rest in run.json)"
        raise InputError(f"the run in {str(out)!r} was launched with the launcher arguments [{shown}], which "
                         "commbench does not take from a folder unconfirmed: to resume, repeat them with "
                         "--launcher-args")
    spec.out_dir = str(out)
    spec.done_points = sorted(folder.check()[0])
    others = folder.run_ids - {meta.get("run_id")}
    if meta.get("run_id") and others:
        raise InputError(f"{out}: results.csv has rows of another run ({_short(sorted(others)[0])}, "
                         f"not {meta['run_id']!r}): a folder holds one run")
    planned = len(build_plan(spec))
    if spec.done_points and spec.done_points[-1] >= planned:
        raise InputError(f"{out}: results.csv has a row of point {spec.done_points[-1]}, but the run's spec has "
                         f"{planned} points (0 to {planned - 1}): the rows are not this run's")
    session.check_runnable(spec)
    return folder, meta, spec, launcher_args or []


def _short(value, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _alive(meta: dict) -> bool:
    """Is the process that started this run still running (on this host)?"""
    if meta.get("launch_host") != platform.node() or not meta.get("launch_pid"):
        return False
    return processes.alive(meta["launch_pid"])


def check_start(spec: SweepSpec, launcher_args: list[str]) -> None:
    """What a validated run needs to start on this machine, whatever its folder: its launcher installed,
    and its ranks within this machine's cores and memory (launch.check_local_ranks)."""
    launcher = launch.resolve_launcher(spec)
    if launcher in ("mpirun", "srun") and launch.find_binary(launcher) is None:
        raise InputError(f"it needs {launcher!r}, which is not installed")
    if launcher != "none":
        launch.check_local_ranks(spec, launcher, launcher_args)


@contextmanager
def _of_run(suite, run):
    """An InputError raised inside, said of this run of the suite."""
    try:
        yield
    except InputError as exc:
        raise InputError(f"{suite.path}: run {run.label!r}: {exc}") from None


def check_suite_starts(suite) -> None:
    """Every run of a suite could start here (sweep --dry-run: the checks of run_suite that write nothing)."""
    for run in suite.runs:
        spec = SweepSpec.from_json(run.spec.to_json())
        with _of_run(suite, run):
            spec.validate()
            session.check_runnable(spec)
            check_start(spec, run.launcher_args)


def run_suite(suite, out_dir: str | Path, resume: bool = False,
              on_run: Callable[[str, str], None] | None = None,
              on_event: Callable[[dict], None] | None = None) -> list[tuple[str, RunResult | None, str | None]]:
    """Run every run of a suite into out_dir/<label>/ (a run that fails does not stop the others).
    resume: keep completed runs, resume cut-short ones, run missing ones. Returns
    (label, result, error) per run."""
    out = check_place(out_dir, sweep=True, probe=False)
    if not resume and any(out.glob(f"*/{RESULTS_CSV}")):
        raise InputError(f"{str(out)!r} already holds a sweep (use --resume to finish it, or another --out)")
    folder_lock.sweep_folder(out, {run.label for run in suite.runs}, resume)
    outputs.probe_folder(out)
    complete = set()  # labels of runs a resume keeps
    for run in suite.runs:  # every run must be able to start (or resume) before anything starts
        folder = out / run.label
        with _of_run(suite, run):
            if folder.is_symlink():
                raise InputError(f"its folder {str(folder)!r} is a link (to {os.readlink(folder)!r}): a sweep writes "
                                 "its runs only into folders of its own")
            if resume and (folder / "run.json").exists():
                if RunFolder(folder).read_meta().get("status") == RunStatus.COMPLETED:
                    complete.add(run.label)
                else:
                    resumable(folder, run.launcher_args)
                continue
            spec = SweepSpec.from_json(run.spec.to_json())
            spec.out_dir = str(folder)
            check_start(prepare(spec), run.launcher_args)
    out.mkdir(parents=True, exist_ok=True)
    lock = folder_lock.acquire(out)  # one sweep writes a sweep folder; each run locks its own folder too
    try:
        if not os.path.lexists(out / folder_lock.SUITE_YAML):
            outputs.write_text(out / folder_lock.SUITE_YAML, Path(suite.path).read_text(encoding="utf-8"), "suite.yaml")
        return _run_each(suite, out, resume, complete, on_run, on_event)
    finally:
        folder_lock.release(lock)


def _run_each(suite, out: Path, resume: bool, complete: set, on_run, on_event) -> list:
    outcomes = []
    for run in suite.runs:
        folder = out / run.label
        done = (folder / "run.json").exists()
        if run.label in complete:
            outcomes.append((run.label, None, None))
            if on_run:
                on_run(run.label, "already complete")
            continue
        if on_run:
            on_run(run.label, "resuming" if resume and done else "running")
        try:
            if resume and done:
                result = resume_sweep(folder, run.launcher_args, on_event)
            else:
                spec = SweepSpec.from_json(run.spec.to_json())
                spec.out_dir, spec.run_id = str(folder), ""
                result = run_sweep(spec, run.launcher_args, on_event, repeat=run.repeat)
            outcomes.append((run.label, result, None))
        except JobError as exc:
            outcomes.append((run.label, None, str(exc)))
    return outcomes
