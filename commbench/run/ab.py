"""`commbench ab`: measure a baseline side A and a candidate side B interleaved, and judge B against
A point by point from the pairs (commbench.analysis.paired).

Two sides are two specs of the same points, each with its own environment variables and Python.
They are interleaved at the finest grain their difference allows (GRAINS, finest first):

  in-process  one job whose ranks hold both sides' calls (the sides differ only in options such as
              the algorithm): per point, both bound on the same memory, A and B alternate turn by
              turn (ABBA) within one command; a pair is microseconds apart
  token       jobs alive at once (another environment or Python), taking turns: the parent hands
              the token to one job for one turn while every rank of the others sleeps in recv()
              (commbench.rank.turns); a pair is milliseconds apart, the launches paid once. Each
              launch has its own luck in where its library's buffers lie, so LAUNCH_PAIRS pairs of
              jobs run, rounds rotating through them, and a verdict must hold in each (paired)
  launch      rounds of launches (the two jobs cannot be alive together: a Slurm allocation, an
              emulated cluster, or memory for one job's buffers only): per round, per block of
              points, A's launch and B's in a balanced order (ABBA over rounds and blocks); the pair
              is the round, seconds apart

A round measures every open point: prepare it (bind, fill, warm up), PAIRS_PER_ROUND pairs of turns
(each turn one untimed call, then SAMPLES_PER_TURN timed batches; both sides time batches of the
same length, the larger of the two sides' automatic choices, fixed at the first round), then check
every side's output. Verdicts are taken after the rounds the paired analysis schedules
(1, 2, 4, ...); a point settled is measured no more; the comparison ends when every point is
settled, at the last round, or when the budget would not hold another round.

Both sides' buffers lie at the same place of one /dev/shm file every job maps (commbench.rank.arena):
where buffers lie moves a point by up to 18 % here, which pairing cannot cancel.

One folder holds it all: a row per (side, point, round) with `side` and `round`, the samples with
`side`, `round` and `pair`; run.json records the grain and why, both sides (options, environment,
Python, their ranks' facts: versions, hosts) and the compared points; ab.json the verdicts.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from commbench.folder.schema import RunStatus
from commbench import interrupts, runinfo
from commbench.analysis import paired
from commbench.analysis.compare import Comparison, Verdict
from commbench.analysis.compare_formats import to_json
from commbench.errors import InputError, JobError
from commbench.folder.outputs import write_text
from commbench.run import emulate, launch
from commbench.run.ab_rounds import PAIRS_PER_ROUND, SAMPLES_PER_TURN, AbFolder, Measure, rounds_until_settled, shared_arena
from commbench.run.ab_sides import (GRAINS, LAUNCH_PAIRS, AbSide, Compared, arena_layout, choose_grain, match,
                                    prepare_sides)
from commbench.run.side_python import check_python

__all__ = ["GRAINS", "AbComparison", "AbResult", "AbSide", "arena_layout", "choose_grain", "match", "run_ab"]

DEFAULT_BUDGET_S = 600.0
DEFAULT_MAX_ROUNDS = 32
MAX_ROUNDS = 1024
AB_JSON = "ab.json"


@dataclass
class AbResult:
    out_dir: Path
    comparison: "AbComparison"
    grain: str
    rounds: int
    seconds: float
    wrong: int


class AbComparison(Comparison):
    """A Comparison whose counts are the A/B pairs and whose intervals are the paired analysis'."""
    UNIT = "pairs"
    TITLE = "commbench ab"

    def __init__(self, *args, grain: str = "", rounds: int = 0, seconds: float = 0.0, tail: float = 0.05,
                 looks: int = 1, skipped: list | None = None, reach: list | None = None, **kw):
        super().__init__(*args, **kw)
        self.grain, self.rounds, self.seconds, self.looks = grain, rounds, seconds, looks
        self.skipped, self.reach = skipped or [], reach or []
        self.INTERVAL = f"{1 - 2 * tail:.1%} CI"

    def jobs_text(self) -> str:
        pairs = [v.jobs[0] for v in self.verdicts]
        return f"{self.grain} pairs, {min(pairs, default=0)}-{max(pairs, default=0)} a point" if pairs else "no pairs"

    def summary(self) -> str:
        return (f"{self.counts_text()}, {len(self.skipped)} skipped (threshold {self.threshold_text()}; "
                f"{self.jobs_text()}; {self.rounds} rounds in {self.seconds:.0f} s)")

    def advice(self) -> list[str]:
        out = [f"skipped: {name} ({why})" for name, why in self.skipped]
        if self.missing_fails:
            out.append(f"{len(self.missing)} point(s) one side cannot run fail the comparison (--allow-missing "
                       "accepts them)")
        if self.reach:
            res = [r for r, _ in self.reach]
            det = [d for _, d in self.reach]
            out.append(f"resolution (the interval's half-width): median {np.median(res):.1%}, best {min(res):.1%}; "
                       f"the smallest slowdown these pairs could have called a regression: median "
                       f"{np.median(det):.1%}, {min(det):.1%} at the steadiest point")
        open_ = self.count("inconclusive")
        if open_:
            out.append(f"{open_} inconclusive: more rounds (--budget, --rounds) or a quieter machine would settle them")
        if self.strict and open_:
            out.append("--strict: inconclusive points fail the comparison")
        return out + self.no_verdict_advice()


