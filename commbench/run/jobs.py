"""`--repeat N`: every point measured by N separate jobs, into one run folder.

A job is one launch of the ranks: its own processes, placement, caches and neighbours, which
shift every iteration it times alike. `commbench compare` therefore takes the job, not the
iteration, as its unit, and needs several jobs a side (commbench.analysis.verdicts).

The plan is cut into blocks of consecutive points that share backend, collective and algorithm (one
implementation's sweep over dtypes, ops, modes and sizes), one launch each. Job 1 measures every
block, then job 2 every block, and so on: a point's jobs lie as far apart in time as the run
allows, so the spread between them shows how much the machine's state moves the point, which is
what compare's interval stands on. (Jobs 1..N of one block back to back, the first design, share
the machine's state: on this project's 2-core VM, whose cores' cache-to-cache path turns 2-4x
slower for seconds at a time, the three jobs of a block fell into one state together in 52 % of
blocks against 33 % if they were independent, sides' means varied 1.0-2.4x more than their jobs'
spread allowed (median 1.37x), and 20 runs of the same code compared pairwise had 3.4 % of points
called a regression; job after job, 1.08x and 1.7 %. A slow drift within the run now lands on the
later jobs: it widens the interval instead of faking a change. A run cut short holds job 1 of every
point measured so far, and --resume adds the others.) Rows and samples carry the job number
(`job`); run.json records `repeat` and, per launch, the job, the block's points, the hosts and the
CPU time other processes took on the launching host meanwhile (`background_cores`, from /proc/stat
less this process tree's own; `compare` shows a side that ran beside more of it). A point the ranks
skip (it cannot run here) is not launched again for the other jobs. Resume (`run --resume DIR`)
measures exactly the (point, job) pairs that have no row.

Costs one launcher start per block and job (about 2-3 s for mpirun on a small machine).
"""

from __future__ import annotations

import itertools
import platform
import resource
import sys
import time
from typing import Callable

from commbench.folder.schema import RunStatus
from commbench import runinfo
from commbench.errors import InputError
from commbench.machine.facts import facts
from commbench.options import MAX_REPEAT
from commbench.plan import Point, build_plan
from commbench.run import launch, session
from commbench.folder.write import RunFolder
from commbench.spec import SweepSpec


def check_repeat(n: int, where: str = "--repeat") -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_REPEAT:
        raise InputError(f"{where}: {n!r} must be between 1 and {MAX_REPEAT}")
    return n


def blocks(plan: list[Point]) -> list[list[int]]:
    """Plan indexes in blocks of consecutive points of one backend, collective and algorithm."""
    return [[p.index for p in pts]
            for _, pts in itertools.groupby(plan, key=lambda p: (p.backend, p.collective, p.algorithm))]


class JobFolder(RunFolder):
    """The run folder, written by one launch after another: a launch that completes leaves the
    run `running` until the last one; each rank-0 skip is recorded once."""

    final = False

    def record(self, event: dict) -> bool:
        if event["event"] == "skip" and any(s.get("index") == event["point"].get("index") for s in self.skipped):
            return True
        if event["event"] == "facts":
            self.hosts = sorted({r.get("hostname", "?") for r in event["run"].get("ranks", [])})
        return super().record(event)

    def finish(self, status: str, error: str | None) -> None:
        if status == RunStatus.COMPLETED and not self.final:
            self.update({"points_measured": self.rows, "wrong_total": self.wrong})
            return
        super().finish(status, error)


def _cpu_seconds() -> tuple[float, float, float] | None:
    """(busy CPU seconds of the whole host, CPU seconds of this process and its waited-for
    descendants, monotonic time); None where /proc/stat is unreadable."""
    from commbench.machine.load import busy_seconds

    busy = busy_seconds()
    if busy is None:
        return None
    own = sum(getattr(resource.getrusage(who), a) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
              for a in ("ru_utime", "ru_stime"))
    return busy, own, time.monotonic()


def _background(before, after) -> float | None:
    """Cores' worth of CPU time that other processes (and a VM's neighbours: steal) took."""
    if before is None or after is None or after[2] <= before[2]:
        return None
    busy, own, wall = (a - b for a, b in zip(after, before, strict=True))
    return round(max(0.0, (busy - own) / wall), 3)


