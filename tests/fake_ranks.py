"""Rank 0's events without ranks, for tests of the parent (tests/run/test_api.py,
tests/run/test_jobs_units.py): what a job of `spec` would send the parent (facts, ready, per point
its samples and row, or a skip, then done), rows made by the worker's own row builder, and a
stand-in for launch.Job that plays such events back as output lines. Nothing is launched."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np

from commbench.dtypes import DTYPES
from commbench.events import PREFIX
from commbench.collectives import COLLECTIVES
from commbench.rank.harness import Measurement
from commbench.plan import build_plan
from commbench.rank.worker import make_row
from commbench.run import launch
from commbench.spec import SweepSpec

SAMPLES = [4e-6, 5e-6, 6e-6]  # seconds per call: every point's three samples


def spec_of(tmp_path, **kw) -> SweepSpec:
    """A small valid MPI spec (two collectives, two sizes, out-of-place: four points) with a run folder
    under tmp_path."""
    fields = dict(backends=["mpi"], collectives=["all_reduce", "all_gather"], sizes=[8, 64], nprocs=2, iters=3,
                  in_place=[False], run_id="r1", out_dir=str(tmp_path / "run"))
    return SweepSpec(**(fields | kw)).validate()


def row_for(spec: SweepSpec, point) -> dict:
    counts = COLLECTIVES[point.collective].counts(point.size, DTYPES[point.dtype].itemsize, spec.nprocs)
    m = Measurement(samples_s=np.array(SAMPLES), batch=1, wrong=0, warmup=1)
    return make_row(spec, point, counts, m, spec.nprocs, 1, spec.nprocs, "cpu")


def rank0_events(spec: SweepSpec, skip=(), done=True) -> list[dict]:
    """What rank 0 of a job of spec sends: its facts, ready, then per point not done a skip (index
    in `skip`) or its samples and row, then done (unless done is False: the job cut short)."""
    events = [{"event": "facts", "run": {"world_size": spec.nprocs, "ranks": [{"hostname": "h1"}, {"hostname": "h2"}]}},
              {"event": "ready", "world_size": spec.nprocs, "total": len(build_plan(spec)), "note": None}]
    rows = 0
    for p in build_plan(spec):
        if p.index in spec.done_points:
            continue
        if p.index in skip:
            events.append({"event": "skip", "point": p.as_dict(), "reason": "not here"})
            continue
        events += [{"event": "samples", "point": p.index, "values": [t * 1e6 for t in SAMPLES]},
                   {"event": "row", "row": row_for(spec, p)}]
        rows += 1
    if done:
        events.append({"event": "done", "wrong": 0, "rows": rows})
    return events


class ScriptedJob:
    """launch.Job's stand-in: plays `script.events` back as rank 0's output lines (`script.stderr`
    lines first), raises `script.interrupt` after `script.interrupt_after` events, exits with
    `script.code`. `script.jobs`: every job made, with its commands."""

    script = SimpleNamespace(events=[], stderr=[], code=0, interrupt=None, interrupt_after=0, jobs=[])

    def __init__(self, commands, launcher=""):
        self.commands, self.killed, self.waited, self.launcher = commands, False, False, launcher
        self.procs = [SimpleNamespace(poll=lambda: 0 if self.killed or self.waited else None, returncode=None)]
        self.script.jobs.append(self)

    def lines(self, deadline):
        s = self.script
        for text in s.stderr:
            yield launch.Line(text, "stderr")
        for i, event in enumerate(s.events):
            if s.interrupt is not None and i == s.interrupt_after:
                raise s.interrupt
            yield launch.Line(PREFIX + json.dumps(event), "stdout")

    def wait(self):
        self.waited = True
        return self.script.code

    def kill(self):
        self.killed = True


def scripted(monkeypatch, **script) -> SimpleNamespace:
    """launch.Job replaced by ScriptedJob playing `script`; build_commands replaced (no binary
    looked for, no spec file); the launcher mpirun. The script, to change between launches;
    `script.per_launch(spec)`, where given, makes each launch's events from its spec."""
    s = SimpleNamespace(events=[], stderr=[], code=0, interrupt=None, interrupt_after=0, jobs=[], built=[],
                        per_launch=None)
    s.__dict__.update(script)

    def build_commands(spec, launcher, extra, worker=None, ranks_env=None):
        s.built.append((spec.done_points, launcher, list(extra)))
        if s.per_launch is not None:
            s.events = s.per_launch(spec)
        return [(["mpirun", *extra, "python", "-m", "commbench.rank.worker"], {})]

    monkeypatch.setattr(ScriptedJob, "script", s)
    monkeypatch.setattr(launch, "Job", ScriptedJob)
    monkeypatch.setattr(launch, "build_commands", build_commands)
    monkeypatch.setattr(launch, "resolve_launcher", lambda spec: "mpirun")
    return s
