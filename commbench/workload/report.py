"""A workload's figures: per entry and (backend, algorithm) the measured and predicted times, per
traffic kind the step's totals, and the files of OUT:

  mix.csv            one row per entry and (backend, algorithm): the Entry's fields, bytes per rank
                     per step, how it was measured here, and the times (ms per step = count x the
                     time per call): measured here, with --concurrent its groups at once, predicted
                     here, predicted at scale;
  workload.json      the config (or trace) echoed, the totals, which figure is measured where, the
                     model's source, commbench's version;
  param_trace.json   the mix as a PARAM basic trace (rank 0's; with --trace: the trace read).

Every figure that is missing says why (never a silent zero). Totals count the entries that have the
figure and name how many do not; `exposed` is a kind's total x (1 - its overlap fraction), and
with --compute-ms the communication share is exposed / (exposed + compute).
"""

from __future__ import annotations

import dataclasses
import json

from commbench.collectives import COLLECTIVES
from commbench.workload.measure import MAX_MEASURED_BYTES, human_size
from commbench.folder.workload_files import FORMAT, KINDS, MIX_CSV, WORKLOAD_JSON
from commbench.workload.mix import bytes_per_rank
from commbench.workload.param_trace import to_param, write_param_trace

FIGURES = {
    "measured": "measured on this machine: each entry at min(group size, -n) ranks, its size x --scale (rounded, "
                "capped: see marks), median time per call x count per step",
    "concurrent": "--concurrent: measured as `measured`, with every other group of its size that the ranks here "
                  "hold running the same call at once (--split; the slowest group's time): what sharing the links "
                  "costs; concurrent_split names the groups",
    "predicted_here": "the cost model at the ranks and size measured, on this machine's layout: the check of the model",
    "predicted": "the cost model at the entry's own group (nodes = ceil(group size / ranks per node)) and full size",
    "ranges": "a prediction's low and high: its 95 % interval from the fit's parameter covariance (delta method; "
              "the points' scatter about the model and the model's form not included; --intra/--inter exact); "
              "a total's: its entries' ends added (at least as wide as the sum's own interval)",
}
TIMES = ("measured", "concurrent", "predicted_here", "predicted")
RANGED = ("predicted_here", "predicted")  # the figures with a 95 % interval (low, high)


def entry_rows(c, measured: dict, predictor) -> list[dict]:
    rows = []
    for i, (entry, t) in enumerate(c.targets):
        for backend, algorithm in c.variants:
            row = dataclasses.asdict(entry) | {"bytes_per_rank_step": bytes_per_rank(entry), "backend": backend,
                                               "algorithm": algorithm, "measured_ranks": t.ranks,
                                               "measured_size_bytes": t.size_bytes, "measured_in_place": t.in_place,
                                               "marks": "; ".join(t.marks), "concurrent_split": t.concurrent,
                                               "concurrent_marks": "; ".join(t.concurrent_marks)}
            for what in ("measured", "concurrent"):
                us, why = measured[what][i, backend, algorithm]
                _put(row, what, us, why, entry.count)
            if t.ranks is None:
                why = t.why.replace("not measured: ", "nothing to predict here: ")
                if entry.collective not in COLLECTIVES:
                    why = predictor.seconds(backend, algorithm, entry.collective, "", 0, False)[1]
                _put(row, "predicted_here", None, why, entry.count, why)
            else:
                shape = predictor.here_shape(backend, algorithm, *_layout(t.ranks, c.request.fields))
                ask = (backend, algorithm, entry.collective, shape, t.size_bytes, t.in_place, False)
                s, why = predictor.seconds(*ask)
                _put(row, "predicted_here", None if s is None else s * 1e6, why, entry.count,
                     predictor.bounds(*ask) if s is not None else why)
            shape = predictor.scale_shape(backend, algorithm, entry.group_size, entry.ranks_per_node)
            ask = (backend, algorithm, entry.collective, shape, entry.size_bytes, t.in_place, True)
            s, why = predictor.seconds(*ask)
            _put(row, "predicted", None if s is None else s * 1e6, why, entry.count,
                 predictor.bounds(*ask) if s is not None else why)
            rows.append(row)
    return rows


