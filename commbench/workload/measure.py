"""A step's mix measured on this machine: one real commbench sweep (commbench.run.api) per
collective and group size, into OUT/measured/<collective>-<ranks>/ (a sweep folder that report,
compare and `model fit` read), and each entry's time per call read back from the rows.

What is measured for an entry of G ranks and S bytes (nccl-tests' size_bytes):
  * ranks: min(G, -n); a group larger than the ranks here is measured on the ranks here (the same
    message size on fewer ranks), and marked so;
  * size: S x --scale, rounded to whole elements of --dtype for every rank (at least one each),
    at most MAX_MEASURED_BYTES (larger ones are measured at that size, and marked so); an uneven
    all-to-all (all_to_allv) with the entry's spread, its row read at the size the spread's blocks
    add up to (each is rounded down to 16 B);
  * buffers: the way training issues the call (NATURAL_IN_PLACE) unless a buffer switch is given;
  * with --concurrent, a second time with every group of its kind that fits in -n running it at
    once (`--split`: consecutive groups where the job's are, as tensor parallelism's, else strided),
    into OUT/measured/<collective>-<ranks>-at-once-<split>/: what sharing the links costs.
Where the cost model is fitted from this run, every sweep also measures a ladder of sizes from one
element per rank to 8x its largest entry, x2 apart: the entries' few sizes alone cannot tell α
from β from γ, nor where the working set outgrows the cache (commbench.analysis.model.fit leaves
them undetermined, and the predictions that depend on them out; with x4 apart this machine's
cache size was still undetermined). The model fits neither the uneven all-to-all nor groups at
once, so their sweeps measure the entries' sizes alone.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from commbench import options
from commbench.split import parse as parse_split
from commbench.dtypes import DTYPES
from commbench.errors import InputError
from commbench.collectives import COLLECTIVES
from commbench.collectives.peer_traffic import DEFAULT_SPREAD, PeerTraffic
from commbench.spec import SweepSpec, split_list
from commbench.workload.mix import Entry

MAX_MEASURED_BYTES = 256 << 20  # the largest message measured here (nccl-tests' size_bytes): 256 MiB
MEASURED = "measured"  # OUT/measured/: the sweeps' run folders
LADDER_STEP, LADDER_REACH = 2, 8  # the calibration ladder: x2 apart, up to 8x the largest entry
# DDP all-reduces its gradient buckets in place; FSDP's all_gather_into_tensor and reduce_scatter_tensor
# (and ZeRO's) write into another tensor
NATURAL_IN_PLACE = {"all_reduce": True, "all_gather": False, "reduce_scatter": False}


@dataclass(frozen=True)
class Target:
    """How one entry is measured here: on `ranks` ranks at `size_bytes` (None: not measured, `why`)."""

    ranks: int | None = None
    size_bytes: int | None = None  # as its rows record it
    in_place: bool = False
    why: str = ""  # why not measured
    marks: tuple[str, ...] = ()  # how the measured call differs from the entry's
    asked_bytes: int | None = None  # the size its sweep asks for, where the rows record another (all_to_allv)
    concurrent: str = ""  # --concurrent: the --split its groups run at once, as given (tp=G or dp=G) ...
    concurrent_as: str = ""  # ... and as its rows record it (commbench.split's canonical text)
    concurrent_why: str = ""  # why it is not measured so
    concurrent_marks: tuple[str, ...] = ()  # how the groups at once differ from the job's, or from the one alone

    @property
    def sweep_bytes(self) -> int | None:
        return self.size_bytes if self.asked_bytes is None else self.asked_bytes


@dataclass(frozen=True)
class Run:
    """One sweep of the workload: a collective on groups of `ranks` (with `split`, several at once)."""

    collective: str
    ranks: int
    split: str = ""
    spread: float | None = None

    @property
    def label(self) -> str:
        return run_label(self.collective, self.ranks, self.split)


def human_size(n: float) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{int(n)} B"


def run_label(collective: str, ranks: int, split: str = "") -> str:
    return f"{collective}-{ranks}" + (f"-at-once-{split.replace('=', '')}" if split else "")


def check_scale(scale: float) -> float:
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and 0 < scale <= 1e6):
        raise InputError(f"invalid --scale {scale}: a factor above 0 (and at most 1e6) that multiplies every "
                         "message size")
    return float(scale)


def target(entry: Entry, nprocs: int, scale: float, dtype: str, in_place: bool | None = None,
           algorithms: tuple[str, ...] = ("native",)) -> Target:
    """How `entry` is measured with `nprocs` ranks here (in_place None: as training issues it), by
    `algorithms` (-a): not at all where none of them runs its collective."""
    from commbench.algorithms import ALGORITHMS
    from commbench.library_calls import LIBRARY_CALLS

    c = entry.collective
    if c not in COLLECTIVES:
        return Target(why=f"not measured: commbench has no {c} yet")
    if not any(a in LIBRARY_CALLS or c in ALGORITHMS[a].collectives for a in algorithms):
        return Target(why=f"not measured: {' / '.join(algorithms)} has no {c} (-a native measures the library's call)")
    ranks = min(entry.group_size, nprocs)
    if ranks < 2:
        return Target(why=f"not measured: {ranks} rank here communicates nothing (-n 2 or more)")
    item = DTYPES[dtype].itemsize
    unit = item * (ranks if COLLECTIVES[c].counts(item, item, ranks).size_bytes == 0 else 1)  # whole elements, every rank
    wanted = entry.size_bytes * scale
    size = max(unit, round(wanted / unit) * unit)
    marks = []
    if size > MAX_MEASURED_BYTES:
        size = MAX_MEASURED_BYTES // unit * unit
        marks.append(f"capped at {human_size(size)} (of {human_size(wanted)})")
    if ranks < entry.group_size:
        marks.append(f"{ranks} of its {entry.group_size} ranks")
    mode = NATURAL_IN_PLACE.get(c, False) if in_place is None else in_place
    if mode and not COLLECTIVES[c].in_place_form:
        mode = False
        marks.append("out of place (it has no in-place form)")
    recorded = None
    if COLLECTIVES[c].takes_traffic:
        traffic = PeerTraffic(spread=DEFAULT_SPREAD if entry.spread is None else entry.spread)
        recorded = COLLECTIVES[c].counts_for(size, item, ranks, traffic).size_bytes
        if recorded < item:
            return Target(why=f"not measured: at {human_size(size)} on {ranks} ranks its blocks round down to nothing "
                               "(a larger --scale)")
    return Target(ranks, size if recorded is None else recorded, mode, "", tuple(marks),
                  None if recorded in (None, size) else size)


def at_once(target: Target, nprocs: int, stride: int, per_node: int | None = None) -> Target:
    """`target` with its --concurrent measurement: every group of its size that -n holds running it at
    once, consecutive ranks where the job's groups are (stride 1), else strided; or why not. Marked
    where the groups here are laid out otherwise than the job's, or where the first group spans other
    nodes than the one-group run (--ranks-per-node), which the ratio at once / alone then includes."""
    if target.ranks is None:
        return target
    groups, odd = divmod(nprocs, target.ranks)
    if groups < 2 or odd:
        why = (f"not measured at once: {nprocs} ranks here hold no second group of {target.ranks}" if groups < 2 else
               f"not measured at once: groups of {target.ranks} do not divide the {nprocs} ranks here")
        return dataclasses.replace(target, concurrent_why=why)
    given = f"{'tp' if stride == 1 else 'dp'}={target.ranks}"
    here = 1 if stride == 1 else groups  # dp=G: G ranks n/G apart
    marks = [] if here == stride else [f"strided by {here} here (by {stride} in the job)"]
    if per_node:
        alone = {r // per_node for r in range(target.ranks)}
        first = {r * here // per_node for r in range(target.ranks)}
        if len(first) != len(alone):
            marks.append(f"its group spans {len(first)} node(s) at once, {len(alone)} alone")
    return dataclasses.replace(target, concurrent=given, concurrent_as=parse_split(given, nprocs).text,
                               concurrent_marks=tuple(marks))


def ladder(collective: str, ranks: int, dtype: str, largest: int) -> list[int]:
    """Calibration sizes: one element per rank, then x LADDER_STEP, up to LADDER_REACH x `largest`
    (at most MAX_MEASURED_BYTES): past the entries, so that the fit sees where the working set
    leaves the cache, which the entries' sizes may straddle."""
    item = DTYPES[dtype].itemsize
    unit = item * (ranks if COLLECTIVES[collective].counts(item, item, ranks).size_bytes == 0 else 1)
    top = min(MAX_MEASURED_BYTES, LADDER_REACH * largest)
    out, size = [], unit
    while size <= top:
        out.append(size)
        size *= LADDER_STEP
    return out


