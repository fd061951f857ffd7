"""`commbench report`: one self-contained, offline HTML page for one or more result folders."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd

from commbench import runinfo
from commbench.analysis.compare import run_dirs
from commbench.errors import InputError
from commbench.analysis.report import charts
from commbench.analysis.report.page import document, environment_table, esc, points_table
from commbench.results import read_results, read_run_json


def load_runs(paths: list[str]) -> tuple[pd.DataFrame, list[tuple[str, dict]]]:
    frames, metas = [], []
    for path in paths:
        for d in run_dirs(path):
            try:
                rows = read_results(d)
                meta = read_run_json(d) if (d / "run.json").exists() else {}
            except Exception as exc:  # noqa: BLE001 - any unreadable file is unusable input
                raise InputError(f"{d}: unreadable results ({type(exc).__name__}: {exc})".splitlines()[0]) from None
            needed = ["collective", "backend", "algorithm", "dtype", "op", "in_place", "world_size", "size_bytes",
                      "time_us", "busbw_gbps", "wrong"]
            missing = [c for c in needed if c not in rows.columns]
            if missing:
                raise InputError(f"{d / 'results.csv'}: missing columns {', '.join(missing)}")
            run = str(meta.get("label") or meta.get("run_id") or d.name)
            rows = rows.assign(run=run, mode=rows.in_place.map(lambda v: "in-place" if int(v) else "out-of-place"),
                               op=rows.op.fillna("none"))
            for col in ("time_us_min", "time_us_p95", "time_us_p99", "samples"):
                if col not in rows:
                    rows[col] = float("nan")
            frames.append(rows)
            metas.append((str(d), meta))
    all_rows = pd.concat(frames, ignore_index=True)
    if "energy_j" in all_rows and "energy_j_per_byte" not in all_rows:
        all_rows["energy_j_per_byte"] = all_rows.energy_j / all_rows.size_bytes
    return all_rows, metas


def build_report(paths: list[str], out_file: str | Path, title: str = "commbench report") -> Path:
    import plotly.offline

    rows, metas = load_runs(paths)
    sections = []
    wrong_rows = rows[pd.to_numeric(rows.wrong, errors="coerce").fillna(0) > 0]
    status = (f'<span class="bad">{len(wrong_rows)} of {len(rows)} points have wrong results</span>' if len(wrong_rows)
              else f'<span class="ok">all {len(rows)} points correct</span>')
    sections.append(f"<h2>Correctness</h2><p>{status}</p>")
    for collective in sorted(rows.collective.unique()):
        figures = charts.size_charts(rows, collective)
        for fig in (charts.speedup_chart(rows, collective, "native", "each algorithm vs native"),
                    charts.speedup_chart(rows, collective, "ring", "topology-aware vs flat ring (rank order)",
                                        only=["ring_topology", "hierarchical"])):
            if fig is not None:
                figures.append(fig)
        figures += charts.power_charts(rows, collective)
        divs = []
        for fig in figures:
            divs.append(fig.to_html(full_html=False, include_plotlyjs=False, default_width="100%",
                                    config={"displaylogo": False, "responsive": True}))
        sections.append(f"<h2>{esc(collective)}</h2><div class=\"charts\">{''.join(divs)}</div>")
    sections.append("<h2>Every point</h2><p class=\"muted\">click a column to sort; wrong results in red</p>"
                    + points_table(rows))
    sections.append("<h2>Environment</h2>" + "".join(f"<h3>{esc(meta.get('label') or meta.get('run_id') or path)}</h3>"
                                                    + environment_table(meta, path) for path, meta in metas))
    page = document(title, runinfo.utc_now(), sections, plotly.offline.get_plotlyjs())
    out = Path(out_file)
    if out.is_dir():
        raise InputError(f"output {str(out)!r} is a folder; give a file name such as report.html")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".report.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(page)
    os.chmod(tmp, 0o644)
    os.replace(tmp, out)
    return out
