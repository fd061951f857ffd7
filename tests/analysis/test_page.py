"""The report page (commbench/analysis/report/page.py): esc() for every string from outside, the
sortable table of every point (numbers right-aligned with their exact value to sort by, wrong rows
marked, the job and library-choice columns only when they say something), each run's environment,
charts under their own titles and notes, the table of contents, plotly.js once (the basic bundle),
the self-contained document, and the page written whole; build_report assembling them from result
folders."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from synthetic_runs import write_run

from commbench.analysis.report import build_report
from commbench.analysis.report.page import (BASIC_BUNDLE, SORT_JS, STYLE, TABLE_COLUMNS, _cell, anchor, chart,
                                            document, environment_table, esc, plotly_js, points_table, section, toc,
                                            write_page)
from commbench.errors import InputError

EVIL = '<script>alert("x")</script>\x1b[2J\u202e'


def test_esc_escapes_markup_quotes_and_control_characters():
    assert esc(None) == "" and esc(3) == "3" and esc("plain") == "plain"
    assert esc(EVIL) == "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;\\x1b[2J\\u202e"
    assert esc("a'b&c") == "a&#x27;b&amp;c"


@pytest.mark.parametrize("value,cell", [
    (1.23456, '<td class="num" data-v="1.23456">1.235</td>'),
    (123456.7, '<td class="num" data-v="123456.7">123457</td>'),
    (float("nan"), '<td data-v=""></td>'),
    (12, '<td class="num" data-v="12">12</td>'),
    ('a"b<c>', '<td data-v="a&quot;b&lt;c&gt;">a&quot;b&lt;c&gt;</td>'),
])
def test_a_cell_shows_a_number_short_and_sorts_by_its_exact_value(value, cell):
    assert _cell(value) == cell


def _rows(n=2, **columns) -> pd.DataFrame:
    base = {"run": "run-a", "collective": "all_reduce", "backend": "mpi", "algorithm": "ring", "dtype": "float32",
            "op": "sum", "mode": "out-of-place", "world_size": 2, "size_bytes": [8 << i for i in range(n)],
            "time_us": 1.5, "time_us_p99": np.nan, "algbw_gbps": 0.5, "busbw_gbps": 0.5, "samples": 10, "wrong": 0}
    return pd.DataFrame({**base, **columns})


def _body_rows(table: str) -> list[str]:
    return re.findall(r"<tr[^>]*>.*?</tr>", table.split("<tbody>")[1].split("</tbody>")[0])


def test_the_table_has_a_column_per_field_and_a_row_per_point():
    table = points_table(_rows(n=3))
    heads = re.findall(r"<th>(.*?)</th>", table)
    assert heads == [esc(title) for _, title in TABLE_COLUMNS]
    rows = _body_rows(table)
    assert len(rows) == 3 and all(r.count("<td") == len(TABLE_COLUMNS) for r in rows)
    assert '<td class="num" data-v="16">16</td>' in rows[1] and table.startswith('<table class="sortable" id="points">')


def test_wrong_rows_are_marked():
    table = points_table(_rows(n=3, wrong=[0, 4, np.nan]))
    assert [r.startswith('<tr class="wrong">') for r in _body_rows(table)] == [False, True, False]


def test_the_job_column_appears_only_for_several_jobs():
    assert "<th>job</th>" not in points_table(_rows(job=[1, 1]))
    table = points_table(_rows(job=[1, 2]))
    assert re.findall(r"<th>(.*?)</th>", table)[:2] == ["run", "job"]
    assert '<td class="num" data-v="2">2</td>' in _body_rows(table)[1]


def test_the_library_choice_column_appears_only_when_a_row_has_one():
    assert "choice" not in points_table(_rows(library_choice=["", np.nan]))
    table = points_table(_rows(library_choice=["RING/LL", EVIL]))
    assert "<th>library&#x27;s choice</th>" in table and ">RING/LL</td>" in table
    assert "<script>" not in table and "&lt;script&gt;" in table


def test_strings_in_the_table_are_escaped():
    table = points_table(_rows(run=EVIL, dtype="<b>f</b>"))
    assert "<script>" not in table and "\x1b" not in table and "<b>" not in table
    assert table.count(esc(EVIL)) == 4  # shown and sorted by, in each of the two rows


META = {"run_id": "20240101-abc", "label": "nightly", "status": "completed", "start_time": "t0", "end_time": "t1",
        "world_size": 4, "nodes": 2, "ranks_per_node": 2, "launcher": "mpirun",
        "ranks": [{"hostname": "node-b", "gpu": "H100"}, {"hostname": "node-a", "gpu": "H100"}, {"hostname": "node-a"}],
        "command_line": ["commbench", "run", "-n", 4], "git_revision": "abc123",
        "versions": {"python": "3.11", "mpi_library": "Open MPI"},
        "environment": {"NCCL_ALGO": "ring", "OMPI_MCA_btl": "self"}, "rank0_environment": {"OMPI_MCA_btl": "tcp"}}


def _env_items(table: str) -> dict:
    return dict(re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", table))


def test_the_environment_of_a_run():
    items = _env_items(environment_table(META, "/results/r1"))
    assert items == {"folder": "/results/r1", "run id": "20240101-abc", "label": "nightly", "status": "completed",
                     "started / ended": "t0 / t1", "ranks / nodes / per node": "4 / 2 / 2",
                     "hosts": "node-a, node-b", "GPUs": "H100", "launcher": "mpirun",
                     "command line": "commbench run -n 4", "git revision": "abc123",
                     "version: mpi_library": "Open MPI", "version: python": "3.11",
                     "env: NCCL_ALGO": "ring", "env: OMPI_MCA_btl": "tcp"}  # rank 0's value over the parent's
    assert list(items).index("version: mpi_library") < list(items).index("version: python")  # sorted


def test_an_imported_run_names_its_source_and_hosts_it_recorded():
    items = _env_items(environment_table({"imported_from": "nccl-tests", "source_file": "out.txt", "hosts": ["h1"],
                                          "gpus": ["A100"], "error": None, "label": ""}, "imp"))
    assert items["imported from"] == "nccl-tests" and items["source file"] == "out.txt"
    assert items["hosts"] == "h1" and items["GPUs"] == "A100"
    assert "error" not in items and "label" not in items and "started / ended" not in items


def test_strings_in_the_environment_are_escaped():
    meta = {**META, "label": EVIL, "environment": {EVIL: EVIL}, "command_line": ["commbench", EVIL]}
    table = environment_table(meta, EVIL)
    assert "<script>" not in table and "\x1b" not in table and table.count(esc(EVIL)) == 5


def test_the_document_is_self_contained_with_its_title_escaped():
    page = document(EVIL, "2024-01-01T00:00:00Z", ["<h2>A</h2>", "<h2>B</h2>"], "/*plotly*/")
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</body></html>")
    assert f"<title>{esc(EVIL)}</title>" in page and f"<h1>{esc(EVIL)}</h1>" in page
    assert '<script type="text/javascript">/*plotly*/</script>' in page and SORT_JS in page and STYLE in page
    assert page.index("<h2>A</h2>") < page.index("<h2>B</h2>") and "<script>alert" not in page
    assert not re.search(r"<script[^>]+src=", page) and "<link" not in page  # nothing fetched


def test_write_page_writes_a_lone_surrogate_as_its_escape(tmp_path):
    out = write_page("<p>\ud800</p>", tmp_path / "r.html")
    assert out == tmp_path / "r.html" and out.read_text(encoding="utf-8") == "<p>\\ud800</p>"
    with pytest.raises(InputError, match="^cannot write report .*No such file or directory"):
        write_page("x", tmp_path / "missing" / "r.html")


# --- the page build_report assembles --------------------------------------------------------------------------

def test_a_report_of_two_folders(tmp_path):
    a = write_run(tmp_path / "a", [10.0, 11.0, 10.5], meta={"label": EVIL})
    b = write_run(tmp_path / "b", [10.0], run_id="rb")
    out = build_report([str(a), str(b)], tmp_path / "r.html", title="nightly <b>")
    page = out.read_text()
    assert "<title>nightly &lt;b&gt;</title>" in page
    assert "all 4 points correct</span> (every job checked: 8 measurements)" in page
    headings = ["Summary", "all_reduce", "Every point", "Environment"]
    assert re.findall(r'<h2 id="[^"]+">(.*?)</h2>', page) == headings
    assert re.findall(r'<li><a href="#([^"]+)">(.*?)</a></li>', page) == [(anchor(h), h) for h in headings]
    assert page.count('class="plotly-graph-div"') == 2  # bandwidth and latency; no other algorithm, no power
    assert re.findall(r"<figcaption>(.*?)<span", page) == ["all_reduce: bus bandwidth", "all_reduce: latency"]
    assert len(_body_rows(page.split('id="points"')[1])) == 8 and "<th>job</th>" in page
    assert re.findall(r"<h3>(.*?)</h3>", page) == [esc(EVIL), "b"]
    assert page.count("Plotly=") == 1 and len(page) < len(plotly_js()) + 200_000  # plotly.js once
    assert "<script>alert" not in page and "\x1b" not in page
    figures = [json.loads(s) for s in re.findall(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*\{', page, re.S)]
    assert [len(f) for f in figures] == [2, 2]  # a line per run in each chart


def test_a_report_counts_wrong_points_and_checks_its_output_first(tmp_path):
    run = write_run(tmp_path / "a", [10.0])
    rows = pd.read_csv(run / "results.csv")
    rows["wrong"] = 5
    rows.to_csv(run / "results.csv", index=False)
    page = build_report(str(run), tmp_path / "r.html").read_text()
    assert '<span class="bad">2 of 2 points have wrong results</span>' in page
    assert page.count('<tr class="wrong">') == 2
    with pytest.raises(InputError, match="is one of the inputs"):
        build_report(str(run), run / "results.csv")


def _plot_arguments(html: str) -> list:
    """The arguments of a chart's Plotly.newPlot call: id, data, layout, config."""
    text, found, decoder = html.split("Plotly.newPlot(", 1)[1], [], json.JSONDecoder()
    for _ in range(4):
        value, end = decoder.raw_decode(text.lstrip(" \n,"))
        found.append(value)
        text = text.lstrip(" \n,")[end:]
    return found