def run_ab(a: AbSide, b: AbSide, threshold: float = 0.05, budget_s: float = DEFAULT_BUDGET_S,
           max_rounds: int = DEFAULT_MAX_ROUNDS, min_rounds: int = 1, grain: str = "auto",
           launcher_args: list[str] | None = None, allow_missing: bool = False,
           out_dir: str | None = None, strict: bool = False, on_event: Callable[[dict], None] | None = None,
           relay: Callable[[launch.Line], None] | None = None, argv: list[str] | None = None) -> AbResult:
    """Compare side B against side A (module docstring). Raises InputError before anything starts,
    JobError when a job fails (the rows measured so far stay in the folder)."""
    on_event = on_event or (lambda e: None)
    relay = relay or launch.relay_stderr
    launcher_args = launcher_args or []
    if not 0 < threshold < 1:
        raise InputError(f"invalid threshold {threshold}: give a fraction between 0 and 1 (e.g. 5%)")
    if not (budget_s > 0 and math.isfinite(budget_s)):
        raise InputError(f"invalid --budget {budget_s}: it must be a positive number of seconds")
    if not 1 <= max_rounds <= MAX_ROUNDS:
        raise InputError(f"invalid --rounds {max_rounds}: it must be 1 to {MAX_ROUNDS}")
    if not 1 <= min_rounds <= max_rounds:
        raise InputError(f"invalid --min-rounds {min_rounds}: it must be 1 to --rounds ({max_rounds})")
    a, b = prepare_sides(a, b, out_dir)
    compared = match(a, b)
    launcher = launch.resolve_launcher(a.spec)
    if launch.resolve_launcher(b.spec) != launcher:
        raise InputError("the sides would be started by different launchers: give both the same --launcher")
    chosen, why = choose_grain(a, b, launcher, grain)
    versions = {s.name: check_python(s.python, f"--python-{s.name.lower()}", launcher == "emulated") for s in (a, b)}
    for s in (a, b):  # what a launch refuses (the machine's ranks, MPI's version, tools), before anything is made
        launch.build_commands(s.spec, launcher, launcher_args, [s.python, "-m", "commbench.rank.turns"])
    launch_pairs = min(LAUNCH_PAIRS, max_rounds) if chosen == "token" else 1
    folder = AbFolder(a.spec.out_dir)
    record = {"grain": chosen, "grain_reason": why, "launch_pairs": launch_pairs, "threshold": threshold,
              "budget_s": budget_s, "max_rounds": max_rounds, "min_rounds": min_rounds,
              "pairs_per_round": PAIRS_PER_ROUND, "samples_per_turn": SAMPLES_PER_TURN, "alpha": paired.ALPHA,
              "looks": list(paired.looks(max_rounds, max(min_rounds, launch_pairs))),
              "sides": {s.name: {"options": s.options, "env": s.env, "python": s.python,
                                 "commbench": versions[s.name]["commbench"], "commbench_path": versions[s.name]["path"],
                                 "git_revision": versions[s.name]["git_revision"],
                                 "spec": s.spec.__dict__} for s in (a, b)},
              "compared": [{"A": c.a.index, "B": c.b.index, "point": c.title} for c in compared]}
    # the cluster (--emulate) and the ranks' socket before the folder: where either cannot be had, nothing is written
    with emulate.cluster(a.spec) as emulation:  # nothing unless --emulate; torn down however this ends
        m = Measure(a, b, folder, chosen, launcher, launcher_args, relay, on_event)
        memory = None
        try:
            folder.create({"kind": "ab", "run_id": a.spec.run_id, "label": a.spec.label, "start_time": runinfo.utc_now(),
                           "launcher": launcher, "launcher_args": launcher_args, **runinfo.parent_info(argv or sys.argv),
                           "spec": a.spec.__dict__, "ab": record, "status": RunStatus.RUNNING,
                           **({"emulation": emulation} if emulation else {})})
            on_event({"event": "ab", "grain": chosen, "why": why, "points": len(compared), "launcher": launcher})
            memory = shared_arena(a.spec, b.spec, launcher, launcher_args, on_event)
            folder.update({"ab": dict(record, memory="arena" if memory else "each job its own buffers")})
            start = time.monotonic()
            if memory:
                m.server.arena = {"path": memory[0], "stride": memory[1]}
            rounds, gate, error = rounds_until_settled(m, compared, threshold, budget_s, max_rounds,
                                                       max(min_rounds, launch_pairs), launch_pairs)
        finally:
            m.server.close()
            if memory:
                os.unlink(memory[0])
    seconds = time.monotonic() - start
    with interrupts.deferred():
        folder.update({"status": RunStatus.FAILED if error else RunStatus.COMPLETED, "error": error,
                       "end_time": runinfo.utc_now(), "rounds": rounds, "seconds": round(seconds, 1),
                       "samples_file": folder.finalize(),
                       "points_measured": folder.rows, "wrong_total": folder.wrong})
    if error:
        raise JobError(f"{error}; the rows measured are in {folder.dir}")
    measured = [c for c in compared if c.skip is None]
    if not measured:
        raise InputError(f"nothing measured: every point was skipped ({'; '.join(dict.fromkeys(c.skip for c in compared))})")
    if gate.open and rounds != max_rounds:  # the budget ended the rounds: one last look at what there is
        gate.look([c.blocks(launch_pairs) for c in measured], last=True)
    revisions = {s: v["git_revision"] for s, v in versions.items()}
    comparison = _comparison(a, b, compared, measured, gate, threshold, strict, chosen, rounds, seconds, m.facts,
                             revisions)
    comparison.allow_missing = allow_missing
    comparison.missing = [dict(c.key, skipped_by=list(c.skipped_by)) for c in compared if len(c.skipped_by) == 1]
    write_text(folder.dir / AB_JSON, to_json(comparison) + "\n", AB_JSON)
    return AbResult(folder.dir, comparison, chosen, rounds, seconds, folder.wrong)


