"""The HTML report: self-contained, charts drawn in a real browser, no console errors, and no
string from a result file ever executes."""

import json
import re
import shutil

import pytest

from browser import render
from conftest import DATA, commbench, fault_env, needs_mpirun
from commbench.errors import BAD_INPUT, OK

PAYLOAD = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\"><script>document.body.setAttribute('data-pwned','2')</script>"
SAMPLES = DATA / "osu"


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, job):
    out = tmp_path_factory.mktemp("rep") / "run"
    commbench("run", "-n", 2, "--backend", "mpi", "-a", "native,ring,hierarchical", "--ranks-per-node", 1,
              "--sizes", "1K,64K,1M", "--iters", 5, "--label", "real", "--out", out, "--quiet", check_rc=OK)
    return out


def _imports(tmp_path):
    commbench("import", "osu", f"{SAMPLES}/osu_allreduce_4ranks.txt", "-n", 4, "--out", tmp_path / "osu", check_rc=OK)
    commbench("import", "nccl-tests", DATA / "nccl_tests_all_reduce_16xH100.txt", "--out", tmp_path / "nccl",
              check_rc=OK)
    return [tmp_path / "osu", tmp_path / "nccl"]


@needs_mpirun
def test_report_is_self_contained(tmp_path, real_run):
    html_file = tmp_path / "report.html"
    commbench("report", real_run, *_imports(tmp_path), "-o", html_file, check_rc=OK)
    page = html_file.read_text()
    assert not re.search(r"<script[^>]+src=", page) and "<link" not in page  # nothing fetched
    assert "Plotly" in page and page.count('class="plotly-graph-div"') >= 4
    assert "nccl-tests" in page and "osu" in page and "real" in page
    assert "all 71 points correct" not in page  # counted below instead
    rows = page.count("<tr>") + page.count('<tr class="wrong">')
    assert rows > 0


@needs_mpirun
def test_report_renders_in_chromium(chromium, tmp_path, real_run):
    html_file = tmp_path / "report.html"
    commbench("report", real_run, *_imports(tmp_path), "-o", html_file, check_rc=OK)
    dom, console = render(html_file, screenshot=tmp_path / "report.png")
    assert dom.count('class="main-svg"') >= 8  # plotly drew the charts
    assert "topology-aware vs flat ring" in dom and "each algorithm vs native" in dom
    assert not [c for c in console if "Uncaught" in c or "ERROR" in c], console
    assert (tmp_path / "report.png").stat().st_size > 20_000


def _legends(dom: str) -> list[list[str]]:
    """The legend entries of each chart plotly drew, in order."""
    return [re.findall(r'class="legendtext"[^>]*>([^<]*)<', c) for c in _charts(dom)]


def _charts(dom: str) -> list[str]:
    return dom.split("<body", 1)[1].split("plotly-graph-div")[1:]


def _line_colours(chart: str) -> list[str]:
    """The stroke colour of each line a chart drew (not its legend's samples)."""
    return re.findall(r'<g class="lines"><path class="js-line"[^>]*style="[^"]*stroke: (rgb\([^)]*\))', chart)


def test_two_sweeps_of_one_suite_are_two_series_in_chromium(chromium, tmp_path):
    """Two `sweep ci` folders both hold a run labelled "native": two lines, two legend names, two
    colours (each series in one colour in every chart), never one line zig-zagging between them."""
    from synthetic_runs import write_run

    write_run(tmp_path / "ci_a" / "native", [10.0, 11.0, 12.0], run_id="ra")
    write_run(tmp_path / "ci_b" / "native", [40.0, 41.0, 42.0], run_id="rb", seed=1)
    html_file = tmp_path / "report.html"
    commbench("report", tmp_path / "ci_a", tmp_path / "ci_b", "-o", html_file, check_rc=OK)
    dom, console = render(html_file, screenshot=tmp_path / "two.png")
    assert not [c for c in console if "Uncaught" in c or "ERROR" in c], console
    legends = _legends(dom)
    assert legends == [["ci_a/native", "ci_b/native"]] * 2  # bandwidth and latency
    colours = [_line_colours(chart) for chart in _charts(dom)]
    assert len(colours[0]) == 2 and len(set(colours[0])) == 2, colours  # two lines, apart
    assert colours[0] == colours[1]  # the same series, the same colour in both charts
    page = html_file.read_text()
    summary = page.split('<table class="summary">')[1].split("</table>")[0]
    assert re.findall(r"<tr><td>(.*?)</td>", summary) == ["ci_a/native", "ci_b/native"]
    assert re.findall(r"<h3>(.*?)</h3>", page) == ["ci_a/native", "ci_b/native"]
    assert "every series: mpi native · float32 sum · out-of-place · 2 ranks" in page


@needs_mpirun
def test_two_real_sweeps_of_one_suite_are_two_series_in_chromium(chromium, job, tmp_path):
    """The same through `commbench sweep`, twice, as a user compares two sweeps."""
    suite = tmp_path / "s.yaml"
    suite.write_text("name: tiny\ndefaults: {backend: mpi, nprocs: 2, sizes: [1K, 64K], iters: 20}\nruns:\n"
                     "  - {label: native, collective: all_reduce, mode: out-of-place}\n")
    for name in ("base", "cand"):
        commbench("sweep", suite, "--out", tmp_path / name, "--quiet", check_rc=OK)
    html_file = tmp_path / "report.html"
    commbench("report", tmp_path / "base", tmp_path / "cand", "-o", html_file, check_rc=OK)
    dom, console = render(html_file)
    assert not [c for c in console if "Uncaught" in c or "ERROR" in c], console
    assert _legends(dom) == [["base/native", "cand/native"]] * 2
    colours = [_line_colours(chart) for chart in _charts(dom)]
    assert len(set(colours[0])) == 2 and colours[0] == colours[1]


