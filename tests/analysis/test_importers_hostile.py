"""The importers at the trust boundary: they reject what no benchmark prints with one line naming the
line or field, exit 2 and no folder left (the time and memory that costs: tests/acceptance/);
real outputs mutated, any file and huge inputs end in a folder the loader accepts or in one line;
`import --out` is checked before anything is read. The real CLI runs in-process (tests/cli_inprocess.py)."""

from __future__ import annotations

import copy
import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_inprocess import run_cli
from conftest import DATA
from trust_sides import sides, tree  # noqa: F401 - sides: a fixture

from commbench.folder import limits
from commbench.analysis.importers import MAX_IMPORT_RANKS, max_json_values

MAX_IMPORT_POINTS, MAX_INPUT_BYTES = limits.IMPORT_POINTS.value(), limits.IMPORT_BYTES.value()
MAX_JSON_VALUES = max_json_values()
from commbench.folder.load import load_run
from commbench.errors import BAD_INPUT, OK

NCCL_TEXT = DATA / "nccl_tests_all_reduce_16xH100.txt"
NCCL_JSON = DATA / "nccl_tests_all_gather.json"
OSU = DATA / "osu" / "osu_allreduce_4ranks_full_validated.txt"

def _import(kind: str, content: str | bytes, *extra) -> object:
    """`commbench import KIND FILE ... --out OUT` on content in a fresh folder: the trust-boundary
    contract (exit 0 or 2, one line, no traceback), nothing changed outside OUT, and OUT either a
    folder the loader accepts (exit 0) or absent (exit 2)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src, out = root / "input.txt", root / "out"
        (src.write_bytes if isinstance(content, bytes) else src.write_text)(content)
        before = tree(root, out)
        outcome = run_cli("import", kind, src, *extra, "--out", out, cwd=root)
        outcome.assert_clean()
        assert tree(root, out) == before
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


TIME_RANGE = "expected a time in µs from 0.0001 to 1e+10"


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
     f"more than the limit of {MAX_IMPORT_POINTS:,}"),
    ("nccl-tests", report({"out_of_place": {"time": float("nan")}}), [], f"result 1: time is nan: {TIME_RANGE}"),
    ("nccl-tests", report({"out_of_place": {"time": 1}, "out_of_place_per_iter": {"times_us": [1.0, 0.0]}}), [],
     "result 1: per-iteration time is 0.0"),
    ("nccl-tests", report({"size": 1e300, "out_of_place": {"time": 1}}), [], "result 1: size is 1e+300"),
    ("nccl-tests", report({"out_of_place": {"time": 1, "nwrong": float("nan")}}), [], "result 1: #wrong is nan"),
    ("nccl-tests", '{"results": ' + "[" * 5000 + "]" * 5000 + "}", [],
     "not an nccl-tests JSON report ("),  # RecursionError, or lists of lists (TypeError) where the stack holds them
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
    """Refused with one line, exit 2 (the time and memory each costs: tests/acceptance/)."""
    outcome = _import("nccl-tests", content)
    assert outcome.code == BAD_INPUT, (name, outcome.stderr)


def test_import_checks_its_folder_before_reading(tmp_path, sides):
    base, _ = sides
    before = tree(base)
    for out, message in ((base, "already holds results (results.csv)"), ("/proc/nope", "cannot be written"),
                         (NCCL_TEXT, "is a file, not a folder"), (base / "sub", "is inside the run folder"),
                         (base.parent, "holds run folders")):
        outcome = run_cli("import", "nccl-tests", NCCL_TEXT, "--out", out, cwd=tmp_path)
        outcome.assert_clean()
        assert outcome.code == BAD_INPUT and message in outcome.stderr, outcome.stderr
    assert tree(base) == before
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "run.json").write_text(NCCL_TEXT.read_text())  # the file imported would be replaced
    outcome = run_cli("import", "nccl-tests", tmp_path / "o" / "run.json", "--out", tmp_path / "o")
    assert outcome.code == BAD_INPUT and "already holds results (run.json)" in outcome.stderr
    assert (tmp_path / "o" / "run.json").read_text() == NCCL_TEXT.read_text()

