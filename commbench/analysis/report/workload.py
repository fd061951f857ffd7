"""The report's section for a `commbench workload` OUT folder (workload.json and mix.csv; its measured/
runs are read as any others): per backend/algorithm, a bar per figure (measured here, with --concurrent
its groups at once, model here, model at scale, exposed at scale) stacked by kind of traffic (dp, tp, pp, ep: one colour each, always), in
ms per step of one rank, and the per-kind totals as a table. workload.json is read as run.json is: a
regular file inside the folder, within COMMBENCH_MAX_WORKLOAD_JSON_MB before it is parsed, every field
used checked; anything else is one InputError."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import plotly.graph_objects as go

from commbench.folder import limits
from commbench.folder.files import read_bytes, read_file, regular_file
from commbench.analysis.report.charts import TEMPLATE
from commbench.analysis.report.page import chart, esc, section
from commbench.errors import InputError
from commbench.folder.workload_files import FORMAT, KINDS, MIX_CSV, WORKLOAD_JSON

FIGURES = (("measured_ms", "measured here", "measured_missing"), ("predicted_here_ms", "model here",
           "predicted_here_missing"), ("predicted_ms", "model at scale", "predicted_missing"),
           ("predicted_exposed_ms", "exposed at scale", "predicted_missing"))  # (field, name, entries without it)
AT_ONCE = ("concurrent_ms", "groups at once", "concurrent_missing")  # --concurrent's, after "measured here"
ENDS = {"predicted_here_ms": ("predicted_here_low_ms", "predicted_here_high_ms"),  # a figure's 95 % interval
        "predicted_ms": ("predicted_low_ms", "predicted_high_ms"),
        "predicted_exposed_ms": ("predicted_low_exposed_ms", "predicted_high_exposed_ms")}
COLOURS = dict(zip(KINDS, ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"), strict=True))  # "other" (a trace's): grey
NOTE = ("ms per step of one rank, stacked by kind of traffic; exposed = model at scale x (1 - the kind's overlap); "
        "a total counts the entries that have the figure (the table says how many do not); the whiskers (and the "
        "table's brackets): the model's 95 % interval from its fitted parameters' uncertainty")


def split(paths) -> tuple[list[tuple[Path, dict]], list]:
    """(workload folders with their workload.json, the paths holding runs): a workload folder's runs
    are its measured/ sweeps, none with --no-measure."""
    workloads, runs = [], []
    for path in paths:
        p = Path(path)
        if (is_workload := p.is_dir() and os.path.lexists(p / WORKLOAD_JSON)):
            workloads.append((p, read_workload(p)))
        if not is_workload or os.path.lexists(p / "measured"):
            runs.append(path)
    return workloads, runs


def _bad(d, where: str, must: str, value) -> InputError:
    return InputError(f"{d}: {WORKLOAD_JSON} {where} must be {must}, not {json.dumps(value)[:40]}")


def _number(d, where, value, none=True, low=0.0, high=math.inf):
    ok = (none and value is None) or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                      and math.isfinite(value) and low <= value <= high)
    if not ok:
        raise _bad(d, where, f"a number from {low:g} to {high:g}" + (" or null" if none else ""), value)
    return value


def _text(d, where, value) -> str:
    if isinstance(value, str) and value:
        return value
    raise _bad(d, where, "a non-empty string", value)


def read_workload(d) -> dict:
    """workload.json, checked: its format, name, variants and per-kind totals (mix.csv must be there)."""
    d = Path(d)
    regular_file(d, MIX_CSV)
    data = read_bytes(d, WORKLOAD_JSON, limits.WORKLOAD_JSON_BYTES)
    doc = read_file(d, WORKLOAD_JSON, lambda: json.loads(data, parse_constant=lambda c: c))  # NaN: refused below
    if not isinstance(doc, dict):
        raise InputError(f"{d}: {WORKLOAD_JSON} is not a JSON object")
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{d}: {WORKLOAD_JSON} holds text that is not Unicode (a lone surrogate escape)") from None
    version = doc.get("commbench_workload")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= FORMAT:
        raise _bad(d, "field 'commbench_workload'", f"a format this commbench reads (1 to {FORMAT})", version)
    _text(d, "field 'name'", doc.get("name"))
    _number(d, "field 'compute_ms'", doc.get("compute_ms"))
    variants, totals = doc.get("variants"), doc.get("totals")
    for field, value in (("variants", variants), ("totals", totals)):
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise _bad(d, f"field {field!r}", "a list of JSON objects", value)
    pairs = [tuple(_text(d, f"variants[{i}].{k}", v.get(k)) for k in ("backend", "algorithm"))
             for i, v in enumerate(variants)]
    for i, t in enumerate(totals):
        at = f"totals[{i}]"
        backend, algorithm, _ = (_text(d, f"{at}.{k}", t.get(k)) for k in ("backend", "algorithm", "kind"))
        if (backend, algorithm) not in pairs:
            raise InputError(f"{d}: {WORKLOAD_JSON} {at} is of a backend/algorithm not in 'variants'")
        for key in ("bytes_per_rank_step", "entries", *(missing for _, _, missing in FIGURES)):
            _number(d, f"{at}.{key}", t.get(key), none=False)
        for key in ("overlap", "predicted_share", *(key for key, _, _ in FIGURES), *(k for e in ENDS.values() for k in e),
                    *AT_ONCE[::2], "concurrent_ratio"):  # (--concurrent's: absent from a folder written before it)
            _number(d, f"{at}.{key}", t.get(key), high=1.0 if key in ("overlap", "predicted_share") else math.inf)
    return doc


def figures(doc: dict) -> tuple[tuple[str, str, str], ...]:
    """The figures shown: --concurrent's groups at once beside the measured, where the folder has them."""
    if any(t.get(AT_ONCE[0]) is not None for t in doc["totals"]):
        return FIGURES[:1] + (AT_ONCE,) + FIGURES[1:]
    return FIGURES


