"""The report's summary: one line per run and collective, the figures a reader looks for first.

* peak busbw: the highest bus bandwidth of any of the run's series, with its size and algorithm;
* latency at the smallest size: the lowest median time at the smallest size the run measured;
* best algorithm per size band: at each size, the algorithm of the lowest median time (of any
  dtype, op and mode); per band, the one fastest at the most of the band's sizes, "native / ring"
  when they tie, with how many sizes it won;
* correctness: wrong elements summed over every row (every job of a --repeat) and the points
  with any, of all points.

Times and bandwidths are the charts' (each point's median job, charts.median_job).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from commbench.analysis.report.page import esc
from commbench.collectives import COLLECTIVES
from commbench.spec import format_size

BANDS = ((0, 64 << 10, "< 64K"), (64 << 10, 8 << 20, "64K – 8M"), (8 << 20, np.inf, "≥ 8M"))
KEY = ["run", "collective"]


def _algorithms(rows: pd.DataFrame) -> pd.Series:
    """The algorithm of each row, with its backend where the run used more than one."""
    several = rows.groupby("run").backend.transform("nunique") > 1
    return rows.algorithm.astype(str).where(~several, rows.backend.astype(str) + " " + rows.algorithm.astype(str))


def _best(g: pd.DataFrame, low: float, high: float) -> str:
    band = g[(g.size_bytes >= low) & (g.size_bytes < high)]
    if band.empty:
        return ""
    winners = band.loc[band.groupby("size_bytes").time_us.idxmin(), "algo"]
    wins = winners.value_counts()
    top = sorted(wins[wins == wins.max()].index)
    return f"{' / '.join(top)} ({wins.max()}/{band.size_bytes.nunique()}{' each' if len(top) > 1 else ''})"


def summarize(chart_rows: pd.DataFrame, all_rows: pd.DataFrame) -> pd.DataFrame:
    """One row per run and collective (the figures of the module's doc), by run, then collective."""
    rows = chart_rows.assign(algo=_algorithms(chart_rows))
    wrong = all_rows.assign(w=pd.to_numeric(all_rows.wrong, errors="coerce").fillna(0))
    per_point = wrong.groupby(KEY + ["point"]).w.agg(["sum", "max"])  # a point: every job's rows of it
    correctness = per_point.groupby(level=KEY).agg(wrong=("sum", "sum"), bad_points=("max", lambda m: (m > 0).sum()),
                                                   points=("sum", "size"))
    out = []
    for (run, collective), g in rows.groupby(KEY, sort=True):
        peak = g.loc[g.busbw_gbps.idxmax()] if g.busbw_gbps.notna().any() else None
        smallest = g[g.size_bytes == g.size_bytes.min()]
        fastest = smallest.loc[smallest.time_us.idxmin()]
        c = correctness.loc[(run, collective)]
        out.append({"run": run, "collective": collective,
                    "ranks": ", ".join(str(int(w)) for w in sorted(g.world_size.dropna().unique())),
                    "peak_busbw": np.nan if peak is None else float(peak.busbw_gbps),
                    "peak_size": None if peak is None else int(peak.size_bytes),
                    "peak_algorithm": None if peak is None else peak.algo,
                    "small_size": int(fastest.size_bytes), "small_time_us": float(fastest.time_us),
                    "small_algorithm": fastest.algo,
                    **{f"best {label}": _best(g, low, high) for low, high, label in BANDS},
                    "wrong": int(c.wrong), "bad_points": int(c.bad_points), "points": int(c.points)})
    order = {c: i for i, c in enumerate(COLLECTIVES)}  # within a run: the registry's order, all_reduce first
    return pd.DataFrame(out).sort_values(["run", "collective"], key=lambda col: col.map(order) if col.name ==
                                         "collective" else col, kind="stable", ignore_index=True)


def summary_table(summary: pd.DataFrame) -> str:
    """The summary as an HTML table; a band no run measured has no column."""
    bands = [f"best {label}" for _, _, label in BANDS if summary[f"best {label}"].ne("").any()]
    head = ["run", "collective", "ranks", "peak busbw (GB/s)", "latency at the smallest size"]
    head += [f"fastest {b[5:]}" for b in bands] + ["wrong elements / points with errors"]
    body = []
    for r in summary.to_dict("records"):
        peak = ("–" if pd.isna(r["peak_busbw"]) else
                f"{r['peak_busbw']:.3g} <span class=\"muted\">at {format_size(r['peak_size'])}, "
                f"{esc(r['peak_algorithm'])}</span>")
        small = (f"{r['small_time_us']:.3g} µs <span class=\"muted\">at {format_size(r['small_size'])}, "
                 f"{esc(r['small_algorithm'])}</span>")
        state = "bad" if r["wrong"] or r["bad_points"] else "ok"
        cells = [esc(r["run"]), esc(r["collective"]), esc(r["ranks"]), peak, small]
        cells += [esc(r[b]) or "–" for b in bands]
        cells.append(f'<span class="{state}">{r["wrong"]} / {r["bad_points"]}</span> '
                     f'<span class="muted">of {r["points"]} points</span>')
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    heads = "".join(f"<th>{esc(h)}</th>" for h in head)
    return f'<table class="summary"><thead><tr>{heads}</tr></thead><tbody>{"".join(body)}</tbody></table>'
