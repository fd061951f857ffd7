"""Issue 20 for the regression gate, the importers and the outputs: compare's math holds for
anything a valid folder can hold and its exit codes stay apart (0 / 1 regression / 2 input / 3
crash); every writer checks its output before any work and never replaces an input; the importers
reject what no benchmark prints with one line naming the line or field (the time and memory that
costs: benchmarks/hostile_inputs.py); strings from files are escaped in every output (text
printable, JSON strict, markdown without injected markup, HTML escaped). Property tests run the
real CLI in-process (tests/cli_inprocess.py)."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import re
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_inprocess import run_cli
from conftest import DATA
from synthetic_runs import write_run

from commbench.analysis import compare as cmp_module
from commbench.analysis.importers import MAX_IMPORT_POINTS, MAX_IMPORT_RANKS, MAX_INPUT_BYTES, MAX_JSON_VALUES
from commbench.analysis.load import load_run
from commbench.analysis.verdicts import judge, level
from commbench.errors import BAD_INPUT, FAILED, INTERNAL, InputError, OK

NCCL_TEXT = DATA / "nccl_tests_all_reduce_16xH100.txt"
NCCL_JSON = DATA / "nccl_tests_all_gather.json"
OSU = DATA / "osu" / "osu_allreduce_4ranks_full_validated.txt"
QUIET = [10.0, 10.15, 9.9]
MARKDOWN_SPECIALS = "[]()!<>`*_|"


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    root = tmp_path_factory.mktemp("sides")
    return write_run(root / "base", QUIET, seed=1), write_run(root / "cand", [9.95, 10.1, 10.05], seed=2)


def _tree(root: Path, skip: Path | None = None) -> dict:
    """Every entry under root (except skip and what is below it): folders, and files by content."""
    out = {}
    for p in root.rglob("*"):
        if skip is not None and (p == skip or skip in p.parents):
            continue
        out[str(p)] = hashlib.sha1(p.read_bytes()).hexdigest() if p.is_file() else "folder"
    return out


# --- the importers ------------------------------------------------------------------------------------

def _import(kind: str, content: str | bytes, *extra) -> object:
    """`commbench import KIND FILE ... --out OUT` on content in a fresh folder: the trust-boundary
    contract (exit 0 or 2, one line, no traceback), nothing changed outside OUT, and OUT either a
    folder the loader accepts (exit 0) or absent (exit 2)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src, out = root / "input.txt", root / "out"
        (src.write_bytes if isinstance(content, bytes) else src.write_text)(content)
        before = _tree(root, out)
        outcome = run_cli("import", kind, src, *extra, "--out", out, cwd=root)
        outcome.assert_clean()
        assert _tree(root, out) == before
        if outcome.code == OK:
            rows, _ = load_run(out, samples=True)
            assert len(rows) and (rows.time_us > 0).all()
        else:
            assert not out.exists()
        return outcome


def _real(path: Path, keep_results: int) -> str:
    """A real output with only its first keep_results result lines (fewer rows to write per example)."""
    kept, results = [], 0
    for line in path.read_text().splitlines(keepends=True):
        is_result = line.split()[:1] != [] and line.split()[0].isdigit()
        results += is_result
        if not is_result or results <= keep_results:
            kept.append(line)
    return "".join(kept)


HOSTILE = ["nan", "NaN", "inf", "-inf", "0", "0.0", "-1", "-0", "1e400", "1e20", "99999999999999999999999", "N/A", "",
           "x", "\x1b[31m", "\u202e", "1_000", "0x10", "\u00b2", "\u0663", "1.5", "8"]
edits = st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(HOSTILE) | st.text(max_size=6)), min_size=1,
                 max_size=4)


def _mutate(text: str, changes, cut: int | None) -> str:
    """text with some of its words replaced, then cut at a position (a file cut short)."""
    tokens = re.split(r"(\s+)", text)
    words = [i for i, t in enumerate(tokens) if t and not t.isspace()]
    for k, new in changes:
        tokens[words[k % len(words)]] = new
    text = "".join(tokens)
    return text if cut is None else text[:cut % (len(text) + 1)]


@settings(max_examples=60, deadline=None)
@given(edits, st.none() | st.integers(0, 10_000))
def test_fuzz_nccl_tests_text(changes, cut):
    _import("nccl-tests", _mutate(_real(NCCL_TEXT, 4), changes, cut))


