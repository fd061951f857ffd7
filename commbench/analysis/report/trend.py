"""`commbench compare --html`: the comparison as one self-contained page: what differs between
the sides, the verdicts of the last candidate, and each point's history, baseline first and then
every candidate in time order, as each side's figure (geometric mean of its jobs' medians) with
its 95 % band (from the spread between its jobs; none with one job), markers coloured by verdict.
One chart per implementation (collective, backend, algorithm, dtype, op, mode, ranks), a line
per size. Every string from a result file is escaped (commbench.analysis.report.charts)."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go

from commbench import runinfo
from commbench.analysis.compare import Comparison, Verdict
from commbench.analysis.compare_formats import context_lines, in_order
from commbench.analysis.report.page import chart, document, esc, plotly_js, write_page

COLOURS = {"regression": "#b00020", "inconclusive": "#e69500", "improvement": "#137333", "unchanged": "#607d8b",
           None: "#9e9e9e"}
SYMBOLS = {"regression": "triangle-up", "improvement": "triangle-down", "unchanged": "circle",
           "inconclusive": "diamond", None: "square"}  # a verdict's shape as well as its colour (colour-blind readers)
# the sizes: dark-to-light greys and dash patterns, never a hue, so that colour only ever means a verdict
SIZE_GREYS = ("#212121", "#5f6368", "#a8a8a8")
SIZE_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SERIES = ("collective", "backend", "algorithm", "dtype", "op", "in_place", "world_size")


def _rgba(hex_colour: str, alpha: float) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _steps(cmp: Comparison) -> list[str]:
    """The x axis: the baseline, then each candidate (numbered: folder names may repeat)."""
    return [f"baseline: {Path(cmp.baseline).name}"] + [f"{i}: {Path(c).name}" for i, c in enumerate(cmp.candidates, 1)]


def history_chart(cmp: Comparison, verdicts: list[Verdict]) -> go.Figure:
    k = verdicts[0].key
    op = "" if k["op"] in ("none", None) else f" {k['op']}"
    mode = "in-place" if k["in_place"] else "out-of-place"
    title = (f"{k['collective']} · {k['backend']} {k['algorithm']} · {k['dtype']}{op} · {mode} · "
             f"{k['world_size']} ranks")
    fig = go.Figure()
    fig.update_layout(title=esc(title), yaxis_title="time (µs), 95% band", template="plotly_white", height=460,
                      legend={"font": {"size": 10}}, margin={"l": 60, "r": 20, "t": 36, "b": 40})  # title: page.chart
    fig.update_yaxes(type="log")
    x = [esc(s) for s in _steps(cmp)]
    for i, v in enumerate(sorted(verdicts, key=lambda v: v.key["size_bytes"])):
        colour, dash = SIZE_GREYS[i % len(SIZE_GREYS)], SIZE_DASHES[i % len(SIZE_DASHES)]
        levels = [v.baseline_level] + [h.get("level") for h in v.history]
        mid = [None if lv is None else lv[0] for lv in levels]
        low = [None if lv is None else (lv[1] if lv[1] is not None else lv[0]) for lv in levels]
        high = [None if lv is None else (lv[2] if lv[2] is not None else lv[0]) for lv in levels]
        shown = [j for j, m in enumerate(mid) if m is not None]
        name = esc(f"{v.key['size_bytes']} B")
        fig.add_trace(go.Scatter(x=[x[j] for j in shown] + [x[j] for j in reversed(shown)],
                                 y=[high[j] for j in shown] + [low[j] for j in reversed(shown)],
                                 mode="lines", fill="toself", fillcolor=_rgba(colour, 0.15), line={"width": 0},
                                 hoverinfo="skip",
                                 legendgroup=name, showlegend=False))
        marks = [None] + [h.get("verdict") for h in v.history]
        text = ["baseline"] + [esc(f"{h.get('verdict', 'not measured')}, ratio {h['ratio']:.3f}")
                               if "ratio" in h else "not measured" for h in v.history]
        fig.add_trace(go.Scatter(x=[x[j] for j in shown], y=[mid[j] for j in shown], mode="lines+markers", name=name,
                                 legendgroup=name, line={"color": colour, "dash": dash},
                                 marker={"size": 10, "color": [COLOURS[marks[j]] for j in shown],
                                         "symbol": [SYMBOLS[marks[j]] for j in shown],
                                         "line": {"color": colour, "width": 1}},
                                 text=[text[j] for j in shown], hovertemplate="%{y:.3g} µs: %{text}<extra></extra>"))
    return fig


def verdict_table(cmp: Comparison) -> str:
    head = "".join(f"<th>{t}</th>" for t in ("point", "verdict", "baseline (µs)", "candidate (µs)", "ratio", "95% CI",
                                             "p", "jobs", "history", "note"))
    body = []
    for v in in_order(cmp):
        ci = "-" if v.ci_low is None else f"{v.ci_low:.3f}–{v.ci_high:.3f}"
        history = " ".join("-" if "ratio" not in h else f"{h['ratio']:.2f}" for h in v.history)
        cells = [v.name(), v.verdict, f"{v.baseline_us:.2f}", f"{v.candidate_us:.2f}", f"{v.ratio:.3f}", ci,
                 "-" if v.p_value is None else f"{v.p_value:.2g}", f"{v.jobs[0]}/{v.jobs[1]}", history, v.note]
        style = f' style="color:{COLOURS[v.verdict]};font-weight:600"'
        body.append("<tr>" + "".join(f'<td data-v="{esc(c)}"{style if j == 1 else ""}>{esc(c)}</td>'
                                     for j, c in enumerate(cells)) + "</tr>")
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def build_trend(cmp: Comparison, out_file: str | Path, title: str = "commbench compare") -> Path:
    sides = "".join(f"<li>{esc(s)}</li>" for s in _steps(cmp))
    sections = [f"<h2>Result sets</h2><ol class=\"muted\" start=\"0\">{sides}</ol>"
                f"<p>baseline {esc(cmp.baseline)}; candidates, oldest first: {esc(', '.join(cmp.candidates))}</p>"]
    changes = context_lines(cmp)
    sections.append("<h2>Context changes</h2>" + ("<pre>" + esc("\n".join(changes)) + "</pre>" if changes
                                                  else "<p>none recorded</p>"))
    advice = "".join(f"<li>{esc(a)}</li>" for a in cmp.advice())
    sections.append(f"<h2>Verdicts (the last candidate)</h2><p><b>{esc(cmp.summary())}</b></p><ul>{advice}</ul>"
                    + verdict_table(cmp))
    groups: dict[tuple, list[Verdict]] = {}
    for v in cmp.verdicts:
        groups.setdefault(tuple(v.key[k] for k in SERIES), []).append(v)
    divs = [chart(history_chart(cmp, vs)) for _, vs in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0])))]
    sections.append("<h2>History</h2><p class=\"muted\">each side's figure (geometric mean of its jobs' medians) and "
                    "its 95% band from the spread between its jobs; sizes are grey lines told apart by their dashes; "
                    "markers are verdicts: red ▲ regression, orange ◆ inconclusive, green ▼ improvement, blue-grey ● "
                    f"unchanged, grey ■ baseline</p><div class=\"charts\">{''.join(divs)}</div>")
    return write_page(document(title, runinfo.utc_now(), sections, plotly_js()), out_file)
