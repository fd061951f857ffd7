"""One session of a run: the spec checked and given its folder (`prepare`), the ranks launched once
(or this process one rank of a job someone else started) and rank 0's events followed and written
into the run folder until the session ends with a status (`start`). A run is one session, a
resumed run one more, and a repeated run (commbench.run.jobs) one per job; commbench.run.api
decides which, and owns the folder's lock."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from commbench.folder.schema import RunStatus
from commbench import interrupts
from commbench.presentation import terminal
from commbench.folder import outputs
from commbench.errors import InputError, JobError
from commbench.plan import build_plan
from commbench.backends import communicators as backends
from commbench.machine import topology
from commbench.run import emulate, launch, watchdog
from commbench.folder.write import RunFolder
from commbench.folder.place import RESULTS_ROOT, check_place, new_run_id
from commbench.spec import SweepSpec


@dataclass
class RunResult:
    out_dir: Path
    rows: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    wrong: int = 0  # wrong elements over every row of the run (earlier sessions of a resumed run too)
    unreliable: int = 0  # rows flagged unreliable (commbench.machine.load), counted like wrong
    in_run: int = 0  # rows of the whole run, counted like wrong (a resumed run's earlier sessions too)
    status: str = RunStatus.RUNNING
    reports: bool = True  # False in ranks other than 0 of a job started by the user: rank 0 reports

    def failed_skips(self) -> dict[str, str]:
        """The algorithms with points skipped as failures (commbench.errors.Unavailable: a kernel that
        did not build), each -> its first reason: an asked-for algorithm that could not run has failed,
        not been skipped (a gate on the exit code would silently lose it). A combination that cannot
        exist (an algorithm without that collective, less than one element per rank) is no failure."""
        lost: dict[str, str] = {}
        for s in self.skipped:
            if s.get("failed"):
                lost.setdefault(str(s.get("algorithm")), str(s.get("reason")))
        return lost


def prepare(spec: SweepSpec) -> SweepSpec:
    """Validate everything and fix run id and output folder; raises InputError, writes nothing."""
    spec.validate()
    check_runnable(spec)
    spec.run_id = spec.run_id or new_run_id()
    out = check_place(spec.out_dir or RESULTS_ROOT / spec.run_id, probe=False)
    # before the probe, which would write into a folder that is not a run's; the lock is rank 0's to take (a
    # job started by the user: its other ranks write nothing, and would find rank 0 holding it)
    RunFolder(out).check_new(others=topology.detect().rank == 0)
    outputs.probe_folder(out)
    spec.out_dir = str(out)
    return spec


def check_runnable(spec: SweepSpec) -> None:
    """Can this machine and this Python run the spec at all? (A new run and a resumed one alike.)"""
    if spec.nccl_tuning and os.environ.get("NCCL_DEBUG_FILE"):
        raise InputError("--nccl-tuning sends rank 0's NCCL log to a file of its own: unset NCCL_DEBUG_FILE")
    for backend in spec.backends:
        reason = backends.missing(backend, spec.device)
        if reason:
            raise InputError(reason)
    if spec.emulate is not None:
        emulate.check_available()


def start(spec: SweepSpec, folder: RunFolder, launcher: str, commands, launcher_args: list[str], on_event,
            relay) -> RunResult:
    on_event = terminal.shown(on_event or (lambda e: None))  # stdout full: stopped as for a closed pipe
    relay = relay or launch.relay_stderr
    if launcher == "none":
        return run_in_process(spec, folder, on_event)
    with emulate.cluster(spec) as emulation:  # nothing unless --emulate; torn down however this ends
        if emulation:
            folder.update({"emulation": emulation})
        return _follow(spec, folder, launcher, commands, launcher_args, on_event, relay)


def _follow(spec: SweepSpec, folder: RunFolder, launcher: str, commands, launcher_args: list[str], on_event,
            relay) -> RunResult:
    """Start the job and follow rank 0's events to the end of the sweep, writing them down."""
    result = RunResult(folder.dir)
    monitor = watchdog.Monitor()
    error, job = None, None
    try:  # from the moment run.json says "running": a signal in between still ends with a final status
        folder.update({"spec": spec.__dict__, "launcher": launcher, "launcher_args": launcher_args,
                       "launch_argv": commands[0][0], "status": RunStatus.RUNNING})
        try:
            job = launch.Job(commands, launcher)
        except OSError as exc:  # the launcher cannot be started: not the folder's fault
            raise JobError(f"cannot start {commands[0][0][0]!r}: {exc.strerror or exc}") from None
        for event in watchdog.iter_events(job, spec, relay, monitor):
            collect(result, folder, event)
            on_event(event)
        code = job.wait()
        if code != 0 or monitor.error:
            error = monitor.failure(job, code)
        elif result.status != "done":
            error = f"the ranks exited before the sweep finished {monitor.where()}"
    except (KeyboardInterrupt, BrokenPipeError) as exc:  # a signal, or the reader of stdout went away
        with interrupts.deferred():  # a second Ctrl-C waits until the run's status is written
            if job is not None:
                job.kill()
            why = stopped_why(exc)
            if result.status != "done" and every_point_recorded(spec, result):
                folder.record({"event": "done"})  # the ranks had measured everything: what "done" writes
                result.status = "done"
            finish(result, folder, RunStatus.COMPLETED if result.status == "done" else RunStatus.INTERRUPTED,
                    None if result.status == "done" else why)
        raise
    except JobError as exc:
        finish(result, folder, RunStatus.FAILED, str(exc))
        raise
    except OSError as exc:  # the folder cannot be written (disk full, permissions): the job is of no use
        if job is not None:
            job.kill()
        error = f"cannot write {str(folder.dir)!r}: {exc.strerror or exc}"
        try:
            finish(result, folder, RunStatus.FAILED, error)
        except OSError:
            pass
        raise JobError(error) from None
    except Exception as exc:  # anything else (a bug, a callback's error): the run still ends with a status
        if job is not None:
            job.kill()
        try:
            finish(result, folder, RunStatus.FAILED, f"{type(exc).__name__}: {exc}")
        except OSError:
            pass
        raise
    finally:
        if job is not None and any(p.poll() is None for p in job.procs):
            job.kill()
    if error:
        job.kill()
        finish(result, folder, RunStatus.FAILED, error)
        raise JobError(error)
    finish(result, folder, RunStatus.COMPLETED, None)
    return result