def run(spec: SweepSpec, repeat: int, launcher_args: list[str] | None = None,
        on_event: Callable[[dict], None] | None = None, relay=None, argv: list[str] | None = None):
    """A new run of `repeat` jobs (commbench.run.api.run_sweep with repeat > 1)."""
    check_repeat(repeat)
    spec = session.prepare(spec)
    launcher = "none" if spec.launcher == "none" else launch.resolve_launcher(spec)  # (none given: said first)
    if launcher == "none":
        raise InputError("--repeat starts its jobs itself; with --launcher none you start the job: run it once per "
                         "repetition, each with its own --out, and compare the folders")
    folder = JobFolder(spec.out_dir)
    folder.create({"run_id": spec.run_id, "label": spec.label, "start_time": runinfo.utc_now(), "repeat": repeat,
                   **runinfo.parent_info(argv or sys.argv)})
    return _measure(spec, folder, launcher, launcher_args or [], repeat, set(), {}, on_event, relay)


def resume(spec: SweepSpec, meta: dict, launcher_args: list[str], on_event=None, relay=None):
    """Measure the (point, job) pairs of a repeated run that have no row (run --resume)."""
    folder = JobFolder(spec.out_dir)
    folder.repair()
    session.check_runnable(spec)
    launcher = launch.resolve_launcher(spec)
    if launcher == "none":
        raise InputError("a repeated run resumes with the launcher it was started with, not --launcher none")
    folder.skipped = [s for s in meta.get("skipped") or [] if isinstance(s, dict) and "index" in s]
    return _measure(spec, folder, launcher, launcher_args, check_repeat(meta["repeat"], "run.json repeat"),
                    folder.measured, meta, on_event, relay)


def _measure(spec: SweepSpec, folder: JobFolder, launcher: str, launcher_args: list[str], repeat: int,
             done: set[tuple[int, int]], meta: dict, on_event, relay):
    on_event = on_event or (lambda e: None)
    plan = build_plan(spec)
    parts = blocks(plan)
    every = {p.index for p in plan}
    record = dict(spec.__dict__, done_points=[])
    total = session.RunResult(folder.dir)
    log = list(meta.get("jobs") or [])  # one entry per launch
    cannot = {s["index"] for s in folder.skipped}  # points the ranks skipped: not launched again
    announced = False

    def events(event: dict) -> None:
        nonlocal announced
        kind = event["event"]
        if kind == "done":
            return
        if kind == "ready":
            if announced:
                return
            announced = True
            note = (f"{repeat} jobs per point: job 1 measures the {len(parts)} block(s) of points, then job 2, "
                    "and so on")
            event = dict(event, total=len(plan) * repeat, already=len(done), repeat=repeat,
                         note="; ".join(n for n in (event.get("note"), note) if n))
        on_event(event)

    try:
        for k in range(1, repeat + 1):
            for b, block in enumerate(parts, 1):
                todo = [i for i in block if (i, k) not in done and i not in cannot]
                if not todo:
                    continue
                one = SweepSpec.from_json(spec.to_json())
                one.done_points = sorted(every - set(todo))
                commands = launch.build_commands(one, launcher, launcher_args)
                folder.job, folder.has_facts, folder.hosts = k, False, []
                start, before = runinfo.utc_now(), _cpu_seconds()
                result = session.start(one, folder, launcher, commands, launcher_args, events, relay)
                # srun's ranks are slurmstepd's children, not ours: their CPU time would count as others'
                background = None if launcher == "srun" else _background(before, _cpu_seconds())
                cannot |= {s["index"] for s in result.skipped}
                total.rows += result.rows
                total.skipped += [s for s in result.skipped if s["index"] not in {t["index"] for t in total.skipped}]
                log.append({"job": k, "block": b, "points": todo, "hosts": folder.hosts, "start": start,
                            "end": runinfo.utc_now(), "background_cores": background,
                            "measured_on": platform.node(), "cpu_count": facts().cpus})
                folder.update({"jobs": log})
    except (KeyboardInterrupt, BrokenPipeError) as exc:  # the launch under way marked nothing final: cut short
        folder.final = True
        session.finish(total, folder, RunStatus.INTERRUPTED, session.stopped_why(exc))
        raise
    finally:
        try:
            folder.update({"spec": record})  # the run's spec, not its last launch's
        except OSError:
            pass
    folder.final = True
    session.finish(total, folder, RunStatus.COMPLETED, None)
    on_event({"event": "done", "wrong": total.wrong, "rows": len(total.rows)})
    return total