@settings(max_examples=60, deadline=None)
@given(edits, st.none() | st.integers(0, 10_000))
def test_fuzz_osu_text(changes, cut):
    _import("osu", _mutate(_real(OSU, 4), changes, cut), "-n", "4")


def _paths(doc, prefix=()):
    yield prefix
    children = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in children:
        yield from _paths(value, (*prefix, key))


json_values = st.sampled_from([None, True, 0, -1, 0.0, 2**70, 1e308, float("nan"), float("inf"), "nan", "8", "",
                               "\x1b[2J", [], {}, [1.5, -1], {"time": 0}])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10_000), json_values), min_size=1, max_size=3), st.booleans())
def test_fuzz_nccl_tests_json(changes, as_text):
    """The real report with values replaced anywhere in its tree (or, as_text, its text mutated)."""
    doc = json.loads(NCCL_JSON.read_text())
    if as_text:
        _import("nccl-tests", _mutate(json.dumps(doc), [(k, str(v)) for k, v in changes], None))
        return
    for k, value in changes:
        paths = [p for p in _paths(doc) if p]
        *parent, key = paths[k % len(paths)]
        target = doc
        for step in parent:
            target = target[step]
        target[key] = copy.deepcopy(value)  # never the same list twice: no cycle
    _import("nccl-tests", json.dumps(doc))


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=300) | st.binary(max_size=300), st.sampled_from(["nccl-tests", "osu"]))
def test_fuzz_any_file(content, kind):
    _import(kind, content, *(["-n", "4"] if kind == "osu" else []))


TIME_RANGE = "expected a time in µs, > 0 and at most 1e+10"


def nccl(time="1", bw="0", wrong="0", size="8 2", dtype="float") -> str:
    """nccl-tests text: one device line, one result line (line 3)."""
    return ("# all_reduce_perf\n#  Rank  0 Group  0 Pid 1 on h device  0 [0000:04:00] GPU\n"
            f"{size} {dtype} sum -1 {time} {bw} 0 {wrong} 1.0 0 0 0\n")


# the table header of older nccl-tests: an `error` column (the largest difference) instead of #wrong
OLD_HEADER = "#  size  count  type  redop  root  time  algbw  busbw  error  time  algbw  busbw  error\n"


def report(entry: dict, **result) -> str:
    """An nccl-tests JSON report of one result: size 8, 2 floats, sum, then entry's fields."""
    fields = {"size": 8, "count": 2, "type": "float", "redop": "sum", **entry}
    return json.dumps({"args": ["all_reduce_perf"], "config": {"devices": [{}]}, "results": [fields], **result})


def osu(line: str, title: str = "Allreduce") -> str:
    """OSU -f output: header and one result line (line 3)."""
    return (f"# OSU MPI {title} Latency Test\n"
            "# Size  Avg Latency(us)  Min Latency(us)  Max Latency(us)  Iterations  Validation\n" + line + "\n")