def stopped_why(exc: BaseException) -> str:
    """run.json's `error` of a run cut short by its user's side: a signal, or standard output gone or full."""
    if isinstance(exc, terminal.StdoutUnwritable):
        return f"standard output could not be written ({(exc.strerror or 'no space left').lower()})"
    return "standard output was closed" if isinstance(exc, BrokenPipeError) else "interrupted by the user"


def every_point_recorded(spec: SweepSpec, result: RunResult) -> bool:
    """Has every point of the plan a row (this launch's, or an earlier session's) or a skip?"""
    recorded = (set(spec.done_points) | {int(r["point"]) for r in result.rows}
                | {s["index"] for s in result.skipped})
    return all(p.index in recorded for p in build_plan(spec))


def collect(result: RunResult, folder: RunFolder, event: dict) -> None:
    """Write the event into the folder (a row is on disk before anyone is shown it), then note it.
    A signal waits until the event is written whole."""
    kind = event["event"]
    with interrupts.deferred():  # what is on disk is noted before a signal is acted on (its row counts)
        written = folder.record(event)
        if kind == "row" and written:
            result.rows.append(event["row"])
        elif kind == "skip":
            result.skipped.append(event["point"] | {"reason": event["reason"]}
                                 | ({"failed": True} if event.get("failed") else {}))
        elif kind == "done":
            result.status = "done"
    if kind == "done":
        sent = event.get("rows", len(result.rows))
        if sent != len(result.rows):
            raise JobError(f"{sent - len(result.rows)} of the {sent} rows rank 0 sent did not arrive whole; "
                           "resume the run to measure those points again")
        if not folder.has_facts:
            raise JobError("rank 0's facts for run.json (world, versions, machines) did not arrive whole; "
                           "resume the run to record them")


def finish(result: RunResult, folder: RunFolder, status: str, error: str | None) -> None:
    """Record how the run ended; totals count every row of the run (a resumed run included)."""
    result.status, result.wrong, result.unreliable, result.in_run = status, folder.wrong, folder.unreliable, folder.rows
    with interrupts.deferred():
        folder.finish(status, error)


def run_in_process(spec: SweepSpec, folder: RunFolder, on_event) -> RunResult:
    """--launcher none: this process is one rank of a job someone else started; rank 0 writes
    the folder through the same RunFolder as a launched job."""
    from commbench.rank import worker

    rank0 = topology.detect().rank == 0
    if rank0:
        folder.update({"spec": spec.__dict__, "launcher": "none", "status": RunStatus.RUNNING})
    result = RunResult(folder.dir, reports=rank0)

    def emit(kind, **data):
        event = {"event": kind, **data}
        collect(result, folder, event)
        on_event(event)

    try:
        worker.run(spec, emit=emit if rank0 else (lambda kind, **data: None), progress=lambda kind, **data: None)
    except KeyboardInterrupt:  # the launcher forwards the signal to every rank: each ends with its line
        if rank0:
            finish(result, folder, RunStatus.INTERRUPTED, "interrupted by a signal")
        raise
    except BaseException as exc:  # noqa: BLE001
        if rank0:
            finish(result, folder, RunStatus.FAILED, f"{type(exc).__name__}: {exc}")
        worker.fail(exc)
    if rank0:
        finish(result, folder, RunStatus.COMPLETED, None)
    return result
