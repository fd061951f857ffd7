"""`commbench workload` as a Python API: a step's mix (from a workload config, or a PARAM basic
trace) measured here (measure.py), predicted here and at scale (predict.py), written to OUT
(report.py). `check` validates everything and writes nothing; `run` measures, fits and writes.

    from commbench.workload.api import Request, check, run
    done = run(check(Request(source="llama7b_fsdp_64", fields={"nprocs": 4}, scale=1 / 64)))
    print(done.out, done.comparison)
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from commbench import options
from commbench.errors import InputError
from commbench.workload import measure, predict, report
from commbench.collectives.peer_traffic import check_spread
from commbench.workload.config import Router, WorkloadConfig, check_router, find_workload, load_workload
from commbench.workload.mix import Entry, derive
from commbench.workload.param_trace import check_size, from_param, read_param_trace

MAX_COMPUTE_MS = 1e9


@dataclass
class Request:
    source: str | None = None  # a workload config: a bundled name or a path
    trace: str | None = None  # or a PARAM basic trace
    gpus_per_node: int | None = None  # with a trace: its ranks per node (else the trace's own)
    fields: dict = field(default_factory=dict)  # `commbench run`'s options, by name (commbench.options)
    backend_given: bool = False  # --backend was given (else: the model file's backend, with --no-measure)
    measure: bool = True
    scale: float = 1.0
    model: str | None = None
    compute_ms: float | None = None
    intra: str | None = None
    inter: str | None = None
    out: str | None = None
    param_out: str | None = None
    argv: list[str] | None = None
    spread: float | None = None  # the router's imbalance (the config's router.spread otherwise)
    concurrent: bool = False  # also measure every group of a kind at once


@dataclass
class Checked:
    """A request with everything decided and validated; nothing written yet."""

    request: Request
    name: str
    config: WorkloadConfig | None
    entries: list[Entry]
    records: list | None  # the trace read (--trace)
    dtype: str
    nprocs: int
    targets: list[tuple[Entry, measure.Target]]
    variants: list[tuple[str, str]]  # (backend, algorithm)
    out: Path
    model: predict.Model | None  # from --model
    links: dict
    segment: int
    sweeps: measure.Sweeps | None


def _entries(r: Request):
    if (r.source is None) == (r.trace is None):
        raise InputError("give a workload CONFIG (a file, or a bundled name: --list shows them) or --trace FILE, "
                         "not both" if r.source and r.trace else
                         "give a workload CONFIG (a file, or a bundled name: --list shows them) or --trace FILE")
    if r.trace is None:
        if r.gpus_per_node is not None:
            raise InputError("--gpus-per-node is for --trace; a workload config says it in parallel.gpus_per_node")
        config = load_workload(r.source)
        if r.spread is not None:
            check_router(config.model, config.parallel, "--spread")
            config = dataclasses.replace(config, router=Router(check_spread(r.spread)))
        return config.name, config, derive(config), None
    if r.spread is not None:
        raise InputError("--spread is for a workload config with experts: a trace's all-to-alls are as it recorded them")
    if r.gpus_per_node is not None and r.gpus_per_node < 1:
        raise InputError(f"invalid --gpus-per-node {r.gpus_per_node}: at least 1")
    records = read_param_trace(r.trace)
    try:
        entries = from_param(records, r.gpus_per_node)
    except InputError as exc:
        raise InputError(f"{r.trace}: {exc}") from None
    if not entries:
        raise InputError(f"{r.trace}: the trace holds no communication")
    return Path(r.trace).stem[:64] or "trace", None, entries, records


def _out(r: Request, name: str) -> Path:
    from commbench.folder.outputs import output_folder
    from commbench.folder import lock as folder_lock
    from commbench.folder.place import check_place, default_folder

    out = Path(r.out or default_folder(name))
    output_folder(out, "--out", probe=False)
    check_place(out, sweep=True, probe=False)
    if out.is_dir():
        folder_lock.check_free(out)  # another workload's, being written
    if out.is_dir() and any(out.iterdir()):
        raise InputError(f"--out {str(out)!r} is not empty: a workload is written into a new (or empty) folder")
    return out


def _backends(fields: dict) -> list[str]:
    """--backend's names, auto resolved as a run resolves it."""
    from commbench.spec import resolve_names, split_list

    return resolve_names("backend", [options.default_backend() if b.lower() == "auto" else b
                                     for b in split_list(fields.get("backend") or "auto")], options.BACKENDS)


def _algorithms(r: Request) -> list[str]:
    """-a as given (the workload's default: ring)."""
    from commbench.algorithms import ALGORITHMS
    from commbench.library_calls import LIBRARY_CALLS
    from commbench.spec import resolve_names

    return resolve_names("algorithm", r.fields.get("algorithm") or "ring", (*LIBRARY_CALLS, *ALGORITHMS))


def _variants(r: Request, sweeps: measure.Sweeps | None, model: predict.Model | None) -> list[tuple[str, str]]:
    if sweeps and sweeps.specs:
        spec = next(iter(sweeps.specs.values()))
        return [(b, a) for b in spec.backends for a in spec.algorithms]
    algorithms = _algorithms(r)
    backends = list(model.fits) if model is not None and not r.backend_given else _backends(r.fields)
    return [(b, a) for b in backends for a in algorithms]


def _stride(config: WorkloadConfig | None, entry: Entry) -> int:
    """How far apart the job's groups of this entry hold their ranks (1: consecutive, as tensor
    parallelism's). A trace's groups are taken as consecutive."""
    from commbench.workload.mix import GROUPS, group_ranks

    if config is None or entry.group not in GROUPS:
        return 1
    ranks = group_ranks(config, entry.group)  # pp: the stages, of which send_recv's pair is two neighbours
    return ranks[1] - ranks[0] if len(ranks) > 1 else 1


