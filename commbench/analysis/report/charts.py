"""The report's charts (plotly figures), built from the rows of every run.

Every string that reaches a chart (run labels, names) is escaped first (page.esc): plotly renders
a subset of HTML in labels, and the report must never render what a result file smuggles in.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from commbench.analysis.report.page import esc

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
    for key, g in sub.sort_values("size_bytes").groupby(SERIES, sort=True):
        name = _series_name(key)
        wrong = g.wrong.fillna(0).astype(float) > 0
        marker = {"color": ["red" if w else None for w in wrong]} if wrong.any() else {}
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


def power_charts(rows: pd.DataFrame, collective: str) -> list[go.Figure]:
    """Average power and energy per byte moved, where the rows carry them (--power runs)."""
    if "power_w_avg" not in rows or rows.power_w_avg.isna().all():
        return []
    sub = rows[(rows.collective == collective) & rows.power_w_avg.notna()]
    if sub.empty:
        return []
    power = _figure(f"{collective}: average power", "power (W)", False)
    energy = _figure(f"{collective}: energy per byte", "energy (J/byte)", True)
    for key, g in sub.sort_values("size_bytes").groupby(SERIES, sort=True):
        power.add_trace(go.Scatter(x=g.size_bytes, y=g.power_w_avg, mode="lines+markers", name=_series_name(key)))
        if "energy_j_per_byte" in g:
            energy.add_trace(go.Scatter(x=g.size_bytes, y=g.energy_j_per_byte, mode="lines+markers", name=_series_name(key)))
    return [power, energy]