@pytest.mark.parametrize("kind,content,extra,message", [
    ("nccl-tests", nccl(time="nan"), [], f"line 3: time is 'nan': {TIME_RANGE}"),
    ("nccl-tests", nccl(time="0"), [], f"line 3: time is '0': {TIME_RANGE}"),
    ("nccl-tests", nccl(time="-3.5"), [], "line 3: time is '-3.5'"),
    ("nccl-tests", nccl(time="inf"), [], "line 3: time is 'inf'"),
    ("nccl-tests", nccl(time="2e10"), [], "line 3: time is '2e10'"),
    ("nccl-tests", nccl(bw="-2"), [], "line 3: algbw is '-2': expected a finite number >= 0"),
    ("nccl-tests", nccl(wrong="x"), [], "line 3: #wrong is 'x'"),
    ("nccl-tests", nccl(size="0 0"), [], "no result lines found in the nccl-tests output (only 1 of size 0, which "
                                         "measure nothing)"),
    ("nccl-tests", nccl(wrong="-1"), [], "line 3: #wrong is '-1': expected a count of wrong elements"),
    ("nccl-tests", nccl(wrong="nan"), [], "line 3: #wrong is 'nan'"),
    ("nccl-tests", OLD_HEADER + nccl(wrong="inf"), [], "line 4: error is 'inf': expected a count of wrong elements, "
                                                      "nccl-tests' older error (a number >= 0) or N/A"),
    ("nccl-tests", OLD_HEADER + nccl(wrong="-1e-07"), [], "line 4: error is '-1e-07'"),
    ("nccl-tests", report({"size": 0, "out_of_place": {"time": 1}}), [], "holds no results (only 1 of size 0"),
    ("nccl-tests", nccl(size=f"{2**41} 2"), [], f"line 3: size is '{2**41}'"),
    ("nccl-tests", nccl(size="8 9"), [], "line 3: count is '9': expected a whole number from 0 to 8"),
    ("nccl-tests", nccl(dtype="fl\x1boat"), [], "line 3: type is 'fl\\x1boat': expected a name"),
    ("nccl-tests", nccl() + nccl().splitlines(keepends=True)[2] * (MAX_IMPORT_POINTS // 2), [],
     f"more than {MAX_IMPORT_POINTS} results"),
    ("nccl-tests", report({"out_of_place": {"time": float("nan")}}), [], f"result 1: time is nan: {TIME_RANGE}"),
    ("nccl-tests", report({"out_of_place": {"time": 1}, "out_of_place_per_iter": {"times_us": [1.0, 0.0]}}), [],
     "result 1: per-iteration time is 0.0"),
    ("nccl-tests", report({"size": 1e300, "out_of_place": {"time": 1}}), [], "result 1: size is 1e+300"),
    ("nccl-tests", report({"out_of_place": {"time": 1, "nwrong": float("nan")}}), [], "result 1: #wrong is nan"),
    ("nccl-tests", '{"results": ' + "[" * 5000 + "]" * 5000 + "}", [],
     "not an nccl-tests JSON report (RecursionError"),
    ("nccl-tests", json.dumps({"results": [1.5] * (MAX_JSON_VALUES + 2)}), [],
     f"more than {MAX_JSON_VALUES} JSON values"),
    ("osu", osu("4  nan  1.0  2.0  100  Pass"), ["-n", "4"], f"line 3: Avg Latency(us) is 'nan': {TIME_RANGE}"),
    ("osu", osu("4  -1  1.0  2.0  100  Pass"), ["-n", "4"], "line 3: Avg Latency(us) is '-1'"),
    ("osu", osu("4  1.0  0  2.0  100  Pass"), ["-n", "4"], "line 3: Min Latency(us) is '0'"),
    ("osu", osu("4  1.0  1.0  2.0  0  Pass"), ["-n", "4"], "line 3: Iterations is '0'"),
    ("osu", osu("4  1.0  1.0  2.0  10  Maybe"), ["-n", "4"], "line 3: Validation is 'Maybe': expected Pass or Fail"),
    ("osu", osu("2097152  1.0  1.0  2.0  10  Pass", "Allgather"), ["-n", str(2**20)],
     "line 3: Size x 1048576 ranks is 2199023255552: expected a whole number from 1 to 1099511627776"),
    ("osu", "# OSU MPI Allreduce Latency Test\n# Size" + "  a" * 2000 + "\n", ["-n", "4"],
     "line 2: longer than 4096 characters: not OSU output"),
    ("osu", "# OSU MPI Allreduce Latency Test\n# Size  Latency\n4  1.0\n", ["-n", "4"],
     "line 2: header '# Size  Latency' lacks the Size and Avg Latency(us) columns"),
    ("osu", OSU.read_text(), ["-n", "1e20"], "Invalid value for '-n' / '--nprocs'"),
    ("osu", OSU.read_text(), ["-n", str(10**20)],
     f"--nprocs {10**20}: give the OSU run's number of ranks, 1 to {MAX_IMPORT_RANKS}"),
    ("osu", OSU.read_text(), ["-n", "0"], "--nprocs 0: give the OSU run's number of ranks"),
])
def test_importers_reject_what_no_benchmark_prints(kind, content, extra, message):
    outcome = _import(kind, content, *extra)
    assert outcome.code == BAD_INPUT and message in outcome.stderr, outcome.stderr


@pytest.mark.parametrize("name,content", [
    ("over the limit", "#" * (MAX_INPUT_BYTES + 1)),
    ("unclosed device brackets", "#  Rank  0 Group  0 Pid 1 on h device  0 [" * (MAX_INPUT_BYTES // 50)),  # one line
    ("short lines", "ab\n" * (MAX_INPUT_BYTES // 3)),
    ("result lines", nccl() + nccl().splitlines(keepends=True)[2] * (MAX_INPUT_BYTES // 40)),
    ("nesting", "{\"results\": " + "[" * (MAX_INPUT_BYTES // 3) + "]" * (MAX_INPUT_BYTES // 3) + "}"),
    ("binary", bytes(range(256)) * (MAX_INPUT_BYTES // 256)),
])
def test_huge_inputs_end_in_one_line(name, content):
    """Refused with one line, exit 2 (the time and memory each costs: benchmarks/hostile_inputs.py)."""
    outcome = _import("nccl-tests", content)
    assert outcome.code == BAD_INPUT, (name, outcome.stderr)


def test_import_checks_its_folder_before_reading(tmp_path, sides):
    base, _ = sides
    before = _tree(base)
    for out, message in ((base, "already holds results (results.csv)"), ("/proc/nope", "cannot be written"),
                         (NCCL_TEXT, "is a file, not a folder"), (base / "sub", "is inside the run folder"),
                         (base.parent, "holds run folders")):
        outcome = run_cli("import", "nccl-tests", NCCL_TEXT, "--out", out, cwd=tmp_path)
        outcome.assert_clean()
        assert outcome.code == BAD_INPUT and message in outcome.stderr, outcome.stderr
    assert _tree(base) == before
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "run.json").write_text(NCCL_TEXT.read_text())  # the file imported would be replaced
    outcome = run_cli("import", "nccl-tests", tmp_path / "o" / "run.json", "--out", tmp_path / "o")
    assert outcome.code == BAD_INPUT and "already holds results (run.json)" in outcome.stderr
    assert (tmp_path / "o" / "run.json").read_text() == NCCL_TEXT.read_text()


# --- the writers of report, compare and topo-compare --------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["compare", "{base}", "{cand}", "-o", "/proc/nope.txt"], "-o '/proc/nope.txt' cannot be written"),
    (["compare", "{base}", "{cand}", "-o", "{cand}/results.csv"], "is one of the inputs"),
    (["compare", "{base}", "{cand}", "--html", "{base}/run.json"], "is one of the inputs"),
    (["compare", "{base}", "{cand}", "-o", "{tmp}/x", "--html", "{tmp}/x"], "-o and --html name the same file"),
    (["compare", "{base}", "{cand}", "-o", "{tmp}"], "is a folder"),
    (["report", "{base}", "-o", "{base}/results.csv"], "-o '{base}/results.csv' is one of the inputs"),
    (["report", "{base}", "-o", "/proc/x.html"], "cannot be written"),
    (["report", "{base}", "-o", "{tmp}/no/such/r.html"], "does not exist"),
    (["topo-compare", "{base}", "--csv", "{base}/results.csv"], "--csv '{base}/results.csv' is one of the inputs"),
    (["topo-compare", "{base}", "--csv", "/proc/x.csv"], "cannot be written"),
])
def test_writers_check_their_output_first_and_never_replace_an_input(tmp_path, sides, args, message):
    base, cand = sides
    fill = {"base": base, "cand": cand, "tmp": tmp_path}
    before = _tree(base.parent)
    outcome = run_cli(*(a.format(**fill) for a in args))
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and message.format(**fill) in outcome.stderr, outcome.stderr
    assert outcome.stdout == "" and _tree(base.parent) == before


# --- compare: math and exit codes ----------------------------------------------------------------------

def test_verdict_math_guards_its_callers():
    for bad in ([10.0, 0.0, 10.0], [10.0, -1.0, 9.0], [10.0, np.nan, 9.0], [np.inf, 1.0, 1.0], []):
        with pytest.raises(InputError, match="job medians must be one or more finite times > 0"):
            judge(np.array(bad, float), np.array(QUIET), 0.05)
        with pytest.raises(InputError, match="finite times > 0"):
            level(np.array(bad, float))
    flat = np.array([10.0, 10.0, 10.0])
    j = judge(flat, flat, 0.05)
    assert (j.verdict, j.ratio, j.ci_low, j.ci_high, j.p_value) == ("unchanged", 1.0, 1.0, 1.0, 1.0)
    assert judge(flat, np.array([10.0, 10.0, 10.5]), 0.05).verdict in ("unchanged", "inconclusive")
    assert level(np.array([5.0])) == (pytest.approx(5.0), None, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning on stderr
        far = judge(np.array([1e-300, 1.1e-300, 1e-300]), np.array([1e300, 1.1e300, 1e300]), 0.05)
    assert far.verdict == "regression" and far.ratio == float("inf")


def _strict_json(text: str):
    def refuse(name):
        raise AssertionError(f"bare {name} in JSON")
    return json.loads(text, parse_constant=refuse)


def test_identical_folders_zero_spread_and_one_sided_points(tmp_path):
    base = write_run(tmp_path / "base", [10.0, 10.0, 10.0], noise=0.0)
    cand = write_run(tmp_path / "cand", [10.0, 10.0, 10.0], noise=0.0, seed=3)
    outcome = run_cli("compare", base, cand, "--format", "json")
    outcome.assert_clean(codes=(OK,))
    doc = _strict_json(outcome.stdout)
    assert {p["verdict"] for p in doc["points"]} == {"unchanged"} and all(p["p_value"] == 1.0 for p in doc["points"])
    one = write_run(tmp_path / "one", [10.0])
    rows = (one / "results.csv").read_text().splitlines()
    (one / "results.csv").write_text("\n".join(rows[:-1]) + "\n")  # its 64 KiB point: baseline only
    outcome = run_cli("compare", base, one)
    assert outcome.code == OK and "missing in candidate: all_reduce native mpi float32 sum out-of-place 65536 B x2" \
        in outcome.stdout
    doc = _strict_json(run_cli("compare", base, one, "--format", "json").stdout)
    assert doc["points"][0]["ci_low"] is None and doc["points"][0]["history"][0]["level"][1] is None


def test_ratio_past_float_range_is_null_in_json(tmp_path):
    base = write_run(tmp_path / "base", [1e-4, 1.02e-4, 0.99e-4], noise=0.0)
    cand = write_run(tmp_path / "cand", [1e306, 1.02e306, 0.99e306], noise=0.0)
    outcome = run_cli("compare", base, cand, "--format", "json")
    assert outcome.code == FAILED and outcome.stderr == ""
    doc = _strict_json(outcome.stdout)
    assert doc["points"][0]["verdict"] == "regression" and doc["points"][0]["ratio"] is None


def test_exit_codes_stay_apart(tmp_path, sides, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the crash below leaves its traceback
    base, cand = sides
    assert run_cli("compare", base, cand).code == OK
    slow = write_run(tmp_path / "slow", [12.4, 12.6, 12.55], seed=3)
    assert run_cli("compare", base, slow).code == FAILED
    assert run_cli("compare", base, tmp_path / "missing").code == BAD_INPUT

    def crash(*args, **kwargs):
        raise ZeroDivisionError("float division by zero")
    monkeypatch.setattr(cmp_module, "compare", crash)
    outcome = run_cli("compare", base, cand)
    outcome.assert_clean(codes=(INTERNAL,))
    assert "internal error: ZeroDivisionError" in outcome.stderr


# --- strings from files in every output ------------------------------------------------------------------

def _unescaped_markdown(segment: str) -> str:
    """The characters of segment that markdown would read as markup (backslash escapes removed)."""
    return "".join(c for c in re.sub(r"\\.", "", segment) if c in MARKDOWN_SPECIALS)


def _crafted(sides_root: Path, tag: str, s: str) -> Path:
    """A copy of the candidate with s (between markers QX .. QY) as its label, MPI version, host and
    an environment value, in a folder whose name is s too."""
    name = "c-" + re.sub(r"[/\x00]", "", s)[:40].encode("utf-8")[:120].decode("utf-8", "ignore")
    folder = sides_root / tag / name
    shutil.copytree(sides_root / "cand", folder)
    meta = json.loads((folder / "run.json").read_text())
    value = f"QX{s}QY"
    meta.update(label=value, versions={**meta["versions"], "mpi_library": value},
                ranks=[{"hostname": value, "rank": 0}, {"hostname": value, "rank": 1}],
                rank0_environment={**meta["rank0_environment"], "NCCL_ALGO": value})
    (folder / "run.json").write_text(json.dumps(meta))
    return folder


def _check_outputs(base: Path, cand: Path) -> None:
    from markdown_it import MarkdownIt

    result = cmp_module.compare(base, cand)
    text = cmp_module.to_text(result)
    assert all(c.isprintable() or c == "\n" for c in text), ascii(text)
    assert "QX" in text
    doc = _strict_json(cmp_module.to_json(result))
    assert doc["candidate"] == str(cand)
    markdown = cmp_module.to_markdown(result)
    assert all(c.isprintable() or c == "\n" for c in markdown)
    segments = re.findall(r"QX(.*?)QY", markdown)
    assert segments and not any(map(_unescaped_markdown, segments)), segments
    page = MarkdownIt("commonmark").enable("table").render(markdown)
    assert not re.search(r"<(a|img|code|em|script|iframe)\b", page), page
    assert page.count("<strong>") == 1 and page.count("<tr>") == len(result.verdicts) + 1
    assert all(row.count("<td") == 9 for row in re.findall(r"<tr>.*?</tr>", page, re.S)[1:])


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_fuzz_crafted_strings_in_compare_formats(sides, s):
    base, _ = sides
    tag = tempfile.mkdtemp(dir=base.parent)
    _check_outputs(base, _crafted(base.parent, Path(tag).name, s))


json_any = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                    max_size=3), max_leaves=8)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.sampled_from(["job", "points", "hosts", "background_cores", "cpu_count"]), json_any),
       json_any, st.sampled_from(["versions", "world_size", "launcher", "launcher_args", "rank0_environment"]))
def test_fuzz_run_json_facts_that_compare_reads(sides, job, value, field):
    """Whatever run.json says about its jobs and context: a verdict (strict JSON) or one line."""
    base, _ = sides
    folder = Path(tempfile.mkdtemp(dir=base.parent)) / "cand"
    shutil.copytree(base.parent / "cand", folder)
    meta = json.loads((folder / "run.json").read_text())
    meta["jobs"] = [job, *meta["jobs"]]
    meta[field] = {"mpi_library": value, "NCCL_ALGO": value} if field.endswith(("versions", "environment")) else value
    (folder / "run.json").write_text(json.dumps(meta))
    outcome = run_cli("compare", base, folder, "--format", "json")
    outcome.assert_clean(codes=(OK, FAILED, BAD_INPUT))
    if outcome.code != BAD_INPUT:
        _strict_json(outcome.stdout)


HOSTILE_LABEL = "\x1b]8;;http://e\x07[l](http://e) ![i](x) <img src=x onerror=alert(1)>\u202e`*_|"  # < 80 chars


def test_crafted_strings_through_the_cli_and_html_pages(tmp_path, sides):
    base, _ = sides
    cand = _crafted(base.parent, "cli", HOSTILE_LABEL)
    _check_outputs(base, cand)
    for fmt in ("text", "markdown", "json", "junit"):
        outcome = run_cli("compare", base, cand, "--format", fmt, "-o", tmp_path / f"out.{fmt}",
                          "--html", tmp_path / f"page.{fmt}.html")
        outcome.assert_clean()
        assert "\x1b" not in outcome.stdout + outcome.stderr + (tmp_path / f"out.{fmt}").read_text()
        assert (tmp_path / f"out.{fmt}").read_text() == outcome.stdout
    from xml.etree import ElementTree as ET
    ET.parse(tmp_path / "out.junit")  # valid XML: no control character in it
    outcome = run_cli("report", base, cand, "-o", tmp_path / "r.html")
    outcome.assert_clean(codes=(OK,))
    for page in (tmp_path / "r.html", tmp_path / "page.text.html"):
        html = page.read_text()
        assert "<img src=x" not in html and "\x1b" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_run_console_escapes_markup_and_control_characters():
    from rich.console import Console

    from commbench.run.console import Renderer, comparison_table
    import pandas as pd

    evil = "\x1b[2J[bold red]owned[/] \u202e"
    renderer = Renderer()
    renderer.console = Console(file=io.StringIO(), width=300, highlight=False)
    point = {"collective": "all_reduce", "backend": "mpi", "algorithm": "ring", "dtype": "float32", "op": "sum",
             "in_place": False}
    renderer({"event": "ready", "world_size": 2, "nodes": 1, "hosts": [evil, "node-b"], "total": 1, "note": evil})
    renderer({"event": "skip", "point": point, "reason": evil})
    renderer({"event": "warning", "text": evil})
    renderer({"event": "done"})
    table = comparison_table(pd.DataFrame([{"collective": evil, "placement": "block", "nodes": 2, "ranks_per_node": 1,
                                            "size_bytes": 1024, "time_us:ring": 10.0, "time_us:hierarchical": 5.0,
                                            "speedup:hierarchical": 2.0}]))
    renderer.console.print(table)
    shown = renderer.console.file.getvalue()
    assert "\x1b" not in shown and "\u202e" not in shown
    assert shown.count("\\x1b[2J[bold red]owned[/] \\u202e") == 5, shown