def check(r: Request) -> Checked:
    """Every input validated (the config or trace, the options, the sweeps, --model, the outputs)
    before anything runs or is written; InputError otherwise."""
    from commbench.folder.outputs import output_file
    from commbench.spec import parse_size

    name, config, entries, records = _entries(r)
    if records is None:  # the trace OUT gets is written after the sweeps: its size is checked now
        check_size(entries)
    scale = measure.check_scale(r.scale)
    if r.compute_ms is not None and not (math.isfinite(r.compute_ms) and 0 < r.compute_ms <= MAX_COMPUTE_MS):
        raise InputError(f"invalid --compute-ms {r.compute_ms}: a step's compute time in milliseconds, above 0")
    links = predict.links_of(r.intra, r.inter)
    fields = dict(r.fields)
    dtype = measure.dtype_of(fields)
    nprocs = fields.get("nprocs")
    if nprocs is None:
        defaults = options.spec_arguments({"launcher": fields.get("launcher") or "auto"})
        nprocs = defaults.get("nprocs") or options.DEFAULT_NPROCS
    if nprocs < 1:
        raise InputError(f"invalid number of processes {nprocs}: it must be at least 1")
    fields["nprocs"] = nprocs
    forced = None
    if measure.mode_given(fields):
        mode = options.cli_fields({k: v for k, v in fields.items() if k in options.BY_NAME})["mode"]
        forced = {"in-place": True, "out-of-place": False}.get(mode)  # both: each entry's own
    algorithms = tuple(_algorithms(r))
    targets = [(e, measure.target(e, nprocs, scale, dtype, forced, algorithms)) for e in entries]
    if r.concurrent:
        if not r.measure:
            raise InputError("--concurrent measures groups at once: it needs --measure")
        targets = [(e, measure.at_once(t, nprocs, _stride(config, e), fields.get("ranks_per_node")))
                   for e, t in targets]
    out = _out(r, name)
    if r.param_out is not None:  # never one of the command's own inputs (it would overwrite it)
        given = [p for p in (r.trace, r.model) if p] + ([find_workload(r.source)] if r.source else [])
        output_file(r.param_out, "--param-out", inputs=given)
    if not r.measure and r.model is None:
        raise InputError("--no-measure needs --model FILE (a model from `commbench model fit`): nothing is measured "
                         "to fit one from")
    sweeps = None
    if r.measure:
        runs = measure.plan(targets, dtype, calibrate=r.model is None)
        in_place = None if measure.mode_given(fields) else measure.NATURAL_IN_PLACE
        sweeps = measure.specs(runs, fields, out, name, in_place)
    model = None
    if r.model is not None:
        backends = None  # the file's one backend
        if sweeps is not None and sweeps.specs:
            backends = next(iter(sweeps.specs.values())).backends
        elif r.backend_given or r.measure:
            backends = _backends(fields)
        model = predict.from_file(r.model, backends)
    segment = parse_size(fields.get("segment_bytes") or options.BY_NAME["segment_bytes"].default)
    return Checked(r, name, config, entries, records, dtype, nprocs, targets, _variants(r, sweeps, model), out,
                   model, links, segment, sweeps)


@dataclass
class Done:
    out: Path
    rows: list[dict]  # one per entry and (backend, algorithm): report.entry_rows
    totals: list[dict]  # per (backend, algorithm) and kind, and "all": report.totals
    model: predict.Model
    wrong: int = 0
    comparison: list[dict] = field(default_factory=list)  # measured / predicted here per variant


def run(c: Checked, on_run: Callable | None = None, on_event: Callable | None = None) -> Done:
    """Measure (unless --no-measure), fit or load the model, predict, write OUT (holding its lock:
    one writer per folder); the outcome."""
    from commbench.folder import lock as folder_lock

    c.out.mkdir(parents=True, exist_ok=True)
    lock = folder_lock.acquire(c.out)
    try:
        return _run(c, on_run, on_event)
    finally:
        folder_lock.release(lock)


def _run(c: Checked, on_run: Callable | None, on_event: Callable | None) -> Done:
    rows, wrong = None, 0
    if c.sweeps is not None and c.sweeps.specs:
        from commbench.analysis.model import load_rows

        results = measure.measure(c.sweeps, on_run, on_event, c.request.argv or sys.argv)
        wrong = sum(res.wrong for res in results)
        rows = load_rows([str(c.out / measure.MEASURED)])
    if c.model is not None:
        model = c.model
    elif rows is not None:
        model = predict.fitted(rows, [str(c.out / measure.MEASURED)])
    else:
        model = predict.Model(error="no model: nothing was measured to fit one from (give --model FILE)")
    import pandas as pd

    frame = rows if rows is not None else pd.DataFrame()
    skipped = c.sweeps.skipped if c.sweeps else {}
    refused = c.sweeps.refused if c.sweeps else {}
    measured = {what: measure.measured_times(frame, c.targets, c.variants, skipped, what == "concurrent", refused)
                for what in ("measured", "concurrent")}
    if c.sweeps is None:  # what could not be measured anyway says why
        measured = {what: {k: (None, c.targets[k[0]][1].why or "not measured: --no-measure") for k in times}
                    for what, times in measured.items()}
    predictor = predict.Predictor(model, c.links, c.segment)
    entry_rows = report.entry_rows(c, measured, predictor)
    overlap = c.config.overlap.__dict__ if c.config else {}
    totals = report.totals(entry_rows, c.variants, overlap, c.request.compute_ms)
    done = Done(c.out, entry_rows, totals, model, wrong, report.comparison(entry_rows, c.variants))
    report.write(c, done)
    return done
