"""`commbench compare --html` (commbench/analysis/report/trend.py): the x axis is the baseline then
every candidate in time order (numbered), each point's line the side's figure with its 95% band
(none with one job), markers coloured by the verdict of that candidate, a point a candidate did not
measure left out of its line; the verdict table sorted worst first; every string from a file
escaped on the page."""

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from synthetic_runs import write_run

from commbench.analysis.compare import compare, point_name
from commbench.analysis.report.page import esc
from commbench.analysis.report.trend import COLOURS, SIZE_GREYS, SYMBOLS, _rgba, _steps, build_trend, history_chart, verdict_table

QUIET = [10.0, 10.15, 9.9]


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """baseline; candidate 1 the same, without its 64 KiB point; candidate 2 25% slower."""
    root = tmp_path_factory.mktemp("trend")
    base = write_run(root / "base", QUIET, seed=1)
    same = write_run(root / "same", [9.95, 10.1, 10.05], seed=2)
    rows = pd.read_csv(same / "results.csv")
    rows[rows.size_bytes != 65536].to_csv(same / "results.csv", index=False)
    slow = write_run(root / "slow", [12.4, 12.6, 12.55], seed=3)
    return compare(base, [same, slow])


def test_rgba_of_a_hex_colour():
    assert _rgba("#1f77b4", 0.15) == "rgba(31,119,180,0.15)" and _rgba("#000000", 1) == "rgba(0,0,0,1)"


def test_steps_are_the_baseline_then_the_candidates_numbered(history):
    assert _steps(history) == ["baseline: base", "1: same", "2: slow"]
    twice = compare(history.baseline, [history.candidate, history.candidate])
    assert _steps(twice) == ["baseline: base", "1: slow", "2: slow"]  # a name that repeats stays apart


def test_a_line_and_a_band_per_size_markers_coloured_by_verdict(history):
    fig = history_chart(history, history.verdicts)
    assert fig.layout.title.text == "all_reduce · mpi native · float32 sum · out-of-place · 2 ranks"
    assert fig.layout.yaxis.type == "log"
    bands, lines = fig.data[0::2], fig.data[1::2]
    assert [t.name for t in lines] == ["1024 B", "65536 B"]
    small = next(v for v in history.verdicts if v.key["size_bytes"] == 1024)
    levels = [small.baseline_level] + [h["level"] for h in small.history]
    assert list(lines[0].x) == ["baseline: base", "1: same", "2: slow"]
    assert list(lines[0].y) == [lv[0] for lv in levels]
    assert list(lines[0].marker.color) == [COLOURS[None], COLOURS["unchanged"], COLOURS["regression"]]
    assert list(lines[0].marker.symbol) == [SYMBOLS[None], SYMBOLS["unchanged"], SYMBOLS["regression"]]
    # colour is the verdicts' alone: the sizes' lines are greys told apart by dashes
    assert {t.line.color for t in lines} <= set(SIZE_GREYS) and len({t.line.dash for t in lines}) == len(lines)
    assert not set(SIZE_GREYS) & set(COLOURS.values())
    assert list(lines[0].text) == ["baseline", f"unchanged, ratio {small.history[0]['ratio']:.3f}",
                                   f"regression, ratio {small.history[1]['ratio']:.3f}"]
    assert list(bands[0].x) == ["baseline: base", "1: same", "2: slow", "2: slow", "1: same", "baseline: base"]
    assert list(bands[0].y) == [lv[2] for lv in levels] + [lv[1] for lv in reversed(levels)]  # high, then low back
    assert bands[0].fill == "toself" and bands[0].showlegend is False and bands[0].legendgroup == lines[0].name


def test_a_point_a_candidate_did_not_measure_is_left_out_of_its_line(history):
    big = next(v for v in history.verdicts if v.key["size_bytes"] == 65536)
    assert "level" not in big.history[0]
    line = history_chart(history, [big]).data[1]
    assert list(line.x) == ["baseline: base", "2: slow"]
    assert list(line.marker.color) == [COLOURS[None], COLOURS["regression"]]


def test_one_job_has_no_band_the_line_is_its_own_edge(tmp_path):
    base = write_run(tmp_path / "base", [10.0], seed=1)
    cand = write_run(tmp_path / "cand", [10.0], seed=2)
    cmp = compare(base, cand)
    band, line = history_chart(cmp, cmp.verdicts[:1]).data
    assert list(band.y) == list(line.y) + list(reversed(line.y))


def test_the_verdict_table_lists_the_worst_first(history):
    table = verdict_table(history)
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1])
    assert len(rows) == 2
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in rows]
    assert [c[1] for c in cells] == ["regression", "regression"]
    v = next(v for v in history.verdicts if v.key["size_bytes"] == 65536)
    big = {c[0]: c for c in cells}[esc(point_name(v.key))]
    assert big[2:8] == [f"{v.baseline_us:.2f}", f"{v.candidate_us:.2f}", f"{v.ratio:.3f}",
                        f"{v.ci_low:.3f}–{v.ci_high:.3f}", f"{v.p_value:.2g}", "3/3"]
    assert big[8] == f"- {v.history[1]['ratio']:.2f}"  # not measured by the first candidate
    assert table.count(f'style="color:{COLOURS["regression"]};font-weight:600"') == 2


def test_the_page(history, tmp_path):
    page = build_trend(history, tmp_path / "cmp.html").read_text()
    assert re.findall(r"<h2>(.*?)</h2>", page) == ["Result sets", "Context changes", "Verdicts (the last candidate)",
                                                   "History"]
    assert re.findall(r"<li>(.*?)</li>", page)[:3] == ["baseline: base", "1: same", "2: slow"]
    assert "<p>none recorded</p>" in page and f"<b>{esc(history.summary())}</b>" in page
    assert page.count('class="plotly-graph-div"') == 1  # one implementation: one chart, a line per size
    figure = json.loads(re.search(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*\{', page, re.S).group(1))
    assert [t.get("name") for t in figure if t.get("showlegend") is not False] == ["1024 B", "65536 B"]


def test_strings_from_files_are_escaped_on_the_page(history, tmp_path):
    evil = '<img src=x onerror="alert(1)">'
    cand = tmp_path / f"cand{evil.replace('/', '')}"
    shutil.copytree(history.candidate, cand)
    meta = json.loads((cand / "run.json").read_text())
    meta["rank0_environment"] = {"NCCL_ALGO": evil + "\x1b[2J"}
    (cand / "run.json").write_text(json.dumps(meta))
    cmp = compare(history.baseline, cand)
    page = build_trend(cmp, tmp_path / "evil.html").read_text()
    assert "<img" not in page and "\x1b" not in page
    assert "env NCCL_ALGO: (unset) -&gt; &lt;img src=x onerror=&quot;alert(1)&quot;&gt;\\x1b[2J" in page
    assert f"1: {esc(Path(cand).name)}" in page and "<pre>context changes, baseline -&gt; candidate:" in page
