"""The report page: one self-contained HTML file (plotly.js inline, no network), the
environment of every run, the charts, and a sortable table of every point. Every string from
outside (labels, hosts, environment, file names, command lines) goes through `esc`: HTML-escaped,
with control and format characters shown as escapes (commbench.terminal.printable)."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from commbench.outputs import write_text
from commbench.terminal import printable

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}
h1{margin-bottom:4px} h2{margin-top:36px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4;cursor:pointer;user-select:none;position:sticky;top:0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.wrong td{background:#fde2e2;color:#b00020;font-weight:600}
.ok{color:#137333;font-weight:600} .bad{color:#b00020;font-weight:600}
.env td:first-child{white-space:nowrap;font-weight:600}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:12px}
.charts>div{min-width:0;overflow:hidden}
.muted{color:#777;font-size:12px}
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


OPTIONAL_COLUMNS = [("library_choice", "library's choice")]  # shown when any row has one


def points_table(rows: pd.DataFrame) -> str:
    columns = TABLE_COLUMNS + [(col, title) for col, title in OPTIONAL_COLUMNS
                               if col in rows and rows[col].replace("", pd.NA).notna().any()]
    if "job" in rows and rows.job.nunique() > 1:  # --repeat: which job measured the row
        columns.insert(1, ("job", "job"))
    head = "".join(f"<th>{esc(title)}</th>" for _, title in columns)
    body = []
    for r in rows.to_dict("records"):
        wrong = r.get("wrong")
        bad = wrong not in (None, "") and not pd.isna(wrong) and float(wrong) > 0
        cells = "".join(_cell(_native(r.get(col))) for col, _ in columns)
        body.append(f'<tr class="wrong">{cells}</tr>' if bad else f"<tr>{cells}</tr>")
    return f'<table class="sortable" id="points"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


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
    items += [(f"version: {k}", v) for k, v in sorted(versions.items())]
    env = {**(meta.get("environment") or {}), **(meta.get("rank0_environment") or {})}
    items += [(f"env: {k}", v) for k, v in sorted(env.items())]
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in items if v not in (None, "", " / "))
    return f'<table class="env">{rows}</table>'


def document(title: str, generated: str, sections: list[str], plotly_js: str) -> str:
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{esc(title)}</title>"
            f"<style>{STYLE}</style><script type=\"text/javascript\">{plotly_js}</script></head><body>"
            f"<h1>{esc(title)}</h1><div class=\"muted\">generated {esc(generated)} by commbench</div>"
            + "".join(sections) + f"<script>{SORT_JS}</script></body></html>")


def write_page(page: str, out_file: str | Path) -> Path:
    """Write the page whole (commbench.outputs.write_text: temp file + rename, one InputError line);
    an unpaired surrogate (a JSON file's "\\ud800") is written as its escape, not a crash."""
    return write_text(out_file, page.encode("utf-8", "backslashreplace").decode("utf-8"), "report")
