"""`commbench report`: one self-contained, offline HTML page for one or more result folders.

The page, top to bottom: a table of contents; the summary (per run and collective: peak busbw,
latency at the smallest size, the fastest algorithm per size band, correctness); a section per
collective with its charts (bandwidth and latency always; speedup over native where a run measured
native and another algorithm; topology-aware over the flat ring only for runs over several nodes;
power only where it was measured); every point; every run's environment. A series (a run ×
backend × algorithm × dtype × op × mode × ranks) keeps one name and one colour on every chart;
runs sharing a label are told apart by their folders (commbench.folder.load.run_names). A
`commbench workload` OUT folder adds its "Workload: <name>" section after the summary
(commbench.analysis.report.workload); its measured/ runs are read as any others. A `commbench check`
folder adds its verdicts and node x node link grid, runs with per-rank samples a "Stragglers" section
(commbench.analysis.report.health), after the summary.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from commbench import runinfo
from commbench.folder.load import load_runs, run_names
from commbench.analysis.report import charts, health, workload
from commbench.analysis.report.page import (chart, document, environment_table, esc, plotly_js, points_table, section,
                                            toc, unreliable, write_page)
from commbench.analysis.report.series import Series
from commbench.analysis.report.summary import summarize, summary_table
from commbench.analysis.topology_comparison import TOPOLOGY_AWARE
from commbench.folder.outputs import output_file
from commbench.collectives import COLLECTIVES

__all__ = ["build_report"]


def _figures(rows: pd.DataFrame, collective: str, series: Series) -> list:
    figures = charts.size_charts(rows, collective, series)
    figures.append(charts.speedup_chart(rows, collective, "native", "each algorithm vs native", series=series))
    figures.append(charts.speedup_chart(charts.multi_node(rows), collective, "ring",
                                        "topology-aware vs flat ring (rank order)", only=list(TOPOLOGY_AWARE),
                                        series=series, note="runs over several nodes: time of the flat ring in "
                                                            "rank order / time of the topology-aware algorithm"))
    return [f for f in figures if f is not None] + charts.power_charts(rows, collective, series)


def _correctness(rows: pd.DataFrame) -> str:
    """The summary's headline, as the terminal says it: "all 36 points correct (every job checked: 108
    measurements)", or how many are not; and how many were flagged unreliable, with the background load
    the busiest run saw (a point measured on a busy machine is correct but its time is not to be trusted)."""
    wrong = pd.to_numeric(rows.wrong, errors="coerce").fillna(0) > 0
    grouped = rows.assign(bad=wrong, flagged=unreliable(rows)).groupby(["folder", "run", "point"])
    points, flagged = grouped.bad.any(), grouped.flagged.any()
    jobs = f" (every job checked: {len(rows)} measurements)" if len(rows) > len(points) else ""
    if points.any():
        head = f'<span class="bad">{int(points.sum())} of {len(points)} points have wrong results</span>{jobs}'
    else:
        head = f'<span class="ok">all {len(points)} points correct</span>{jobs}'
    if flagged.any():
        load = pd.to_numeric(rows.get("background_cores", pd.Series(dtype=float)), errors="coerce")
        busiest = (f"; up to {load.max():.2g} cores' worth of other work beside the ranks"
                   if load.notna().any() and load.max() > 0 else "")
        head += (f'; <span class="warn">{int(flagged.sum())} of them flagged unreliable</span> (their times are not '
                 f"to be trusted: the unreliable column of Every point says why{busiest})")
    return f"<p>{head}</p>"



def build_report(paths: list[str], out_file: str | Path, title: str = "commbench report") -> Path:
    paths = [paths] if isinstance(paths, (str, Path)) else paths
    output_file(out_file, "-o", inputs=paths)  # before any work
    workloads, run_paths = workload.split(paths)  # a workload folder: its section, and its measured/ runs if any
    sections = _run_sections(run_paths) if run_paths else []
    sections[1:1] = workload.sections(workloads)  # after the summary
    body = [toc([heading for heading, _ in sections])] + [html for _, html in sections]
    return write_page(document(title, runinfo.utc_now(), body, plotly_js()), out_file)


def _run_sections(paths: list) -> list[tuple[str, str]]:
    rows, metas = load_runs(paths)
    rows["mode"] = rows.in_place.map(lambda v: "in-place" if int(v) else "out-of-place")
    chart_rows = charts.median_job(rows)
    series = Series(chart_rows)
    shared = series.shared()
    sections = [section("Summary", _correctness(rows) + summary_table(summarize(chart_rows, rows))
                        + '<p class="muted">per run and collective, from each point\'s median job; fastest: the '
                          'algorithm of the lowest median time at the most sizes of the band (sizes won / '
                          'measured); wrong elements summed over every job'
                        + (f"; every series: {shared}" if shared else "") + "</p>")]
    folders = [path for path, _ in metas]
    checks = sorted(set(rows.folder[rows.check_scope.notna()])) if "check_scope" in rows else []
    sections += health.check_sections(checks) + health.straggler_section([f for f in folders if f not in checks])
    measured = set(rows.collective)
    for collective in [c for c in COLLECTIVES if c in measured]:  # the registry's order: all_reduce first
        divs = "".join(chart(fig) for fig in _figures(chart_rows, collective, series))
        sections.append(section(collective, f'<div class="charts">{divs}</div>'))
    sections.append(section("Every point", '<p class="muted">click a column to sort; wrong results in red</p>'
                            + points_table(rows)))
    names = run_names([Path(path) for path, _ in metas], [meta for _, meta in metas])  # the legends' names
    sections.append(section("Environment", "".join(f"<h3>{esc(name)}</h3>" + environment_table(meta, path)
                                                   for name, (path, meta) in zip(names, metas, strict=True))))
    return sections
