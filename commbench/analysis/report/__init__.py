"""`commbench report`: one self-contained, offline HTML page for one or more result folders."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from commbench import runinfo
from commbench.analysis.load import load_runs
from commbench.analysis.report import charts
from commbench.analysis.topology_comparison import TOPOLOGY_AWARE
from commbench.analysis.report.page import document, environment_table, esc, points_table, write_page
from commbench.outputs import output_file

__all__ = ["build_report"]


def build_report(paths: list[str], out_file: str | Path, title: str = "commbench report") -> Path:
    import plotly.offline

    output_file(out_file, "-o", inputs=[paths] if isinstance(paths, (str, Path)) else paths)  # before any work
    rows, metas = load_runs(paths)
    rows["mode"] = rows.in_place.map(lambda v: "in-place" if int(v) else "out-of-place")
    sections = []
    wrong_rows = rows[pd.to_numeric(rows.wrong, errors="coerce").fillna(0) > 0]
    status = (f'<span class="bad">{len(wrong_rows)} of {len(rows)} points have wrong results</span>' if len(wrong_rows)
              else f'<span class="ok">all {len(rows)} points correct</span>')
    sections.append(f"<h2>Correctness</h2><p>{status}</p>")
    chart_rows = charts.median_job(rows)
    for collective in sorted(rows.collective.unique()):
        figures = charts.size_charts(chart_rows, collective)
        for fig in (charts.speedup_chart(chart_rows, collective, "native", "each algorithm vs native"),
                    charts.speedup_chart(chart_rows, collective, "ring", "topology-aware vs flat ring (rank order)",
                                        only=list(TOPOLOGY_AWARE))):
            if fig is not None:
                figures.append(fig)
        figures += charts.power_charts(chart_rows, collective)
        divs = []
        for fig in figures:
            divs.append(fig.to_html(full_html=False, include_plotlyjs=False, default_width="100%",
                                    config={"displaylogo": False, "responsive": True}))
        sections.append(f"<h2>{esc(collective)}</h2><div class=\"charts\">{''.join(divs)}</div>")
    sections.append("<h2>Every point</h2><p class=\"muted\">click a column to sort; wrong results in red</p>"
                    + points_table(rows))
    sections.append("<h2>Environment</h2>" + "".join(f"<h3>{esc(meta.get('label') or meta.get('run_id') or path)}</h3>"
                                                    + environment_table(meta, path) for path, meta in metas))
    return write_page(document(title, runinfo.utc_now(), sections, plotly.offline.get_plotlyjs()), out_file)
