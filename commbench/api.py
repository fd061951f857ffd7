"""The Python API under the CLI: `run_sweep(spec)` launches the ranks, follows rank 0's events
and returns what was measured. Script it directly:

    from commbench.api import run_sweep
    from commbench.spec import SweepSpec
    result = run_sweep(SweepSpec(backends=["mpi"], nprocs=4, out_dir="results/x"))
"""

from __future__ import annotations

import secrets
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from commbench import launch, runinfo
from commbench.errors import InputError, JobError
from commbench.results import RESULTS_CSV, update_run_json
from commbench.spec import SweepSpec


@dataclass
class RunResult:
    out_dir: Path
    rows: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    wrong: int = 0
    status: str = "running"


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def prepare(spec: SweepSpec, results_root: str = "results") -> SweepSpec:
    """Validate everything and fix run id and output folder; raises InputError, writes nothing."""
    spec.validate()
    spec.run_id = spec.run_id or new_run_id()
    out = Path(spec.out_dir or Path(results_root) / spec.run_id)
    if out.exists() and not out.is_dir():
        raise InputError(f"output path {str(out)!r} is a file, not a folder")
    if (out / RESULTS_CSV).exists():
        raise InputError(f"output folder {str(out)!r} already holds results (choose another --out)")
    for parent in (out, *out.parents):
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"output path {str(out)!r} is inside {str(parent)!r}, which is a file")
            break
    spec.out_dir = str(out)
    return spec


def run_sweep(spec: SweepSpec, launcher_args: list[str] | None = None,
              on_event: Callable[[dict], None] | None = None,
              relay: Callable[[launch.Line], None] | None = None,
              argv: list[str] | None = None) -> RunResult:
    """Run one sweep to the end. Raises InputError before anything starts, JobError when the
    ranks fail; KeyboardInterrupt kills the ranks and marks the run interrupted."""
    spec = prepare(spec)
    launcher = launch.resolve_launcher(spec)
    on_event = on_event or (lambda e: None)
    relay = relay or (lambda line: print(line.text, file=sys.stderr))
    if launcher == "none":
        return _run_in_process(spec, on_event, argv)
    commands = launch.build_commands(spec, launcher, launcher_args or [])
    out = Path(spec.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    update_run_json(out, {"run_id": spec.run_id, "label": spec.label, "spec": spec.__dict__, "launcher": launcher,
                          "launch_argv": _masked(commands[0][0]),
                          "start_time": runinfo.utc_now(), "status": "running", **runinfo.parent_info(argv or sys.argv)})
    result = RunResult(out)
    job = launch.Job(commands)
    error = None
    try:
        for event in launch.iter_events(job, spec, relay):
            _collect(result, event)
            if event["event"] == "error" and error is None:
                error = f"rank {event.get('rank')}: {event.get('message')}"
            on_event(event)
        code = job.wait()
        if error is None and code != 0:
            error = f"the launcher exited with code {code} before the sweep finished"
        if error is None and result.status != "done":
            error = "the ranks exited before the sweep finished"
    except KeyboardInterrupt:
        job.kill()
        _finish(result, "interrupted", "interrupted by the user")
        raise
    except JobError as exc:
        _finish(result, "failed", str(exc))
        raise
    finally:
        if any(p.poll() is None for p in job.procs):
            job.kill()
    if error:
        job.kill()
        _finish(result, "failed", error)
        raise JobError(error)
    _finish(result, "completed", None)
    return result


def _masked(argv: list[str]) -> list[str]:
    """The launch command for run.json, the encoded spec (recorded in full above) elided."""
    return [a if i == 0 or argv[i - 1] != "--spec" else "<spec>" for i, a in enumerate(argv)]


def _collect(result: RunResult, event: dict) -> None:
    kind = event["event"]
    if kind == "row":
        result.rows.append(event["row"])
        result.wrong += int(event["row"]["wrong"])
    elif kind == "skip":
        result.skipped.append(event["point"] | {"reason": event["reason"]})
    elif kind == "done":
        result.status = "done"


def _finish(result: RunResult, status: str, error: str | None) -> None:
    result.status = status
    update_run_json(result.out_dir, {"status": status, "error": error, "end_time": runinfo.utc_now(),
                                     "points_measured": len(result.rows), "wrong_total": result.wrong})


def _run_in_process(spec: SweepSpec, on_event, argv) -> RunResult:
    """--launcher none: this process is one rank of a job someone else started."""
    from commbench import topology, worker

    rank0 = topology.detect().rank == 0
    out = Path(spec.out_dir)
    if rank0:
        out.mkdir(parents=True, exist_ok=True)
        update_run_json(out, {"run_id": spec.run_id, "label": spec.label, "spec": spec.__dict__, "launcher": "none",
                              "start_time": runinfo.utc_now(), "status": "running", **runinfo.parent_info(argv or sys.argv)})
    result = RunResult(out)

    def emit(kind, **data):
        event = {"event": kind, **data}
        _collect(result, event)
        on_event(event)

    try:
        worker.run(spec, emit=emit if rank0 else (lambda kind, **data: None))
    except BaseException as exc:  # noqa: BLE001
        if rank0:
            _finish(result, "failed", f"{type(exc).__name__}: {exc}")
        worker.fail(exc)
    if rank0:
        _finish(result, "completed", None)
    return result