def _comparison(a: AbSide, b: AbSide, compared: list[Compared], measured: list[Compared], gate, threshold: float,
                strict: bool, grain: str, rounds: int, seconds: float, facts: dict,
                revisions: dict | None = None) -> AbComparison:
    from commbench.analysis import conditions

    metas = []
    for side in (a, b):
        meta = dict(facts.get(side.name, {}), environment=dict(runinfo.collective_env(), **side.env),
                    launcher=side.spec.launcher)
        if side.options:
            meta["versions"] = dict(meta.get("versions", {}), options=side.options)
        meta["versions"] = dict(meta.get("versions", {}), python_executable=side.python)
        revision = (revisions or {}).get(side.name)
        if revision:  # each side's own source, as its Python imports it (run.json's git_revision is the parent's)
            meta["versions"]["commbench_git_revision"] = revision
        metas.append(meta)
    cmp = AbComparison(f"A {a.options or '(common options)'}", f"B {b.options or '(common options)'}", threshold,
                       strict=strict, candidates=[f"B {b.options}"], context=[conditions.changes([metas[0]], [metas[1]])],
                       grain=grain, rounds=rounds, seconds=seconds, tail=gate.tail, looks=len(gate.looks),
                       skipped=[(c.title, c.skip) for c in compared if c.skip])
    reach = []
    for c, v in zip(measured, gate.verdicts, strict=True):
        a_us = [float(np.median(x)) for x in c.samples["A"].values()]
        b_us = [float(np.median(x)) for x in c.samples["B"].values()]
        cmp.verdicts.append(Verdict(c.key, v.verdict, float(np.median(a_us)), float(np.median(b_us)), v.ratio, v.low,
                                    v.high, v.p_value, (v.pairs, v.pairs), (sum(map(len, c.samples["A"].values())),
                                                                             sum(map(len, c.samples["B"].values()))),
                                    note=v.note, title=c.title))
        if v.resolution() is not None:
            reach.append((v.resolution(), v.detectable(threshold)))
    cmp.reach = reach
    return cmp
