"""The report's "where it is slow" sections: the stragglers of runs with per-rank samples
(commbench.analysis.stragglers) and each `commbench check` folder's verdicts with its links as a node x
node grid, coloured by each link's share of the cluster's median (commbench.analysis.fabric). The grid
is an HTML table, not a chart: the page's plotly bundle draws no heatmaps."""

from __future__ import annotations

from pathlib import Path

from commbench.analysis import fabric, stragglers
from commbench.analysis.report.page import esc, section
from commbench.fabric_rule import SLOW
from commbench.folder.schema import RANKS_CSV


def _verdict(v: str) -> str:
    return f'<span class="{"bad" if v in ("slow", "noisy") else "ok" if v == "ok" else "muted"}">{esc(v)}</span>'


def straggler_section(folders: list[str]) -> list[tuple[str, str]]:
    with_ranks = [f for f in folders if (Path(f) / RANKS_CSV).exists()]
    if not with_ranks:
        return []
    a = stragglers.analyze(with_ranks)
    if not a.points:
        return []
    head = "".join(f"<th>{h}</th>" for h in ("what", "run", "rank(s)", "host", "time (µs)", "CV %", "spread %",
                                             "late (µs)", "spikes (shared)", "verdict", "why"))
    body = []
    for s in a.subjects:
        c = s.cells
        late = "-" if c.get("late_us") is None else f"{c['late_us']:.2f}"
        spikes = f"{c['spikes']} ({c['shared_spikes']})" if "spikes" in c else "-"
        body.append(f"<tr><td>{s.what}</td><td>{esc(s.run)}</td><td>{esc(','.join(map(str, s.ranks)))}</td>"
                    f"<td>{esc(','.join(s.hosts))}</td><td class='num'>{c['time_us']:.2f}</td>"
                    f"<td class='num'>{c['cv_pct']:.1f}</td><td class='num'>{c['spread_pct']:.1f}</td>"
                    f"<td class='num'>{late}</td><td class='num'>{spikes}</td><td>{_verdict(s.verdict)}</td>"
                    f"<td>{esc(s.why)}</td></tr>")
    summary = (f'<p><span class="bad">{len(a.flagged)} flagged</span></p>' if a.flagged
               else '<p><span class="ok">no rank or node flagged</span></p>')
    note = ('<p class="muted">each rank against the same run\'s ranks, medians over the points judged '
            f'({len(a.points)}); `commbench stragglers` gives the same table, and its JSON</p>')
    return [section("Stragglers", summary + note + f"<table class='sortable'><thead><tr>{head}</tr></thead>"
                                                  f"<tbody>{''.join(body)}</tbody></table>")]


def _colour(share: float) -> str:
    """Green at the cluster's median and above, red at the bar and below."""
    t = min(max((share - SLOW) / (1 - SLOW), 0.0), 1.0)
    return f"rgb({int(230 - 110 * t)},{int(120 + 100 * t)},{int(120 + 20 * t)})"


def check_sections(folders: list[str]) -> list[tuple[str, str]]:
    out = []
    for folder in folders:
        c = fabric.read_check(folder)
        links = {f.nodes: f for f in c.findings if f.what == "link" and not f.ranks}
        nodes = list(range(c.nodes))
        head = "<th></th>" + "".join(f"<th>{i}<br><span class='muted'>{esc(c.hosts.get(i, '?'))}</span></th>"
                                     for i in nodes)
        grid = []
        for a in nodes:
            cells = []
            for b in nodes:
                f = links.get((min(a, b), max(a, b)))
                if f is None:
                    cells.append("<td></td>")
                else:
                    share = f.measured / f.expected if f.expected else 1.0
                    cells.append(f"<td class='num' style='background:{_colour(share)}' title='{share:.0%} of the "
                                 f"cluster&#39;s median'>{f.measured:.3g}</td>")
            grid.append(f"<tr><th>{a} <span class='muted'>{esc(c.hosts.get(a, '?'))}</span></th>{''.join(cells)}</tr>")
        rows = "".join(f"<tr><td>{f.what}</td><td>{esc('-'.join(map(str, f.nodes)))}</td>"
                       f"<td>{esc('-'.join(map(str, f.ranks)))}</td>"
                       f"<td class='num'>{f.measured:.4g} {f.unit}</td><td class='num'>{f.expected:.4g} {f.unit}</td>"
                       f"<td>{_verdict(f.verdict)}</td><td>{esc(f.why)}</td></tr>"
                       for f in c.findings if f.what in ("node", "rank") or f.verdict != "ok")
        summary = (f'<p><span class="bad">flagged: {esc(", ".join(f"{f.what} " + "-".join(map(str, f.nodes)) for f in c.flagged))}'
                   "</span></p>" if c.flagged else f'<p><span class="ok">no node or link flagged ({c.nodes} nodes)</span></p>')
        body = (summary + "<p class='muted'>each link's median GB/s each way, coloured by its share of the cluster's "
                f"median (red: at or below the bar, {SLOW:.0%})</p><table><thead><tr>{head}</tr></thead><tbody>"
                + "".join(grid) + "</tbody></table><table class='sortable'><thead><tr><th>what</th><th>node(s)</th>"
                "<th>rank(s)</th><th>measured</th><th>cluster median</th><th>verdict</th><th>why</th></tr></thead><tbody>"
                + rows + "</tbody></table>")
        out.append(section(f"Fabric check: {Path(folder).name}", body))
    return out