def _layout(ranks: int, fields: dict) -> tuple[int, int]:
    """(nodes, ranks per node) of a run of `ranks` here: --ranks-per-node blocks, else one node."""
    per = fields.get("ranks_per_node")
    return (ranks // per, per) if per and ranks % per == 0 else (1, ranks)


def _put(row: dict, what: str, us: float | None, why: str, count: int, bounds: tuple | str | None = None) -> None:
    """The figure per call and per step, or why none; a prediction's 95 % interval per step
    (commbench.analysis.model.spread), or why none."""
    row[f"{what}_us"] = us
    row[f"{what}_step_ms"] = None if us is None else us * count / 1e3
    row[f"{what}_why"] = "" if us is not None else (why or "no figure")
    if what in RANGED:
        ok = isinstance(bounds, tuple)
        row[f"{what}_low_step_ms"], row[f"{what}_high_step_ms"] = (b * count * 1e3 for b in bounds) if ok else (None, None)
        row[f"{what}_range_why"] = "" if ok else (bounds or "no figure")


def totals(rows: list[dict], variants, overlap: dict, compute_ms: float | None) -> list[dict]:
    """Per (backend, algorithm): one row per kind present and one for "all"."""
    out = []
    for backend, algorithm in variants:
        mine = [r for r in rows if (r["backend"], r["algorithm"]) == (backend, algorithm)]
        kinds = [k for k in (*KINDS, *sorted({r["kind"] for r in mine} - set(KINDS))) if any(r["kind"] == k for r in mine)]
        per_kind = []
        for kind in kinds:
            of = [r for r in mine if r["kind"] == kind]
            t = {"backend": backend, "algorithm": algorithm, "kind": kind, "overlap": overlap.get(kind, 0.0),
                 "entries": len(of), "bytes_per_rank_step": sum(r["bytes_per_rank_step"] for r in of)}
            for what in TIMES:
                have = [r[f"{what}_step_ms"] for r in of if r[f"{what}_step_ms"] is not None]
                t[f"{what}_ms"] = sum(have) if have else None
                t[f"{what}_missing"] = len(of) - len(have)
                t[f"{what}_exposed_ms"] = None if not have else sum(have) * (1 - t["overlap"])
            t["concurrent_ratio"] = _at_once(of)
            for what in RANGED:  # the entries' ends added: a bound on the sum's interval (entries share parameters,
                # whose errors add at most: α's and β's partly cancel between small and large entries)
                ends = [(r[f"{what}_low_step_ms"], r[f"{what}_high_step_ms"]) for r in of if r[f"{what}_step_ms"] is not None]
                whole = bool(ends) and all(low is not None for low, _ in ends)
                for i, end in enumerate(("low", "high")):
                    t[f"{what}_{end}_ms"] = sum(e[i] for e in ends) if whole else None
                    t[f"{what}_{end}_exposed_ms"] = sum(e[i] for e in ends) * (1 - t["overlap"]) if whole else None
            per_kind.append(t)
        every = {"backend": backend, "algorithm": algorithm, "kind": "all", "overlap": None,
                 "entries": len(mine), "bytes_per_rank_step": sum(t["bytes_per_rank_step"] for t in per_kind)}
        for what in TIMES:
            have = [t for t in per_kind if t[f"{what}_ms"] is not None]
            every[f"{what}_ms"] = sum(t[f"{what}_ms"] for t in have) if have else None
            every[f"{what}_missing"] = sum(t[f"{what}_missing"] for t in per_kind)
            exposed = sum(t[f"{what}_exposed_ms"] for t in have) if have else None
            every[f"{what}_exposed_ms"] = exposed
            if compute_ms is not None:
                every[f"{what}_share"] = None if exposed is None else exposed / (exposed + compute_ms)
        every["concurrent_ratio"] = _at_once(mine)
        for what in RANGED:
            have = [t for t in per_kind if t[f"{what}_ms"] is not None]
            whole = bool(have) and all(t[f"{what}_low_ms"] is not None for t in have)
            for end in ("low", "high"):
                every[f"{what}_{end}_ms"] = sum(t[f"{what}_{end}_ms"] for t in have) if whole else None
                exposed = sum(t[f"{what}_{end}_exposed_ms"] for t in have) if whole else None
                every[f"{what}_{end}_exposed_ms"] = exposed
                if compute_ms is not None:
                    every[f"{what}_{end}_share"] = None if exposed is None else exposed / (exposed + compute_ms)
        out += per_kind + [every]
    return out


def _at_once(rows: list[dict]) -> float | None:
    """The entries' time with their groups at once over alone, both per step, over the entries
    that have both: what sharing the links costs (None where none has both)."""
    both = [r for r in rows if r["concurrent_step_ms"] is not None and r["measured_step_ms"] is not None]
    alone = sum(r["measured_step_ms"] for r in both)
    return sum(r["concurrent_step_ms"] for r in both) / alone if both and alone else None


def comparison(rows: list[dict], variants) -> list[dict]:
    """Measured against predicted here, per (backend, algorithm), over the entries that have both."""
    out = []
    for backend, algorithm in variants:
        both = [r for r in rows if (r["backend"], r["algorithm"]) == (backend, algorithm)
                and r["measured_step_ms"] is not None and r["predicted_here_step_ms"] is not None]
        if both:
            m, p = sum(r["measured_step_ms"] for r in both), sum(r["predicted_here_step_ms"] for r in both)
            out.append({"backend": backend, "algorithm": algorithm, "entries": len(both), "measured_ms": m,
                        "predicted_here_ms": p, "ratio": m / p if p else None})
    return out


def _json_safe(value):
    return json.loads(json.dumps(value, default=str))


def write(c, done) -> None:
    """mix.csv, workload.json and param_trace.json into OUT (and --param-out)."""
    import pandas as pd

    import commbench
    from commbench.folder.outputs import csv_text, write_text

    write_text(c.out / MIX_CSV, csv_text(pd.DataFrame(done.rows)), MIX_CSV)
    records = c.records if c.records is not None else to_param(c.entries, c.config)
    for path in (c.out / "param_trace.json", c.request.param_out):
        if path is not None:
            write_param_trace(records, path)
    r = c.request
    doc = {
        "commbench_workload": FORMAT, "commbench_version": commbench.__version__, "name": c.name,
        "source": {"config": str(r.source), "workload": _json_safe(dataclasses.asdict(c.config))} if c.config
        else {"trace": str(r.trace), "gpus_per_node": r.gpus_per_node},
        "figures": FIGURES,
        "measured": None if c.sweeps is None else {
            "folder": str(c.out / "measured"), "runs": sorted(c.sweeps.specs), "nprocs": c.nprocs, "scale": r.scale,
            "dtype": c.dtype, "max_measured_bytes": MAX_MEASURED_BYTES,
            "calibration_ladder": r.model is None, "wrong": done.wrong},
        "model": {"source": done.model.source, "groups": done.model.groups(), "error": done.model.error or None,
                  "links_given": {k: v for k, v in (("intra", r.intra), ("inter", r.inter)) if v is not None}},
        "compute_ms": r.compute_ms,
        "variants": [{"backend": b, "algorithm": a} for b, a in c.variants],
        "totals": done.totals, "measured_vs_predicted_here": done.comparison,
        "entries": len(c.entries), "command_line": r.argv,
    }
    write_text(c.out / WORKLOAD_JSON, json.dumps(_json_safe(doc), indent=2, allow_nan=False) + "\n", WORKLOAD_JSON)


# --- the tables (rich, on the error console) -----------------------------------------------------------

def _size(n) -> str:
    return "-" if n is None else human_size(n)


def _ms(value) -> str:
    return "-" if value is None else f"{value:.4g}"


class _Notes:
    """Footnotes: each distinct reason once, numbered."""

    def __init__(self):
        self.texts: dict[str, int] = {}

    def mark(self, text: str) -> str:
        return f"[{self.texts.setdefault(text, len(self.texts) + 1)}]" if text else ""

    def cell(self, row: dict, what: str) -> str:
        value = row[f"{what}_step_ms"]
        if value is None:
            return f"- {self.mark(row[f'{what}_why'])}"
        if what not in RANGED:
            return _ms(value)
        low, high = row[f"{what}_low_step_ms"], row[f"{what}_high_step_ms"]
        return f"{_ms(value)} {_range(low, high)}" if low is not None else f"{_ms(value)} {self.mark(row[f'{what}_range_why'])}"


def _range(low, high) -> str:
    """A 95 % interval as the table shows it."""
    return "" if low is None else f"({_ms(low)}-{_ms(high)})"


def render(console, c, done) -> None:
    """Per entry and per kind, for each (backend, algorithm), then the footnotes."""
    from commbench.presentation.terminal import Console
    from rich.markup import escape
    from rich.table import Table

    notes = _Notes()
    if not console.is_terminal:  # a file or a pipe: wide enough not to wrap a row
        console = Console(file=console.file, width=max(console.width, 150), highlight=False, soft_wrap=True)
    for backend, algorithm in c.variants:
        rows = [r for r in done.rows if (r["backend"], r["algorithm"]) == (backend, algorithm)]
        table = Table(title=f"{escape(c.name)}: one step, one rank; {backend} {algorithm} "
                            f"(ms per step = count x time per call)", title_justify="left")
        at_once = c.request.concurrent
        for head in ("kind", "collective", "group", "size", "/step", "GB/rank", "measured here", "measured",
                     *(("groups at once",) if at_once else ()), "model here", "model at scale"):
            table.add_column(head, justify="left" if head in ("kind", "collective", "measured here") else "right")
        for r in rows:
            here = "-" if r["measured_ranks"] is None else f"{r['measured_ranks']} x {_size(r['measured_size_bytes'])}"
            here += f" {notes.mark(r['marks'])}" if r["marks"] else ""
            once = (notes.cell(r, "concurrent") + (f" ({r['concurrent_split']})" if r["concurrent_split"] else "")
                     + (f" {notes.mark(r['concurrent_marks'])}" if r["concurrent_marks"] else ""),
                     ) if at_once else ()  # (a hidden column's reasons are no footnotes)
            table.add_row(r["kind"], r["collective"], f"{r['group_size']} ({r['ranks_per_node']}/node)",
                          _size(r["size_bytes"]), str(r["count"]), f"{r['bytes_per_rank_step'] / 1e9:.3g}",
                          escape(here), escape(notes.cell(r, "measured")), *map(escape, once),
                          escape(notes.cell(r, "predicted_here")), escape(notes.cell(r, "predicted")))
        console.print(table)
        kinds = Table(title=f"per kind, ms per step ({backend} {algorithm}); exposed = total x (1 - overlap)",
                      title_justify="left")
        for head in ("kind", "overlap", "GB/rank", "measured", *(("at once", "at once / alone") if at_once else ()),
                     "model here", "model at scale", "exposed at scale"):
            kinds.add_column(head, justify="left" if head == "kind" else "right")
        for t in (t for t in done.totals if (t["backend"], t["algorithm"]) == (backend, algorithm)):
            def total(what, t=t):
                missing = t[f"{what}_missing"]
                ranged = f" {_range(t[f'{what}_low_ms'], t[f'{what}_high_ms'])}" if what in RANGED and t[f"{what}_low_ms"] is not None else ""
                return _ms(t[f"{what}_ms"]) + ranged + (f" ({missing} of {t['entries']} missing)" if missing else "")
            kinds.add_row(t["kind"], "" if t["overlap"] is None else f"{t['overlap']:g}",
                          f"{t['bytes_per_rank_step'] / 1e9:.3g}", total("measured"),
                          *((total("concurrent"), "-" if t["concurrent_ratio"] is None else f"{t['concurrent_ratio']:.3f}")
                            if at_once else ()),
                          total("predicted_here"), total("predicted"), _ms(t["predicted_exposed_ms"]))
            if t["kind"] == "all" and c.request.compute_ms is not None:
                share, low, high = (t.get(f"predicted{end}_share") for end in ("", "_low", "_high"))
                kinds.caption = (f"with {c.request.compute_ms:g} ms of compute per step, communication exposed at "
                                 f"scale is {'-' if share is None else f'{100 * share:.1f} %'}"
                                 f"{'' if low is None else f' ({100 * low:.1f}-{100 * high:.1f} %)'} of the step")
        console.print(kinds)
    for m in done.comparison:
        if m["ratio"]:
            console.print(f"measured / model here ({m['backend']} {m['algorithm']}, {m['entries']} entries): "
                          f"{m['measured_ms']:.4g} / {m['predicted_here_ms']:.4g} ms per step = {m['ratio']:.3f}")
    if any(r.get(f"{what}_low_step_ms") is not None for r in done.rows for what in RANGED):
        console.print("(low-high): the model's 95 % interval from its fitted parameters' uncertainty "
                      "(not the points' scatter about it, nor the model's form)", highlight=False)
    for text, number in notes.texts.items():
        console.print(f"[{number}] {escape(text)}", highlight=False)