def test_a_chart_has_its_title_and_note_above_it_not_in_the_plot():
    """plotly draws a title at the top of the plot, where its toolbar (the modebar) covers it."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=[1], y=[2])).update_layout(title="a &lt;b&gt;", meta={"note": EVIL})
    html = chart(fig)
    assert html.startswith('<figure class="chart"><figcaption>a &lt;b&gt;<span class="muted">' + esc(EVIL))
    layout = _plot_arguments(html)[2]
    assert not layout.get("title") and "meta" not in layout  # none drawn in the plot
    assert fig.layout.title.text == "a &lt;b&gt;"  # the figure given is left alone
    assert '"displaylogo": false' in html and "lasso2d" in html and "<script src" not in html


def test_sections_and_their_table_of_contents():
    heading, body = section("all_reduce <x>", "<p>b</p>")
    assert heading == "all_reduce <x>" and body == '<h2 id="s-all_reduce-x">all_reduce &lt;x&gt;</h2><p>b</p>'
    assert toc(["Summary", heading]) == ('<nav class="toc"><b>Contents</b><ol><li><a href="#s-Summary">Summary</a>'
                                         '</li><li><a href="#s-all_reduce-x">all_reduce &lt;x&gt;</a></li></ol></nav>')
    assert anchor('"><script>') == "s-script"


def test_the_page_carries_plotlys_basic_bundle_of_the_version_plotly_py_ships():
    import plotly.offline

    js = plotly_js()
    assert BASIC_BUNDLE.is_file() and js.startswith("/**\n* plotly.js (basic - minified)")
    version = re.search(r"plotly\.js \(basic - minified\) (v[0-9.]+)", js).group(1)
    assert version in plotly.offline.get_plotlyjs()[:300]  # the figures plotly.py writes are for this version
    assert len(js) < 1_300_000 < len(plotly.offline.get_plotlyjs())


def test_every_point_is_read_against_its_machines_floors():
    """Rows with efficiency columns show them in the points table; run.json's floors are listed
    per host in the environment (one line each, or the reason there are none)."""
    import pandas as pd

    from commbench.analysis.report.page import environment_table, points_table

    rows = pd.DataFrame([{"run": "r", "collective": "all_reduce", "backend": "mpi", "algorithm": "native",
                          "dtype": "float32", "op": "sum", "mode": "out-of-place", "world_size": 2, "size_bytes": 8,
                          "time_us": 0.2, "time_us_p99": 0.3, "algbw_gbps": 0.04, "busbw_gbps": 0.04, "samples": 10,
                          "wrong": 0, "latency_efficiency": 0.31, "bandwidth_efficiency": 0.004}])
    table = points_table(rows)
    assert "<th>floor / time</th>" in table and "<th>busbw / copy rate</th>" in table and ">0.31<" in table
    assert "floor / time" not in points_table(rows.drop(columns=["latency_efficiency", "bandwidth_efficiency"]))
    env = environment_table({"floors": {"vm": {"handoff_us": 0.058, "exchange_us": 0.031, "copy_GBps": 10.8},
                                        "other": "the floor probe needs two cores"}}, "r")
    assert "floor: vm" in env and "hand-off 0.058 µs, 8 B exchange 0.031 µs, copy 10.8 GB/s" in env
    assert "the floor probe needs two cores" in env
