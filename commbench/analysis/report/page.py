"""The report page: one self-contained HTML file (plotly.js inline once, no network), a table of
contents, the charts each under its own title and note (set in the page, clear of plotly's
toolbar), a sortable table of every point and the environment of every run. Every string from
outside (labels, hosts, environment, file names, command lines) goes through `esc`: HTML-escaped,
with control and format characters shown as escapes (commbench.presentation.terminal.printable).

plotly.js: the report draws only scatter lines, so the page carries plotly's "basic" bundle
(plotly-basic.min.js beside this file: the npm package plotly.js-basic-dist-min, MIT, the version
of the full bundle plotly.py ships), a quarter of the full one; the full one where it is absent."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd

from commbench.folder.outputs import write_text
from commbench.presentation.terminal import printable

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}
h1{margin-bottom:4px} h2{margin-top:36px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4;cursor:pointer;user-select:none;position:sticky;top:0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.wrong td{background:#fde2e2;color:#b00020;font-weight:600}
tr.unreliable td{background:#fff4e0}
.ok{color:#137333;font-weight:600} .bad{color:#b00020;font-weight:600} .warn{color:#b26a00;font-weight:600}
.env td:first-child{white-space:nowrap;font-weight:600}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:12px}
.charts>div,.charts>figure{min-width:0;overflow:hidden}
.muted{color:#777;font-size:12px}
figure.chart{margin:0;border:1px solid #eee;border-radius:4px;padding:6px 6px 0}
figure.chart figcaption{font-weight:600;font-size:14px;padding:2px 4px}
figure.chart figcaption .muted{display:block;font-weight:400}
nav.toc ol{margin:4px 0;padding-left:22px;columns:2;max-width:720px} nav.toc a{text-decoration:none}
"""

SORT_JS = """
document.querySelectorAll('table.sortable').forEach(function(table){
  table.querySelectorAll('th').forEach(function(th, col){
    th.addEventListener('click', function(){
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var asc = th.getAttribute('data-sort') !== 'asc';
      table.querySelectorAll('th').forEach(function(h){ h.removeAttribute('data-sort'); });
      th.setAttribute('data-sort', asc ? 'asc' : 'desc');
      rows.sort(function(a, b){
        var x = a.cells[col].getAttribute('data-v'), y = b.cells[col].getAttribute('data-v');
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
        return asc ? c : -c;
      });
      rows.forEach(function(r){ body.appendChild(r); });
    });
  });
});
"""

TABLE_COLUMNS = [("run", "run"), ("collective", "collective"), ("backend", "backend"), ("algorithm", "algorithm"),
                 ("dtype", "dtype"), ("op", "op"), ("mode", "mode"), ("world_size", "ranks"), ("size_bytes", "size (B)"),
                 ("time_us", "time (µs)"), ("time_us_p99", "p99 (µs)"), ("algbw_gbps", "algbw (GB/s)"),
                 ("busbw_gbps", "busbw (GB/s)"), ("samples", "samples"), ("wrong", "#wrong")]


def esc(value) -> str:
    return html.escape("" if value is None else printable(value), quote=True)


def _cell(value) -> str:
    if isinstance(value, float):
        if pd.isna(value):
            return '<td data-v=""></td>'
        shown = f"{value:.4g}" if abs(value) < 1e5 else f"{value:.0f}"
        return f'<td class="num" data-v="{value!r}">{shown}</td>'
    if isinstance(value, int):
        return f'<td class="num" data-v="{value}">{value}</td>'
    return f'<td data-v="{esc(value)}">{esc(value)}</td>'


OPTIONAL_COLUMNS = [("latency_efficiency", "floor / time"), ("bandwidth_efficiency", "busbw / copy rate"),
                    ("library_choice", "library's choice"), ("unreliable", "unreliable"),
                    ("background_cores", "background (cores)")]  # shown when any row has one


def unreliable(rows: pd.DataFrame) -> pd.Series:
    """Per row: does its `unreliable` column give a reason not to trust its time (a busy machine, a wide spread)?"""
    if "unreliable" not in rows:
        return pd.Series(False, index=rows.index)
    return rows.unreliable.fillna("").astype(str).str.strip().ne("")


def points_table(rows: pd.DataFrame) -> str:
    columns = TABLE_COLUMNS + [(col, title) for col, title in OPTIONAL_COLUMNS
                               if col in rows and rows[col].replace("", pd.NA).notna().any()]
    if "job" in rows and rows.job.nunique() > 1:  # --repeat: which job measured the row
        columns.insert(1, ("job", "job"))
    head = "".join(f"<th>{esc(title)}</th>" for _, title in columns)
    body = []
    for r, flagged in zip(rows.to_dict("records"), unreliable(rows), strict=True):
        wrong = r.get("wrong")
        bad = wrong not in (None, "") and not pd.isna(wrong) and float(wrong) > 0
        cells = "".join(_cell(_native(r.get(col))) for col, _ in columns)
        row_class = ' class="wrong"' if bad else ' class="unreliable"' if flagged else ""
        body.append(f"<tr{row_class}>{cells}</tr>")
    return f'<table class="sortable" id="points"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _floor_text(f) -> str:
    """A host's floors (commbench floor) in one line, or why there are none."""
    if not isinstance(f, dict):
        return str(f)
    parts = [(k, label, unit) for k, label, unit in (("handoff_us", "hand-off", "µs"), ("exchange_us", "8 B exchange", "µs"),
                                                     ("copy_GBps", "copy", "GB/s"), ("device_copy_GBps", "GPU copy", "GB/s"))
             if isinstance(f.get(k), (int, float))]
    return ", ".join(f"{label} {f[k]:g} {unit}" for k, label, unit in parts)


