"""The report's charts (plotly figures), built from the rows of every run.

Every string that reaches a chart (run labels, names) is escaped first (page.esc): plotly renders
a subset of HTML in labels, and the report must never render what a result file smuggles in.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from commbench.analysis.report.page import esc

PALETTE = qualitative.Plotly  # plotly's own colours, in its order

SERIES = ["run", "backend", "algorithm", "dtype", "op", "mode", "world_size"]


def median_job(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per point of a run: of a point measured by several jobs (--repeat), the job whose
    time is the median (the lower middle one of an even count), so a chart's time and bandwidth
    come from one job; it carries the most wrong elements any job of the point had."""
    if "job" not in rows or rows.job.nunique() <= 1:
        return rows
    r = rows.sort_values("time_us", kind="stable").copy()
    groups = r.groupby(["run_id", "point"], sort=False)
    r["wrong"] = groups.wrong.transform(lambda w: pd.to_numeric(w, errors="coerce").max())
    return r[groups.cumcount() == (groups.time_us.transform("size") - 1) // 2].sort_index()


def _series_name(key: tuple) -> str:
    run, backend, algo, dtype, op, mode, world = key
    op = "" if op in ("none", None) else f" {op}"
    return esc(f"{run} · {backend} {algo} · {dtype}{op} · {mode} · {world} ranks")


def _figure(title: str, ytitle: str, logy: bool) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=esc(title), xaxis_title="size (bytes)", yaxis_title=ytitle, template="plotly_white",
                      height=560, legend={"font": {"size": 10}, "orientation": "h", "y": -0.22, "yanchor": "top"},
                      margin={"l": 60, "r": 20, "t": 50, "b": 40})
    fig.update_xaxes(type="log")
    if logy:
        fig.update_yaxes(type="log")
    return fig


def size_charts(rows: pd.DataFrame, collective: str) -> list[go.Figure]:
    """busbw vs size and latency vs size (log-log), one line per run/backend/algorithm/..."""
    sub = rows[rows.collective == collective]
    bw = _figure(f"{collective}: bus bandwidth", "busbw (GB/s)", False)
    lat = _figure(f"{collective}: latency (median)", "time (µs)", True)
    for i, (key, g) in enumerate(sub.sort_values("size_bytes").groupby(SERIES, sort=True)):
        name = _series_name(key)
        wrong = g.wrong.fillna(0).astype(float) > 0
        own = PALETTE[i % len(PALETTE)]  # a series with wrong points names its own colour for the others
        marker = {"color": ["red" if w else own for w in wrong]} if wrong.any() else {}
        bw.add_trace(go.Scatter(x=g.size_bytes, y=g.busbw_gbps, mode="lines+markers", name=name, marker=marker))
        lat.add_trace(go.Scatter(x=g.size_bytes, y=g.time_us, mode="lines+markers", name=name, marker=marker,
                                 error_y={"type": "data", "symmetric": False,
                                          "array": (g.time_us_p95 - g.time_us).clip(lower=0),
                                          "arrayminus": (g.time_us - g.time_us_min).clip(lower=0)}
                                 if g.time_us_p95.notna().all() and g.time_us_min.notna().all() else None))
    return [bw, lat]


def speedup_chart(rows: pd.DataFrame, collective: str, reference: str, title: str,
                  only: list[str] | None = None) -> go.Figure | None:
    """time(reference) / time(algorithm) per size, within each run/backend/dtype/op/mode/world."""
    sub = rows[rows.collective == collective]
    group_cols = ["run", "backend", "dtype", "op", "mode", "world_size"]
    fig = _figure(f"{collective}: {title}", "speedup (×, > 1 is faster)", False)
    added = False
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
            fig.add_trace(go.Scatter(x=list(common), y=list(ref[common] / a[common]), mode="lines+markers",
                                     name=_series_name((run, backend, f"{algo} vs {reference}", dtype, op, mode, world))))
            added = True
    if not added:
        return None
    fig.add_hline(y=1.0, line_dash="dot", line_color="gray")
    return fig


POWER_SOURCES = (("GPU", "power_w_avg", "energy_j_per_byte"), ("CPU", "cpu_power_w_avg", "cpu_energy_j_per_byte"))


def power_charts(rows: pd.DataFrame, collective: str) -> list[go.Figure]:
    """Average power and energy per byte moved, where the rows carry them (--power runs): the GPUs'
    (NVML) and the CPUs' (RAPL), each series named for its source where a run has both."""
    sources = [s for s in POWER_SOURCES if s[1] in rows and rows[s[1]].notna().any()]
    sub = rows[rows.collective == collective]
    if not sources or not any(sub[w].notna().any() for _, w, _ in sources):
        return []
    power = _figure(f"{collective}: average power", "power (W)", False)
    energy = _figure(f"{collective}: energy per byte", "energy (J/byte)", True)
    for kind, watts, per_byte in sources:
        measured = sub[sub[watts].notna()]
        for key, g in measured.sort_values("size_bytes").groupby(SERIES, sort=True):
            name = _series_name(key) + (f" · {kind}" if len(sources) > 1 else "")
            power.add_trace(go.Scatter(x=g.size_bytes, y=g[watts], mode="lines+markers", name=name))
            if per_byte in g:
                energy.add_trace(go.Scatter(x=g.size_bytes, y=g[per_byte], mode="lines+markers", name=name))
    return [power, energy]
