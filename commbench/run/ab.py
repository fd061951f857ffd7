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
  launch      rounds of launches (the two jobs cannot be alive together: an emulated cluster, a
              Slurm allocation, or memory for one job's buffers only): per round, per block of
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from commbench import interrupts, runinfo
from commbench.analysis import paired
from commbench.analysis.compare import Comparison, Verdict, to_json
from commbench.errors import InputError, JobError
from commbench.metrics import summarize
from commbench.outputs import write_text
from commbench.dtypes import DTYPES
from commbench.rank import arena
from commbench.collectives import COLLECTIVES
from commbench.plan import Point, build_plan
from commbench.schema import AB_COLUMNS, AB_SAMPLE_COLUMNS, build_row
from commbench.run import launch, session
from commbench.run.folder import RunFolder
from commbench.run.jobs import blocks
from commbench.run.turn_server import STARTUP_TIMEOUT_S, TurnJob, TurnServer, check_python, relay_stderr
from commbench.spec import SweepSpec

GRAINS = ("in-process", "token", "launch")  # finest first
PAIRS_PER_ROUND = 8
# token grain: pairs of jobs (A1 B1, A2 B2, ...) alive together, rounds rotating through them; a verdict
# must hold in each (commbench.analysis.paired: a launch's luck in where its library's buffers lie)
LAUNCH_PAIRS = 3
SAMPLES_PER_TURN = 3
DEFAULT_BUDGET_S = 600.0
DEFAULT_MAX_ROUNDS = 32
MAX_ROUNDS = 1024
AB_JSON = "ab.json"
# spec fields that shape a job: sides that differ in one of them cannot share a process
JOB_FIELDS = ("nprocs", "launcher", "device", "emulate", "link_rate", "placement", "ranks_per_node", "oversubscribe")
# spec fields that say nothing about what is measured
NOT_COMPARED = ("label", "run_id", "out_dir", "done_points")
# what a point is, beyond its index: its fields, and the spec lists that set each
POINT_FIELDS = {"backend": "backends", "collective": "collectives", "algorithm": "algorithms", "dtype": "dtypes",
                "op": "ops", "in_place": "in_place", "size": "sizes"}


@dataclass
class AbSide:
    """One side: what it measures (the spec), and where: environment variables for its ranks and
    the Python they run (another virtual environment: another commbench, torch, NCCL or MPI)."""
    name: str  # "A" (baseline) or "B" (candidate)
    spec: SweepSpec
    env: dict[str, str] = field(default_factory=dict)
    python: str = sys.executable
    options: str = ""  # the run options this side was given beyond the common ones, as typed (for the record)


@dataclass
class Compared:
    """One point of the comparison: its index in each side's plan, and what it is called."""
    a: Point
    b: Point
    title: str
    key: dict
    skip: str | None = None  # why it cannot run (a side cannot measure it)
    skipped_by: tuple = ()  # the sides that cannot (one of two: the point is missing from the comparison)
    batch: int | None = None  # calls per sample, both sides (fixed at the first round)
    samples: dict = field(default_factory=lambda: {"A": {}, "B": {}})  # side -> (round, pair) -> µs per call
    open: bool = True  # measured on (not settled by a verdict)

    def blocks(self, launch_pairs: int) -> list[np.ndarray]:
        """The pair log-ratios, one block per pair of launches (round r ran on pair (r - 1) % n)."""
        out = []
        for j in range(launch_pairs):
            a, b = ({k: v for k, v in self.samples[s].items() if (k[0] - 1) % launch_pairs == j} for s in "AB")
            d = paired.pair_logs(a, b)
            if len(d):
                out.append(d)
        return out


def _differs(a: SweepSpec, b: SweepSpec) -> list[str]:
    """The spec fields whose values differ between the sides (what the comparison is about)."""
    return [f for f in a.__dataclass_fields__ if f not in NOT_COMPARED and getattr(a, f) != getattr(b, f)]


def _both(field_name: str, a, b) -> str:
    show = {True: "in-place", False: "out-of-place"} if field_name == "in_place" else {}
    va, vb = (show.get(v, v) if not isinstance(v, bool) or show else v for v in (a, b))
    return str(va) if va == vb else f"{va}→{vb}"


def match(a: AbSide, b: AbSide) -> list[Compared]:
    """The points the sides measure, paired: on every point field the sides' specs agree on (a field
    they set differently, such as the algorithm, is what is compared). An InputError when a point has
    no partner, or several."""
    varied = {f for f, lst in POINT_FIELDS.items() if getattr(a.spec, lst) != getattr(b.spec, lst)}
    keep = [f for f in POINT_FIELDS if f not in varied]

    def keyed(side: AbSide) -> dict:
        out: dict[tuple, Point] = {}
        for p in build_plan(side.spec):
            k = tuple(getattr(p, f) for f in keep)
            if k in out:
                raise InputError(f"side {side.name}'s points are not one each per point of the other side: they "
                                 f"differ in {', '.join(sorted(varied))} and side {side.name} has several "
                                 f"{'/'.join(sorted(varied))} per point; give each side one")
            out[k] = p
        return out

    pa, pb = keyed(a), keyed(b)
    for side, mine, other in (("A", pa, pb), ("B", pb, pa)):
        alone = [k for k in mine if k not in other]
        if alone:
            example = ", ".join(f"{f} {v}" for f, v in zip(keep, alone[0], strict=True))
            raise InputError(f"side {side} measures {len(alone)} point(s) the other side does not ({example}): give "
                             "both sides the same points (--args-a/--args-b change only what is compared)")
    out = []
    for k, p in pa.items():
        q = pb[k]
        key = {"collective": _both("collective", p.collective, q.collective), "backend": _both("", p.backend, q.backend),
               "algorithm": _both("", p.algorithm, q.algorithm), "dtype": _both("", p.dtype, q.dtype),
               "op": _both("", p.op or "none", q.op or "none"), "size_bytes": p.size,
               "world_size": _both("", a.spec.nprocs, b.spec.nprocs), "in_place": _both("in_place", p.in_place, q.in_place)}
        op = "" if key["op"] == "none" else f" {key['op']}"
        title = (f"{key['collective']} {key['algorithm']} {key['backend']} {key['dtype']}{op} {key['in_place']} "
                 f"{_both('', p.size, q.size)} B x{key['world_size']}")
        out.append(Compared(p, q, title, key))
    return out


def arena_layout(a: SweepSpec, b: SweepSpec) -> tuple[int, int]:
    """(stride, bytes) of an arena holding every point of both sides (commbench.rank.arena)."""
    world, region = max(a.nprocs, b.nprocs), 1
    for spec in (a, b):
        for p in build_plan(spec):
            itemsize = DTYPES[p.dtype].itemsize
            counts = COLLECTIVES[p.collective].counts(p.size, itemsize, spec.nprocs)
            region = max(region, arena.region_bytes(counts.in_count, counts.out_count, itemsize, p.in_place))
    stride = arena.stride(region, world)
    return stride, stride * world


def _memory_for_all(a: SweepSpec, b: SweepSpec) -> str | None:
    """Why the token grain's jobs' buffers cannot be on this machine at once, or None."""
    memory = launch._memory_bytes()
    need = LAUNCH_PAIRS * sum(s.nprocs * launch.BUFFERS_PER_RANK * max(s.sizes) for s in (a, b) if s.device == "cpu")
    if memory and need > memory:
        return (f"{2 * LAUNCH_PAIRS} jobs' buffers ({need / 1e9:.3g} GB) exceed this machine's memory "
                f"({memory / 1e9:.3g} GB)")
    return None


def choose_grain(a: AbSide, b: AbSide, launcher: str, requested: str = "auto") -> tuple[str, str]:
    """The finest grain the sides allow (or the one requested, when they allow it), and why."""
    why_apart = None
    if a.python != b.python:
        why_apart = "the sides run different Pythons"
    elif a.env != b.env:
        why_apart = "the sides' environments differ"
    else:
        job = [f for f in JOB_FIELDS if getattr(a.spec, f) != getattr(b.spec, f)]
        if job:
            why_apart = f"the sides' jobs differ ({', '.join(job)})"
    why_not_together = None
    if a.spec.emulate or b.spec.emulate:
        why_not_together = "an emulated cluster is one at a time"
    elif launcher == "srun":
        why_not_together = "two job steps may not fit in the Slurm allocation at once"
    else:
        why_not_together = _memory_for_all(a.spec, b.spec)
    possible = [g for g, ok in (("in-process", why_apart is None), ("token", why_not_together is None),
                                ("launch", True)) if ok]
    if requested == "auto":
        grain = possible[0]
    elif requested not in GRAINS:
        raise InputError(f"unknown grain {requested!r} (accepted: auto, {', '.join(GRAINS)})")
    elif requested not in possible:
        reason = why_apart if requested == "in-process" else why_not_together
        raise InputError(f"--grain {requested} is not possible: {reason}")
    else:
        grain = requested
    reason = {"in-process": "the sides differ only in what one process can hold side by side",
              "token": f"{why_apart}: their jobs take turns",
              "launch": f"{why_not_together or why_apart}: rounds of launches"}[grain]
    if requested != "auto" and grain != possible[0]:
        reason = f"asked for (--grain {grain}); {possible[0]} was possible"
    return grain, reason


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
        return (f"{self.counts_text()}, {len(self.skipped)} skipped (threshold {self.threshold:.0%}; "
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
        return out


class AbFolder(RunFolder):
    columns, sample_columns = AB_COLUMNS, AB_SAMPLE_COLUMNS


def _turn_order(round_no: int, pairs: int) -> list[tuple[str, int]]:
    """(side, pair) of each turn of a round: ABBA ABBA..., starting with B every other round."""
    out = []
    for k in range(pairs):
        first, second = ("A", "B") if (k + round_no) % 2 == 0 else ("B", "A")
        out += [(first, k), (second, k)]
    return out


class _Measure:
    """The comparison as it goes: its jobs, the folder, each point's pairs, the gate."""

    def __init__(self, a: AbSide, b: AbSide, folder: AbFolder, grain: str, launcher: str, launcher_args: list[str],
                 relay, on_event):
        self.sides = {"A": a, "B": b}
        self.folder, self.grain = folder, grain
        self.launcher, self.launcher_args = launcher, launcher_args
        self.relay, self.on_event = relay, on_event
        self.server = TurnServer(local=launch.ranks_here(launcher, launcher_args))
        self.jobs: dict[tuple[str, int], TurnJob] = {}  # (side, launch pair) -> the job serving it
        self.launch_pairs = 1  # pairs of jobs alive at once (the token grain: LAUNCH_PAIRS)
        self.active = 1  # the launch pair measuring this round
        self.facts: dict[str, dict] = {}

    # --- jobs -------------------------------------------------------------------------------------
    def start(self, sides: list[str], launch_pairs: int = 1) -> None:
        """Launch the jobs for these sides: one serving both (in-process), or one each, `launch_pairs`
        times over (all alive together, taking turns)."""
        groups = [sides] if self.grain == "in-process" else [[s] for s in sides]
        new = []
        for j in range(1, launch_pairs + 1):
            for group in groups:
                first = self.sides[group[0]]
                job = TurnJob("".join(group) + (str(j) if launch_pairs > 1 else ""),
                              {s: self.sides[s].spec for s in group}, self.launcher, self.launcher_args,
                              first.python, first.env, self.server, self.relay)
                new.append(job)
                self.jobs.update({(s, j): job for s in group})
        self.launch_pairs, self.active = launch_pairs, 1
        self.server.accept(new, time.monotonic() + STARTUP_TIMEOUT_S)
        for job in new:
            for side in job.sides:
                self.facts.setdefault(side, job.facts)

    def job(self, side: str) -> TurnJob:
        """The job serving `side` in the launch pair measuring now."""
        return self.jobs[side, self.active]

    def _unique(self) -> list[TurnJob]:
        return list({id(j): j for j in self.jobs.values()}.values())

    def stop(self) -> None:
        for job in self._unique():
            job.end()
        self.jobs.clear()

    def kill(self) -> None:
        for job in self._unique():
            job.kill()
        self.jobs.clear()

    # --- one point, one round -----------------------------------------------------------------------
    def _timeout(self, c: Compared) -> float:
        return max(s.spec.point_timeout(c.a.size if s.name == "A" else c.b.size) for s in self.sides.values())

    def _ask(self, side: str, c: Compared, command: dict, what: str) -> dict:
        return self.job(side).request(command, self._timeout(c), f"{c.title} ({what})")

    def point_round(self, c: Compared, round_no: int, sides: list[str], order: list[tuple[str, int]]) -> bool:
        """Prepare the point on these sides, take the turns, check it, write its rows; False when it
        cannot run (c.skip says why)."""
        index = {"A": c.a.index, "B": c.b.index}
        info: dict[str, dict] = {}
        for job in {id(self.job(s)): self.job(s) for s in sides}.values():  # a job with both: one command
            mine = [s for s in sides if self.job(s) is job]
            got = job.request({"cmd": "prepare", "points": {s: index[s] for s in mine}}, self._timeout(c),
                              f"{c.title} (prepare, side {'/'.join(mine)})")
            info.update(got.get("prepared", {}))
        skips = [f"side {s}: {info[s]['skip']}" for s in sides if "skip" in info.get(s, {})]
        if skips:
            c.skip, c.skipped_by = "; ".join(skips), tuple(s for s in sides if "skip" in info.get(s, {}))
            self._finish(c, sides)
            return False
        for s in sides:
            for note in info[s].get("notes", []):
                self.on_event({"event": "warning", "text": f"side {s}: {note}"})
        if c.batch is None and self.grain != "launch":
            c.batch = max(info[s]["batch"] for s in sides)
        turns: list[list] = []  # consecutive turns of one job go as one command
        for side, pair in order:
            batch = c.batch if self.grain != "launch" else info[side]["batch"]
            if turns and self.job(turns[-1][0][0]) is self.job(side):
                turns[-1].append((side, pair, batch))
            else:
                turns.append([(side, pair, batch)])
        got: dict[str, dict[int, list[float]]] = {s: {} for s in sides}
        for group in turns:
            fill = len(sides) > 1 and (c.a.dtype, c.a.op) != (c.b.dtype, c.b.op)  # one memory, two patterns
            answer = self._ask(group[0][0], c, {"cmd": "turns", "turns": [[s, b, SAMPLES_PER_TURN, fill]
                                                                          for s, _, b in group]},
                               f"turns, side {group[0][0]}")
            for (side, pair, _), samples in zip(group, answer["samples"], strict=True):
                got[side].setdefault(pair, []).extend(samples)
        wrong = self._finish(c, sides)
        for s in sides:
            self._record(c, s, round_no, info[s], got[s], wrong.get(s, 0))
        return True

    def _finish(self, c: Compared, sides: list[str]) -> dict:
        wrong = {}
        for job in {id(self.job(s)): self.job(s) for s in sides}.values():
            wrong.update(job.request({"cmd": "finish"}, self._timeout(c), f"{c.title} (check)").get("wrong", {}))
        return wrong

    def _record(self, c: Compared, side: str, round_no: int, info: dict, by_pair: dict[int, list[float]],
                wrong: int) -> None:
        point = c.a if side == "A" else c.b
        spec, facts = self.sides[side].spec, self.facts.get(side, {})
        samples_us = [t for pair in sorted(by_pair) for t in by_pair[pair]]
        tags = [{"side": side, "round": round_no, "pair": pair} for pair in sorted(by_pair) for _ in by_pair[pair]]
        for pair, values in by_pair.items():
            c.samples[side][(round_no, pair)] = values
        batch = c.batch or info["batch"]
        row = build_row(run_id=spec.run_id, label=spec.label, point=point.index, collective=point.collective,
                        backend=point.backend, algorithm=point.algorithm, device=spec.device, dtype=point.dtype,
                        op=point.op or "none", in_place=point.in_place, world_size=facts.get("world_size", spec.nprocs),
                        nodes=facts.get("nodes"), ranks_per_node=facts.get("ranks_per_node"),
                        size_bytes=info["size_bytes"], count=info["count"],
                        **summarize(np.asarray(samples_us) / 1e6), iterations=len(samples_us) * batch,
                        batch=batch, warmup=info["warmup"], timer=info["timer"], wrong=wrong,
                        side=side, round=round_no)
        with interrupts.deferred():
            self.folder.add(row, samples_us, tags)
        self.on_event({"event": "row", "row": row})

    # --- rounds -------------------------------------------------------------------------------------
    def round(self, round_no: int, todo: list[Compared]) -> None:
        if self.grain != "launch":
            self.active = (round_no - 1) % self.launch_pairs + 1
            self.folder.job = self.active  # rows and samples: which pair of launches measured them
            for c in todo:
                self.point_round(c, round_no, ["A", "B"], _turn_order(round_no, PAIRS_PER_ROUND))
            return
        plan_a = [c.a for c in todo]
        by_index = {c.a.index: c for c in todo}
        for b_no, block in enumerate(blocks(plan_a)):
            order = ["A", "B"] if (round_no + b_no) % 2 == 0 else ["B", "A"]
            for side in order:
                self.start([side])
                try:
                    for i in block:
                        self.point_round(by_index[i], round_no, [side], [(side, 0)] * PAIRS_PER_ROUND)
                finally:
                    self.stop()


def _arena(a: SweepSpec, b: SweepSpec, launcher: str, launcher_args: list[str], on_event) -> tuple[str, int] | None:
    """The arena both sides' buffers lie in (its file and stride), or None, said, where there can be none."""
    why = ("GPU buffers" if "cuda" in (a.device, b.device) else
           "the ranks are not all on this machine" if not launch.ranks_here(launcher, launcher_args) else None)
    if why is None:
        stride, nbytes = arena_layout(a, b)
        path = arena.create(a.run_id, nbytes)
        if path:
            return path, stride
        why = f"{nbytes / 1e9:.3g} GB do not fit in {arena.SHM_DIR}"
    on_event({"event": "warning", "text": f"each side's buffers are its own ({why}): where they lie can move a point "
                                          "by a few percent, which the pairs cannot cancel"})
    return None


def prepare_sides(a: AbSide, b: AbSide, out_dir: str | None) -> tuple[AbSide, AbSide]:
    """Both specs validated, one run id and folder for both (checked, nothing written)."""
    if a.spec.launcher == "none" or b.spec.launcher == "none":
        raise InputError("ab launches both sides itself: --launcher none cannot be used")
    a.spec.out_dir = out_dir or a.spec.out_dir
    a.spec = session.prepare(a.spec)
    b.spec.validate()
    session.check_runnable(b.spec)
    b.spec.run_id, b.spec.out_dir = a.spec.run_id, a.spec.out_dir
    for side in (a, b):
        bad = [k for k in side.env if not k or "=" in k or "\0" in k + side.env[k]]
        if bad:
            raise InputError(f"--env-{side.name.lower()}: {bad[0]!r} is not a variable name")
    return a, b


def run_ab(a: AbSide, b: AbSide, threshold: float = 0.05, budget_s: float = DEFAULT_BUDGET_S,
           max_rounds: int = DEFAULT_MAX_ROUNDS, min_rounds: int = 1, grain: str = "auto",
           launcher_args: list[str] | None = None, allow_missing: bool = False,
           out_dir: str | None = None, strict: bool = False, on_event: Callable[[dict], None] | None = None,
           relay: Callable[[launch.Line], None] | None = None, argv: list[str] | None = None) -> AbResult:
    """Compare side B against side A (module docstring). Raises InputError before anything starts,
    JobError when a job fails (the rows measured so far stay in the folder)."""
    on_event = on_event or (lambda e: None)
    relay = relay or relay_stderr
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
    versions = {s.name: check_python(s.python, f"--python-{s.name.lower()}") for s in (a, b)}
    for spec in (a.spec, b.spec):
        launch.check_local_ranks(spec, launcher, launcher_args)
    launch_pairs = min(LAUNCH_PAIRS, max_rounds) if chosen == "token" else 1
    folder = AbFolder(a.spec.out_dir)
    record = {"grain": chosen, "grain_reason": why, "launch_pairs": launch_pairs, "threshold": threshold,
              "budget_s": budget_s, "max_rounds": max_rounds, "min_rounds": min_rounds,
              "pairs_per_round": PAIRS_PER_ROUND, "samples_per_turn": SAMPLES_PER_TURN, "alpha": paired.ALPHA,
              "looks": list(paired.looks(max_rounds, max(min_rounds, launch_pairs))),
              "sides": {s.name: {"options": s.options, "env": s.env, "python": s.python,
                                 "commbench": versions[s.name]["commbench"], "commbench_path": versions[s.name]["path"],
                                 "spec": s.spec.__dict__} for s in (a, b)},
              "compared": [{"A": c.a.index, "B": c.b.index, "point": c.title} for c in compared]}
    folder.create({"kind": "ab", "run_id": a.spec.run_id, "label": a.spec.label, "start_time": runinfo.utc_now(),
                   "launcher": launcher, "launcher_args": launcher_args, **runinfo.parent_info(argv or sys.argv),
                   "spec": a.spec.__dict__, "ab": record, "status": "running"})
    on_event({"event": "ab", "grain": chosen, "why": why, "points": len(compared), "launcher": launcher})
    m = _Measure(a, b, folder, chosen, launcher, launcher_args, relay, on_event)
    memory = _arena(a.spec, b.spec, launcher, launcher_args, on_event)
    folder.update({"ab": dict(record, memory="arena" if memory else "each job its own buffers")})
    start = time.monotonic()
    try:
        if memory:
            m.server.arena = {"path": memory[0], "stride": memory[1]}
        rounds, gate, error = _rounds(m, compared, threshold, budget_s, max_rounds, max(min_rounds, launch_pairs),
                                      launch_pairs)
    finally:
        m.server.close()
        if memory:
            os.unlink(memory[0])
    seconds = time.monotonic() - start
    with interrupts.deferred():
        folder.update({"status": "failed" if error else "completed", "error": error, "end_time": runinfo.utc_now(),
                       "rounds": rounds, "seconds": round(seconds, 1), "samples_file": folder.finalize(),
                       "points_measured": folder.rows, "wrong_total": folder.wrong})
    if error:
        raise JobError(f"{error}; the rows measured are in {folder.dir}")
    measured = [c for c in compared if c.skip is None]
    if not measured:
        raise InputError(f"nothing measured: every point was skipped ({'; '.join(dict.fromkeys(c.skip for c in compared))})")
    if gate.open and rounds != max_rounds:  # the budget ended the rounds: one last look at what there is
        gate.look([c.blocks(launch_pairs) for c in measured], last=True)
    comparison = _comparison(a, b, compared, measured, gate, threshold, strict, chosen, rounds, seconds, m.facts)
    comparison.allow_missing = allow_missing
    comparison.missing = [dict(c.key, skipped_by=list(c.skipped_by)) for c in compared if len(c.skipped_by) == 1]
    write_text(folder.dir / AB_JSON, to_json(comparison) + "\n", AB_JSON)
    return AbResult(folder.dir, comparison, chosen, rounds, seconds, folder.wrong)


def _rounds(m: _Measure, compared: list[Compared], threshold: float, budget_s: float, max_rounds: int, first: int,
            launch_pairs: int) -> tuple[int, paired.Gate | None, str | None]:
    """Rounds until every point is settled, the last round, or the budget; (rounds, gate, the error
    that ended them or None). A signal kills the jobs and marks the folder interrupted."""
    start, rounds, last, gate = time.monotonic(), 0, 0.0, None
    measured: list[Compared] = []
    try:
        if m.grain != "launch":
            m.start(["A", "B"], launch_pairs)
            m.folder.update({**m.facts.get("A", {}), "sides_facts": m.facts})
        for r in range(1, max_rounds + 1):
            todo = [c for c in compared if c.skip is None and c.open]
            if not todo or (r > first and time.monotonic() - start + last > budget_s):
                break
            began = time.monotonic()
            m.round(r, todo)
            rounds, last = r, time.monotonic() - began
            if m.grain == "launch" and r == 1:
                m.folder.update({**m.facts.get("A", {}), "sides_facts": m.facts})
            if gate is None:  # the points that run here are known after the first round
                measured = [c for c in compared if c.skip is None]
                gate = paired.Gate(len(measured), threshold, max_rounds, first=first)
            if r in gate.looks:
                gate.look([c.blocks(launch_pairs) for c in measured], last=r == max_rounds)
                for c, v in zip(measured, gate.verdicts, strict=True):
                    c.open = not v.settled
            m.on_event({"event": "round", "round": r, "open": sum(c.open for c in measured),
                        "seconds": time.monotonic() - start})
        m.stop()
    except (KeyboardInterrupt, BrokenPipeError):
        with interrupts.deferred():
            m.kill()
            m.folder.update({"status": "interrupted", "end_time": runinfo.utc_now(), "rounds": rounds})
        raise
    except JobError as exc:
        m.kill()
        return rounds, gate, str(exc)
    return rounds, gate, None


def _comparison(a: AbSide, b: AbSide, compared: list[Compared], measured: list[Compared], gate, threshold: float,
                strict: bool, grain: str, rounds: int, seconds: float, facts: dict) -> AbComparison:
    from commbench.analysis import conditions

    metas = []
    for side in (a, b):
        meta = dict(facts.get(side.name, {}), environment=dict(runinfo.collective_env(), **side.env),
                    launcher=side.spec.launcher)
        if side.options:
            meta["versions"] = dict(meta.get("versions", {}), options=side.options)
        meta["versions"] = dict(meta.get("versions", {}), python_executable=side.python)
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