def _native(v):
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)  # a whole number read back as float (a column with empty cells): shown without ".0"
    return v


def _shape(meta: dict) -> str | None:
    """"4 / 2 / 2": ranks, nodes, ranks per node ("?" where not recorded); None when none is."""
    shape = [meta.get(k) for k in ("world_size", "nodes", "ranks_per_node")]
    return None if all(v is None for v in shape) else " / ".join("?" if v is None else str(v) for v in shape)


def environment_table(meta: dict, path: str) -> str:
    versions = meta.get("versions") or {}
    hosts = sorted({r.get("hostname", "?") for r in meta.get("ranks", [])}) or meta.get("hosts") or []
    gpus = sorted({r["gpu"] for r in meta.get("ranks", []) if r.get("gpu")}) or meta.get("gpus") or []
    items = [("folder", path), ("run id", meta.get("run_id")), ("label", meta.get("label")),
             ("status", meta.get("status")), ("error", meta.get("error")),
             ("imported from", meta.get("imported_from")), ("source file", meta.get("source_file")),
             ("started / ended", f"{meta.get('start_time', '')} / {meta.get('end_time', '')}"),
             ("ranks / nodes / per node", _shape(meta)),
             ("hosts", ", ".join(map(str, hosts))), ("GPUs", ", ".join(map(str, gpus))),
             ("launcher", meta.get("launcher")),
             ("command line", " ".join(map(str, meta.get("command_line") or []))),
             ("git revision", meta.get("git_revision"))]
    floors = meta.get("floors") if isinstance(meta.get("floors"), dict) else {}
    items += [(f"floor: {host}", _floor_text(f)) for host, f in sorted(floors.items(), key=lambda kv: str(kv[0]))]
    items += [(f"version: {k}", v) for k, v in sorted(versions.items())]
    env = {**(meta.get("environment") or {}), **(meta.get("rank0_environment") or {})}
    items += [(f"env: {k}", v) for k, v in sorted(env.items())]
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in items if v not in (None, "", " / "))
    return f'<table class="env">{rows}</table>'


BASIC_BUNDLE = Path(__file__).with_name("plotly-basic.min.js")
CHART_CONFIG = {"displaylogo": False, "responsive": True,
                "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"]}


def plotly_js() -> str:
    """plotly.js for the page: the basic bundle shipped beside this file, else plotly.py's full one."""
    if BASIC_BUNDLE.is_file():
        return BASIC_BUNDLE.read_text(encoding="utf-8")
    import plotly.offline

    return plotly.offline.get_plotlyjs()


def chart(fig) -> str:
    """A figure with its title and note (layout.title, layout.meta.note) set above it in the page,
    where plotly's toolbar cannot cover them; plotly.js itself is the page's (included once)."""
    title, note = fig.layout.title.text or "", (fig.layout.meta or {}).get("note", "")
    bare = type(fig)(fig).update_layout(title=None, meta=None)
    div = bare.to_html(full_html=False, include_plotlyjs=False, default_width="100%", config=CHART_CONFIG)
    caption = title + (f'<span class="muted">{esc(note)}</span>' if note else "")  # title: escaped by its chart
    return f'<figure class="chart"><figcaption>{caption}</figcaption>{div}</figure>'


def anchor(text: str) -> str:
    """An id for a section heading: letters, digits, '-' and '_' only."""
    return "s-" + re.sub(r"[^A-Za-z0-9_-]+", "-", printable(text)).strip("-")


def section(heading: str, body: str) -> tuple[str, str]:
    """(heading, html) of a section, the heading given as plain text."""
    return heading, f'<h2 id="{anchor(heading)}">{esc(heading)}</h2>{body}'


def toc(headings: list[str]) -> str:
    items = "".join(f'<li><a href="#{anchor(h)}">{esc(h)}</a></li>' for h in headings)
    return f'<nav class="toc"><b>Contents</b><ol>{items}</ol></nav>'


def document(title: str, generated: str, sections: list[str], plotly_js: str) -> str:
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{esc(title)}</title>"
            f"<style>{STYLE}</style><script type=\"text/javascript\">{plotly_js}</script></head><body>"
            f"<h1>{esc(title)}</h1><div class=\"muted\">generated {esc(generated)} by commbench</div>"
            + "".join(sections) + f"<script>{SORT_JS}</script></body></html>")


def write_page(page: str, out_file: str | Path) -> Path:
    """Write the page whole (commbench.folder.outputs.write_text: temp file + rename, one InputError line);
    an unpaired surrogate (a JSON file's "\\ud800") is written as its escape, not a crash."""
    return write_text(out_file, page.encode("utf-8", "backslashreplace").decode("utf-8"), "report")