def plan(targets: list[tuple[Entry, Target]], dtype: str, calibrate: bool) -> dict[Run, list[int]]:
    """Every sweep -> the sizes it measures, ascending: each (collective, ranks) alone, and with
    --concurrent at once."""
    runs: dict[Run, set[int]] = {}
    for entry, t in targets:
        if t.ranks is not None:
            for split in ("", t.concurrent) if t.concurrent else ("",):
                runs.setdefault(Run(entry.collective, t.ranks, split, entry.spread), set()).add(t.sweep_bytes)
    if calibrate:
        for run, sizes in runs.items():
            if not run.split and not COLLECTIVES[run.collective].takes_traffic:  # (what the model fits)
                sizes.update(ladder(run.collective, run.ranks, dtype, max(sizes)))
    order = sorted(runs, key=lambda r: (r.collective, r.ranks, r.split))
    return {run: sorted(runs[run]) for run in order}


@dataclass
class Sweeps:
    """The sweeps of one workload, validated (nothing written yet): label -> spec."""

    out: Path
    specs: dict[str, SweepSpec] = field(default_factory=dict)
    launcher_args: list[str] = field(default_factory=list)
    skipped: dict[str, list[dict]] = field(default_factory=dict)  # label -> the sweep's skipped points
    refused: dict[str, str] = field(default_factory=dict)  # label -> why a sweep of groups at once cannot run


