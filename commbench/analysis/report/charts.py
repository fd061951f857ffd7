"""The report's charts (plotly figures), built from the rows of every run.

One line per series (commbench.analysis.report.series), in the same colour and dash in every
chart; a point with wrong elements is a red cross on its line. An axis is logarithmic where its
values span a decade (series.log_scale); sizes are on a log axis marked with the sizes measured.
A figure's title and its note (what the chart shows, what its bars are) travel in its layout
(title, meta.note) for the page to set above the chart, clear of plotly's toolbar.

Every string that reaches a chart (run labels, names) is escaped first (page.esc): plotly renders
a subset of HTML in labels, and the report must never render what a result file smuggles in.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from commbench.analysis.report.page import esc, unreliable
from commbench.analysis.report.series import SERIES, WRONG_COLOUR, Series, decades, key_of, log_scale
from commbench.spec import format_size

TEMPLATE = go.layout.Template(layout=pio.templates["plotly_white"].layout)  # its trace defaults: 4 KB a chart
MAX_TICKS = 12  # size labels on the x axis; past that, every other one (and so on)
BARS = ("bars: smallest to 95th-percentile sample (a sample is the time per call of a batch of calls, the "
        "slowest rank's); none where a run recorded no spread (imports)")


def median_job(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per point of a run: of a point measured by several jobs (--repeat), the job whose
    time is the median (the lower middle one of an even count), so a chart's time and bandwidth
    come from one job; it carries the most wrong elements any job of the point had. A point is
    one of a folder's run (two copies of a folder share their run id but are two runs)."""
    if "job" not in rows or rows.job.nunique() <= 1:
        return rows
    r = rows.sort_values("time_us", kind="stable").copy()
    groups = r.groupby([c for c in ("folder", "run", "run_id") if c in r] + ["point"], sort=False)
    r["wrong"] = groups.wrong.transform(lambda w: pd.to_numeric(w, errors="coerce").max())
    return r[groups.cumcount() == (groups.time_us.transform("size") - 1) // 2].sort_index()


def _figure(title: str, ytitle: str, values, sizes, note: str = "") -> go.Figure:
    logy = log_scale(values)
    fig = go.Figure()
    fig.update_layout(title=esc(title), meta={"note": note}, template=TEMPLATE, height=520,
                      xaxis_title="size (bytes)", yaxis_title=ytitle + (", log scale" if logy else ""),
                      legend={"font": {"size": 11}, "orientation": "h", "y": -0.2, "yanchor": "top"},
                      margin={"l": 64, "r": 16, "t": 36, "b": 40})
    ticks = sorted({int(s) for s in sizes})
    ticks = ticks[::-(-len(ticks) // MAX_TICKS)] if ticks else ticks
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=[format_size(s) for s in ticks])
    if logy:
        ticks = log_ticks(values)
        fig.update_yaxes(type="log", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])
    return fig


def log_ticks(values) -> list[float]:
    """Where a log axis is labelled: 1, 2 and 5 of each decade the values reach (over 4 decades: 1 only)."""
    v = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(float)
    v = v[np.isfinite(v) & (v > 0)]
    steps = (1, 2, 5) if decades(v) <= 4 else (1,)
    low, high = int(np.floor(np.log10(v.min()))), int(np.ceil(np.log10(v.max())))
    return [t for e in range(low, high + 1) for m in steps if (t := float(f"{m}e{e}")) <= 10.0**high]


def _lines(rows: pd.DataFrame, series: Series):
    """(key, rows by size) per series of the rows, in the report's series order."""
    groups = {key_of(k): g.sort_values("size_bytes") for k, g in rows.groupby(SERIES, sort=False)}
    return [(k, groups[k]) for k in series.keys if k in groups]


def _marker(g: pd.DataFrame, colour: str) -> dict:
    """A point's marker: a red cross where its results were wrong, a hollow circle where its time is flagged
    unreliable, else a small dot in its series' colour."""
    wrong = pd.to_numeric(g.wrong, errors="coerce").fillna(0) > 0
    flagged = unreliable(g)
    if not wrong.any() and not flagged.any():
        return {"color": colour}
    return {"color": [WRONG_COLOUR if w else colour for w in wrong],
            "symbol": ["x" if w else "circle-open" if u else "circle" for w, u in zip(wrong, flagged, strict=True)],
            "size": [11 if w else 10 if u else 6 for w, u in zip(wrong, flagged, strict=True)]}


def size_charts(rows: pd.DataFrame, collective: str, series: Series | None = None) -> list[go.Figure]:
    """busbw vs size and latency vs size, one line per series (the report's, else the rows')."""
    series = series or Series(rows)
    sub = rows[rows.collective == collective]
    bw = _figure(f"{collective}: bus bandwidth", "busbw (GB/s)", sub.busbw_gbps, sub.size_bytes,
                 "at each size's median time (nccl-tests' busbw); red cross: wrong results; hollow circle: unreliable")
    spread = pd.concat([sub.time_us, sub.time_us_min, sub.time_us_p95])
    lat = _figure(f"{collective}: latency", "time per call (µs)", spread, sub.size_bytes,
                  f"median time per call; {BARS}; hollow circle: unreliable (see the points' unreliable column)")
    for key, g in _lines(sub, series):
        name, line = series.name(key), series.line(key)
        marker = _marker(g, line["color"])
        bw.add_trace(go.Scatter(x=g.size_bytes, y=g.busbw_gbps, mode="lines+markers", name=name, line=line,
                                marker=marker, hovertemplate="%{x} B: %{y:.3g} GB/s"))
        bars = g.time_us_p95.notna().all() and g.time_us_min.notna().all()
        lat.add_trace(go.Scatter(
            x=g.size_bytes, y=g.time_us, mode="lines+markers", name=name, line=line, marker=marker,
            error_y={"type": "data", "symmetric": False, "thickness": 1.2,
                     "array": (g.time_us_p95 - g.time_us).clip(lower=0),
                     "arrayminus": (g.time_us - g.time_us_min).clip(lower=0)} if bars else None,
            customdata=list(zip(g.time_us_min, g.time_us_p95, strict=True)) if bars else None,
            hovertemplate="%{x} B: %{y:.3g} µs" + (" (min %{customdata[0]:.3g}, p95 %{customdata[1]:.3g})"
                                                   if bars else "")))
    return [bw, lat]


def speedup_chart(rows: pd.DataFrame, collective: str, reference: str, title: str,
                  only: list[str] | None = None, series: Series | None = None,
                  note: str = "") -> go.Figure | None:
    """time(reference) / time(algorithm) per size, within each run/backend/dtype/op/mode/world;
    each line in its algorithm's series style. None when no algorithm has a size in common with
    the reference."""
    series = series or Series(rows)
    sub = rows[rows.collective == collective]
    group_cols = [c for c in SERIES if c != "algorithm"]
    traces = []
    for key, g in sub.groupby(group_cols, sort=True):
        ref = g[g.algorithm == reference].set_index("size_bytes").time_us
        if ref.empty:
            continue
        for algo, a in g[g.algorithm != reference].groupby("algorithm"):
            if only and algo not in only:
                continue
            a = a.set_index("size_bytes").time_us
            common = ref.index.intersection(a.index).sort_values()
            if common.empty:
                continue
            run, backend, dtype, op, mode, world = key
            skey = key_of((run, backend, algo, dtype, op, mode, world))
            traces.append((series.keys.index(skey), common, list(ref[common] / a[common]), skey))
    if not traces:
        return None
    speedups = [y for t in traces for y in t[2]]
    fig = _figure(f"{collective}: {title}", "speedup (×, > 1 is faster)", speedups + [1.0],
                  [s for t in traces for s in t[1]], note or f"time of {reference} / time of the algorithm, "
                                                                "at the sizes both measured")
    for _, common, ratio, skey in sorted(traces, key=lambda t: t[0]):
        fig.add_trace(go.Scatter(x=list(common), y=ratio, mode="lines+markers", line=series.line(skey),
                                 name=series.name(skey, versus=reference), hovertemplate="%{x} B: %{y:.3g}×"))
    fig.add_hline(y=1.0, line_dash="dot", line_color="gray")
    return fig


def multi_node(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of runs over more than one node (the only ones a topology-aware algorithm changes)."""
    if "nodes" not in rows:
        return rows.iloc[:0]
    return rows[pd.to_numeric(rows.nodes, errors="coerce") > 1]


POWER_SOURCES = (("GPU", "power_w_avg", "energy_j_per_byte"), ("CPU", "cpu_power_w_avg", "cpu_energy_j_per_byte"))


def power_charts(rows: pd.DataFrame, collective: str, series: Series | None = None) -> list[go.Figure]:
    """Average power and energy per byte moved, where the rows carry them (--power runs): the GPUs'
    (NVML) and the CPUs' (RAPL, dotted where a run has both), each series named for its source
    where a run has both. None without a reading."""
    series = series or Series(rows)
    sources = [s for s in POWER_SOURCES if s[1] in rows and rows[s[1]].notna().any()]
    sub = rows[rows.collective == collective]
    sources = [s for s in sources if sub[s[1]].notna().any()]
    if not sources:
        return []
    watts = pd.concat([sub[w] for _, w, _ in sources])
    per_byte = pd.concat([sub[e] for _, _, e in sources if e in sub] or [pd.Series(dtype=float)])
    power = _figure(f"{collective}: average power", "power (W)", watts, sub.size_bytes,
                    "average over the point's timed calls")
    energy = _figure(f"{collective}: energy per byte", "energy (J/byte)", per_byte, sub.size_bytes,
                     "energy over the timed calls / bytes moved")
    for kind, w, e in sources:
        measured = sub[sub[w].notna()]
        for key, g in _lines(measured, series):
            name = series.name(key) + (f" · {kind}" if len(sources) > 1 else "")
            line = {**series.line(key), **({"dash": "dot"} if kind == "CPU" and len(sources) > 1 else {})}
            power.add_trace(go.Scatter(x=g.size_bytes, y=g[w], mode="lines+markers", name=name, line=line))
            if e in g:
                energy.add_trace(go.Scatter(x=g.size_bytes, y=g[e], mode="lines+markers", name=name, line=line))
    return [power, energy]