def _variant(t: dict) -> str:
    return f"{t['backend']} {t['algorithm']}"


def figure(doc: dict) -> go.Figure:
    shown_figures = figures(doc)
    variants = list(dict.fromkeys(_variant(t) for t in doc["totals"]))
    shown = [esc(f) if len(variants) == 1 else f"{esc(v)}<br>{esc(f)}" for v in variants for _, f, _ in shown_figures]
    kinds = list(dict.fromkeys(t["kind"] for t in doc["totals"] if t["kind"] != "all"))
    fig = go.Figure()
    fig.update_layout(title=esc(f"{doc['name']}: ms per step by kind"), meta={"note": NOTE}, template=TEMPLATE,
                      height=460, barmode="stack", yaxis_title="ms per step",
                      legend={"orientation": "h", "traceorder": "normal"}, margin={"l": 64, "r": 16, "t": 36})
    for kind in kinds:
        of = {_variant(t): t for t in doc["totals"] if t["kind"] == kind}
        y = [(of.get(v) or {}).get(key) for v in variants for key, _, _ in shown_figures]
        fig.add_trace(go.Bar(x=shown, y=y, name=esc(kind), marker_color=COLOURS.get(kind, "#7f7f7f"),
                             hovertemplate="%{x}: %{y:.4g} ms<extra>" + esc(kind) + "</extra>"))
    every = {_variant(t): t for t in doc["totals"] if t["kind"] == "all"}
    y, up, down = [], [], []  # the stack's total with its interval, where it has one
    for v in variants:
        t = every.get(v) or {}
        for key, _, _ in shown_figures:
            low, high = (t.get(e) for e in ENDS.get(key, ("", "")))
            ok = None not in (low, high, t.get(key))
            y.append(t[key] if ok else None)
            up.append(high - t[key] if ok else None)
            down.append(t[key] - low if ok else None)
    if any(v is not None for v in y):
        fig.add_trace(go.Scatter(x=shown, y=y, mode="markers", name="95 % interval", marker={"color": "#000000", "size": 1},
                                 error_y={"type": "data", "symmetric": False, "color": "#000000", "array": up,
                                          "arrayminus": down},
                                 hovertemplate="%{x}: 95 % interval around %{y:.4g} ms<extra></extra>"))
    return fig


def table(doc: dict) -> str:
    shown = figures(doc)
    head = "".join(f"<th>{h}</th>" for h in ("backend", "algorithm", "kind", "overlap", "entries", "GB/rank",
                                              *(name for _, name, _ in shown)))
    rows = []
    for t in doc["totals"]:
        cells = [esc(t["backend"]), esc(t["algorithm"]), esc(t["kind"]),
                 "" if t.get("overlap") is None else f"{t['overlap']:g}", f"{t['entries']:g}",
                 f"{t['bytes_per_rank_step'] / 1e9:.3g}"]
        for key, _, missing in shown:
            low, high = (t.get(e) for e in ENDS.get(key, ("", "")))
            ratio = t.get("concurrent_ratio") if key == AT_ONCE[0] else None
            cells.append(("-" if t.get(key) is None else f"{t[key]:.4g}")
                         + ("" if low is None or high is None else f" [{low:.4g}-{high:.4g}]")
                         + ("" if ratio is None else f" ({ratio:.3f} x alone)")
                         + (f" ({t[missing]:g} of {t['entries']:g} missing)" if t.get(missing) else ""))
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f'<table class="workload"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def sections(workloads: list[tuple[Path, dict]]) -> list[tuple[str, str]]:
    """One "Workload: <name>" section per workload folder (a name seen before gets its folder too)."""
    out, seen = [], set()
    for d, doc in workloads:
        heading = f"Workload: {doc['name']}" + (f" ({d})" if doc["name"] in seen else "")
        seen.add(doc["name"])
        shares = [f"{100 * t['predicted_share']:.1f} % ({esc(_variant(t))})" for t in doc["totals"]
                  if t["kind"] == "all" and t.get("predicted_share") is not None]
        share = (f"; with {doc['compute_ms']:g} ms of compute per step, communication exposed at scale is "
                 + ", ".join(shares) + " of the step") if shares and doc.get("compute_ms") is not None else ""
        runs = "; its measured runs are in the collectives' sections" if os.path.lexists(d / "measured") else ""
        body = (f'<p class="muted">{esc(d)}: one optimizer step of one rank{runs}{share}</p>'
                f'<div class="charts">{chart(figure(doc))}</div>{table(doc)}')
        out.append(section(heading, body))
    return out