def mode_given(fields: dict) -> bool:
    """Did the command line choose a buffer mode (--in-place, --out-of-place, --both)?"""
    return any(fields.get(o.name) for o in options.MODE_SWITCHES)


def specs(runs: dict[Run, list[int]], fields: dict, out: Path, name: str,
          in_place: dict[str, bool] | None) -> Sweeps:
    """One validated SweepSpec per run, from `commbench run`'s option fields (option name -> value,
    as the CLI parsed them) with the run's collective, sizes, ranks and folder; in_place: the
    buffer mode per collective (None: the options' own). Every run checked before any starts."""
    from commbench.run import launch
    from commbench.run.api import prepare

    base = options.cli_fields({k: v for k, v in fields.items() if k in options.BY_NAME})
    launcher_args = options.launcher_argv(base.pop("launcher_args", ""))
    if base.get("launcher") == "none":
        raise InputError("--launcher none: a workload launches one job per group size; let commbench launch them")
    sweeps = Sweeps(out, launcher_args=launcher_args)
    nprocs = base.get("nprocs")
    for run, sizes in runs.items():
        collective, ranks, label = run.collective, run.ranks, run.label
        f = dict(base, collective=collective, sizes=",".join(map(str, sizes)), nprocs=nprocs if run.split else ranks,
                 out=str(out / MEASURED / label), label=base.get("label") or f"{name} {label}",
                 split=run.split or None, spread=run.spread)
        if in_place is not None:
            f["mode"] = "in-place" if in_place.get(collective, False) else "out-of-place"
        if not COLLECTIVES[collective].in_place_form:  # whatever buffer switch was given (target() marks it)
            f["mode"] = "out-of-place"
        try:
            spec = SweepSpec.from_options(**options.spec_arguments(f))
            if len(spec.dtypes) != 1:
                raise InputError(f"-d/--dtype: one dtype (the entries' bytes are measured as it), not "
                                 f"{', '.join(spec.dtypes)}")
            check = prepare(SweepSpec.from_json(spec.to_json()))
            launcher = launch.resolve_launcher(check)
            if launcher in ("mpirun", "srun") and launch.find_binary(launcher) is None:
                raise InputError(f"it needs {launcher!r}, which is not installed")
            launch.check_local_ranks(check, launcher, launcher_args)
        except InputError as exc:
            if run.split:  # the entry's figure alone stands; the one at once says why it is missing
                sweeps.refused[label] = f"not measured at once: {exc}"
                continue
            raise InputError(f"measuring {collective} on {ranks} ranks: {exc}") from None
        spec.run_id = ""
        sweeps.specs[label] = spec
    return sweeps


