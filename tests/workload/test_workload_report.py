"""`commbench report` on a `commbench workload` OUT folder (a real one, --no-measure with the model of a
real `model fit`): a "Workload: <name>" section whose stacked bars and table carry workload.json's
per-kind totals, one colour per kind; a bad or oversized workload.json is one line and exit 2."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import yaml
from cli_inprocess import run_cli
from workload_docs import TINY, doc

from commbench.analysis.report.workload import COLOURS, ENDS, FIGURES
from commbench.errors import BAD_INPUT, OK

FIGURE_NAMES = [name for _, name, _ in FIGURES]


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    """A workload OUT: a tiny transformer, DDP x TP 2 on 8 ranks of 2 nodes, ring and native."""
    from workload_models import fitted_model

    tmp = tmp_path_factory.mktemp("wl")
    model = fitted_model(tmp, noise=0.05)[0]  # noisy points: the model's predictions have an interval
    config = tmp / "w.yaml"
    config.write_text(yaml.safe_dump(doc(name="tiny_tp", model=dict(TINY), batch={"global": 8},
                                         parallel={"world": 8, "gpus_per_node": 4, "tp": 2, "dp_mode": "ddp"},
                                         overlap={"dp": 0.5})))
    folder = tmp / "out"
    outcome = run_cli("workload", config, "--no-measure", "--model", model, "--inter", "10,5", "-a", "ring,native",
                      "--compute-ms", 5, "--out", folder)
    outcome.assert_clean(codes=(OK,))
    return folder


def report(*paths, to):
    outcome = run_cli("report", *paths, "--output", to)
    outcome.assert_clean()
    return outcome


def _chart_data(page: str, start: int) -> list[dict]:
    """The traces of the first chart after `start`, as plotly.py embedded them."""
    at = page.index("Plotly.newPlot(", start)
    return json.JSONDecoder().raw_decode(page, page.index("[", at))[0]


def test_the_section_draws_the_totals_stacked_by_kind(out, tmp_path):
    html = tmp_path / "r.html"
    assert report(out, to=html).code == OK
    page = html.read_text()
    totals = json.loads((out / "workload.json").read_text())["totals"]
    assert '<h2 id="s-Workload-tiny_tp">Workload: tiny_tp</h2>' in page and 'href="#s-Workload-tiny_tp"' in page
    assert "Summary" not in page  # --no-measure: no runs, only the workload's section
    traces = _chart_data(page, page.index("Workload: tiny_tp</h2>"))
    traces, whiskers = traces[:2], traces[2]
    assert [t["name"] for t in traces] == ["dp", "tp"] and all(t["type"] == "bar" for t in traces)
    assert [t["marker"]["color"] for t in traces] == [COLOURS["dp"], COLOURS["tp"]]
    variants = ["mpi ring", "mpi native"]
    assert traces[0]["x"] == [f"{v}<br>{f}" for v in variants for f in FIGURE_NAMES]
    for trace in traces:
        of = {f"{t['backend']} {t['algorithm']}": t for t in totals if t["kind"] == trace["name"]}
        expected = [of[v][key] for v in variants for key, _, _ in FIGURES]
        assert trace["y"] == pytest.approx(expected)
        ring = trace["y"][:4]
        assert ring[0] is None and ring[1] > 0 and ring[2] > 0  # --no-measure; the model here and at scale
        assert trace["y"][4:] == [None] * 4  # native: measured but not modelled, and not measured here
    # the whiskers: each stack's total ("all") and its 95 % interval, for the figures the model gives
    every = {f"{t['backend']} {t['algorithm']}": t for t in totals if t["kind"] == "all"}
    assert whiskers["name"] == "95 % interval" and whiskers["error_y"]["symmetric"] is False
    for i, (v, key) in enumerate((v, key) for v in variants for key, _, _ in FIGURES):
        if v == "mpi ring" and key in ENDS:
            low, high = (every[v][e] for e in ENDS[key])
            assert low < whiskers["y"][i] < high and whiskers["y"][i] == pytest.approx(every[v][key])
            assert whiskers["error_y"]["array"][i] == pytest.approx(high - every[v][key])
            assert whiskers["error_y"]["arrayminus"][i] == pytest.approx(every[v][key] - low)
        else:  # nothing measured here, measured figures have no interval, native is not modelled
            assert whiskers["y"][i] is None
    dp, tp = traces
    assert dp["y"][3] == pytest.approx(0.5 * dp["y"][2]) and tp["y"][3] == pytest.approx(tp["y"][2])  # overlap
    table = page[page.index('<table class="workload">'):]
    table = table[:table.index("</table>")]
    cells = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table)[1:]]
    assert [c[:3] for c in cells] == [[b, a, k] for b, a in (("mpi", "ring"), ("mpi", "native"))
                                      for k in ("dp", "tp", "all")]
    ring_dp = next(t for t in totals if (t["algorithm"], t["kind"]) == ("ring", "dp"))
    assert cells[0][3] == "0.5"
    assert cells[0][8] == f"{ring_dp['predicted_ms']:.4g} [{ring_dp['predicted_low_ms']:.4g}-{ring_dp['predicted_high_ms']:.4g}]"
    assert cells[0][6].startswith("- (") and cells[0][6].endswith(" missing)")  # nothing measured
    assert "communication exposed at scale is" in page and "(mpi ring)" in page


def test_the_measured_runs_get_their_sections_and_the_workload_follows_the_summary(out, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shutil.copytree(out.parent / "truth-run", copy / "measured" / "all_reduce-4")  # a real run folder, as measured/
    html = tmp_path / "r.html"
    assert report(copy, to=html).code == OK
    headings = re.findall(r'<h2 id="[^"]*">([^<]*)</h2>', html.read_text())
    assert headings[:3] == ["Summary", "Workload: tiny_tp", "all_reduce"] and headings[-1] == "Environment"


@pytest.mark.parametrize("damage,message", [
    (lambda p: p.write_text("{"), "unreadable workload.json"),
    (lambda p: p.write_text("[]"), "workload.json is not a JSON object"),
    (lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "commbench_workload": 99})),
     "field 'commbench_workload' must be a format this commbench reads"),
    (lambda p: p.write_text(p.read_text().replace('"predicted_ms": ', '"predicted_ms": "fast", "x": ', 1)),
     "totals[0].predicted_ms must be a number"),
    (lambda p: p.write_text(p.read_text().replace('"predicted_ms": ', '"predicted_ms": NaN, "x": ', 1)),
     "totals[0].predicted_ms must be a number"),
    (lambda p: p.write_text(" " * (1 << 20) + p.read_text()), "more than the limit of 1 MiB"),
    (lambda p: (p.parent / "mix.csv").unlink(), "mix.csv: No such file"),
])
def test_a_bad_workload_json_is_one_line(out, tmp_path, monkeypatch, damage, message):
    monkeypatch.setenv("COMMBENCH_MAX_WORKLOAD_JSON_MB", "1")
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    damage(copy / "workload.json")
    outcome = report(copy, to=tmp_path / "r.html")
    assert outcome.code == BAD_INPUT and message in outcome.stderr, outcome.stderr
    assert not (tmp_path / "r.html").exists()