def test_console_error_detection_works(chromium, tmp_path):
    """The check above would see a script error: prove it on a page that has one."""
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>undefinedFunction()</script></body></html>")
    _, console = render(page, budget_ms=2000)
    assert any("Uncaught" in c for c in console), console


@needs_mpirun
def test_wrong_points_are_red(job, tmp_path):
    out = tmp_path / "bad"
    commbench("run", "-n", 2, "--sizes", "1K", "-c", "all_reduce", "--in-place", "--iters", 2, "--out", out,
              env=fault_env(wrong=1))
    commbench("report", out, "-o", tmp_path / "r.html", check_rc=OK)
    page = (tmp_path / "r.html").read_text()
    assert '<tr class="wrong">' in page and "1 of 1 points have wrong results" in page


@needs_mpirun
def test_library_choice_column_when_a_run_recorded_one(tmp_path, real_run):
    """--nccl-tuning rows name NCCL's choice: the table shows the column only then, escaped."""
    import pandas as pd

    commbench("report", real_run, "-o", tmp_path / "plain.html", check_rc=OK)
    assert "library&#x27;s choice" not in (tmp_path / "plain.html").read_text()
    chosen = tmp_path / "chosen"
    shutil.copytree(real_run, chosen)
    rows = pd.read_csv(chosen / "results.csv")
    rows["library_choice"] = ["RING/LL128, TREE/LL"] + [PAYLOAD] + [""] * (len(rows) - 2)
    rows.to_csv(chosen / "results.csv", index=False)
    commbench("report", chosen, "-o", tmp_path / "chosen.html", check_rc=OK)
    page = (tmp_path / "chosen.html").read_text()
    assert "<th>library&#x27;s choice</th>" in page and ">RING/LL128, TREE/LL</td>" in page
    assert "&lt;img src=x onerror" in page and "<img src=x" not in page


@needs_mpirun
def test_script_injection_never_executes(chromium, tmp_path, real_run):
    """Payloads in the label, hostnames, environment, command line, dtype and folder name."""
    evil = tmp_path / f"run{PAYLOAD.replace('/', '')}"
    shutil.copytree(real_run, evil)
    meta = json.loads((evil / "run.json").read_text())
    meta["label"] = PAYLOAD
    meta["ranks"][0]["hostname"] = PAYLOAD
    meta["environment"] = {"NCCL_ALGO": PAYLOAD}
    meta["command_line"] = ["commbench", PAYLOAD]
    (evil / "run.json").write_text(json.dumps(meta))
    csv = (evil / "results.csv").read_text().replace("float32", PAYLOAD.replace(",", ";").replace('"', "'"), 1)
    (evil / "results.csv").write_text(csv)
    html_file = tmp_path / "evil.html"
    commbench("report", evil, "-o", html_file, check_rc=OK)
    page = html_file.read_text()
    assert "&lt;img src=x onerror" in page
    dom, console = render(html_file)
    assert "data-pwned" not in dom.split("<body", 1)[1].split(">", 1)[0]
    assert dom.count('class="main-svg"') >= 4


@pytest.mark.parametrize("csv,message", [
    ("run_id,collective\nx,all_reduce\n", "missing columns"),
    ("", "unreadable results"),
    ("\x00\x01garbage\n\"unterminated", "unreadable results"),
])
def test_malformed_results_exit_2(tmp_path, csv, message):
    d = tmp_path / "r"
    d.mkdir()
    (d / "results.csv").write_text(csv)
    proc = commbench("report", d, "-o", tmp_path / "x.html")
    assert proc.returncode == BAD_INPUT and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.html").exists()


def test_repeated_run_is_charted_by_its_median_job(tmp_path):
    """A folder of 3 jobs (--repeat 3): the table lists every job's row, a chart draws one point per
    size (the median job's); a folder without a `job` column (older, one job) still reports."""
    from commbench.folder.load import load_runs
    from commbench.analysis.report.charts import median_job
    from synthetic_runs import drop_job_column, write_run

    run = write_run(tmp_path / "rep", [10.0, 30.0, 20.0])
    rows, _ = load_runs([run])
    one = median_job(rows)
    assert len(rows) == 6 and sorted(one.job) == [3, 3]  # the job of median 20
    commbench("report", run, "-o", tmp_path / "r.html", check_rc=OK)
    page = (tmp_path / "r.html").read_text()
    assert "<th>job</th>" in page and page.count('<td class="num" data-v="3">3</td>') >= 2
    commbench("report", drop_job_column(write_run(tmp_path / "old", [10.0])), "-o", tmp_path / "old.html", check_rc=OK)
    assert "<th>job</th>" not in (tmp_path / "old.html").read_text()


def test_compare_page_escapes_and_renders(chromium, tmp_path):
    """compare --html: a payload in the candidate's environment is shown as text; the history draws."""
    from synthetic_runs import write_run

    base = write_run(tmp_path / "base", [10.0, 10.1, 9.9])
    cand = write_run(tmp_path / "cand", [10.0, 10.1, 9.9], seed=1, meta={"rank0_environment": {"NCCL_ALGO": PAYLOAD}})
    html_file = tmp_path / "cmp.html"
    proc = commbench("compare", base, cand, "--html", html_file, check_rc=OK)
    assert "env NCCL_ALGO: (unset) -> <img" in proc.stdout  # the terminal gets the text as it is
    page = html_file.read_text()
    assert "&lt;img src=x onerror" in page and "<img src=x" not in page
    dom, console = render(html_file)
    assert "data-pwned" not in dom.split("<body", 1)[1].split(">", 1)[0]
    assert dom.count('class="main-svg"') >= 1 and not [c for c in console if "Uncaught" in c]