def dtype_of(fields: dict) -> str:
    """The one dtype the entries are measured as (-d; its name resolved as run resolves it)."""
    from commbench.dtypes import DTYPE_ALIASES
    from commbench.spec import resolve_names

    names = resolve_names("dtype", split_list(fields.get("dtype") or options.BY_NAME["dtype"].default), DTYPES,
                          DTYPE_ALIASES)
    if len(names) != 1:
        raise InputError(f"-d/--dtype: one dtype (the entries' bytes are measured as it), not {', '.join(names)}")
    return names[0]


def measure(sweeps: Sweeps, on_run: Callable[[str, SweepSpec], None] | None = None,
            on_event: Callable[[dict], None] | None = None, argv: list[str] | None = None) -> list:
    """Run every sweep, one after another (commbench.run.api.run_sweep); their RunResults."""
    from commbench.run.api import run_sweep

    results = []
    for label, spec in sweeps.specs.items():
        if on_run:
            on_run(label, spec)
        result = run_sweep(spec, launcher_args=sweeps.launcher_args, on_event=on_event, argv=argv)
        sweeps.skipped[label] = result.skipped
        results.append(result)
    return results


def measured_times(rows, targets: list[tuple[Entry, Target]], variants: list[tuple[str, str]],
                   skipped: dict[str, list[dict]], at_once: bool = False, refused: dict[str, str] | None = None
                   ) -> dict[tuple[int, str, str], tuple[float | None, str]]:
    """(entry index, backend, algorithm) -> (median µs per call, "") or (None, why), from the
    measured rows (commbench.analysis.model.load_rows): the entry's own buffer mode where measured,
    else the other. at_once: the figure of its groups at once (--concurrent), else of one alone;
    refused: the sweeps of groups at once that could not run, and why (Sweeps.refused)."""
    out = {}
    ok = rows[rows.wrong == 0] if len(rows) else rows
    if len(ok):
        splits = ok.split.fillna("").astype(str) if "split" in ok else None
    for i, (entry, t) in enumerate(targets):
        split, recorded = (t.concurrent, t.concurrent_as) if at_once else ("", "")
        for backend, algorithm in variants:
            if t.ranks is None or (at_once and not split):
                out[i, backend, algorithm] = (None, t.why or t.concurrent_why or "not measured at once: --concurrent "
                                                                                  "not given")
                continue
            label = run_label(entry.collective, t.ranks, split)
            if label in (refused or {}):
                out[i, backend, algorithm] = (None, refused[label])
                continue
            pick = ok[(ok.collective == entry.collective) & (ok.world_size == t.ranks) & (ok.size_bytes == t.size_bytes)
                      & (ok.backend == backend) & (ok.algorithm == algorithm)
                      & ((splits == recorded) if splits is not None else not split)] if len(ok) else ok
            if len(pick):
                same = pick[pick.in_place.astype(bool) == t.in_place]
                out[i, backend, algorithm] = (float((same if len(same) else pick).time_us.iloc[0]), "")
                continue
            reasons = [s.get("reason", "") for s in skipped.get(label, [])
                       if s.get("backend") == backend and s.get("algorithm") == algorithm
                       and s.get("size") == t.sweep_bytes]
            wrong = len(rows) and ((rows.collective == entry.collective) & (rows.world_size == t.ranks)
                                   & (rows.wrong != 0)).any()
            out[i, backend, algorithm] = (None, f"not measured: skipped ({reasons[0]})" if reasons else
                                          "not measured: wrong results" if wrong else "not measured: no row")
    return out
