"""`commbench ab`'s two sides (commbench.run.ab): what each measures and where, their points paired,
the one memory both sides' buffers share, and the finest grain their difference allows (GRAINS)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from commbench.analysis import paired
from commbench.backends import emulated_launcher
from commbench.collectives import COLLECTIVES
from commbench.dtypes import DTYPES
from commbench.errors import InputError
from commbench.plan import Point, build_plan
from commbench.rank import arena
from commbench.run import launch, session
from commbench.spec import CLUSTER, SweepSpec

GRAINS = ("in-process", "token", "launch")  # finest first
# token grain: pairs of jobs (A1 B1, A2 B2, ...) alive together, rounds rotating through them; a verdict
# must hold in each (commbench.analysis.paired: a launch's luck in where its library's buffers lie)
LAUNCH_PAIRS = 3
# spec fields that shape a job: sides that differ in one of them cannot share a process
JOB_FIELDS = ("nprocs", "launcher", "device", "ranks_per_node", "oversubscribe")
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
            counts = COLLECTIVES[p.collective].counts_for(p.size, itemsize, spec.nprocs, spec.peer_traffic())
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
    if launcher == "srun":
        why_not_together = "two job steps may not fit in the Slurm allocation at once"
    elif launcher == "emulated":
        why_not_together = "an emulated cluster holds one job at a time (its nodes' addresses and ports are the job's)"
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


def prepare_sides(a: AbSide, b: AbSide, out_dir: str | None) -> tuple[AbSide, AbSide]:
    """Both specs validated, one run id and folder for both (checked, nothing written)."""
    if a.spec.launcher == "none" or b.spec.launcher == "none":
        raise InputError("ab launches both sides itself: --launcher none cannot be used")
    if any(getattr(a.spec, k) != getattr(b.spec, k) for k in CLUSTER):  # one cluster holds both sides' ranks
        raise InputError("both sides run on one emulated cluster: give --emulate, --link-rate and --placement once, "
                         "for both")
    if a.spec.emulate and emulated_launcher(a.spec.backends) != emulated_launcher(b.spec.backends):
        raise InputError("on an emulated cluster both sides need one launcher: MPI (mpirun) and gloo (torchrun) "
                         "go in comparisons of their own")
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
