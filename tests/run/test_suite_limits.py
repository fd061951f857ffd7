"""Limits of a suite file decided up front (issue 20, classes 4, 6 and 9): a suite is bounded
before any work starts (its size, nesting, runs, sizes; no YAML anchors, no constructors); what is
beyond a limit is one line, exit 2, naming the limit, before the time and memory it would have
cost (bounded in the acceptance suite, tests/acceptance/test_unbounded_work.py). Property-based: suite YAML through the real CLI in
this process (tests/cli_inprocess.py), launching nothing (tests/limits_fixtures.py)."""

import tempfile
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from cli_inprocess import run_cli
from commbench.errors import BAD_INPUT, InputError
from commbench.options import MAX_ITERS, MAX_NPROCS, MAX_SIZES, SUITE_FIELDS
from commbench.run.suites import MAX_DEPTH, MAX_RUNS, MAX_SUITE_BYTES, SUITES_DIR, load_suite
from limits_fixtures import FUZZ, launch_nothing, scalar, snapshot, value  # noqa: F401


# --- suites ---------------------------------------------------------------------------------------
def _bomb(levels: int = 9) -> str:
    """The billion laughs: 9 ** levels strings from about 430 bytes."""
    lines = ['  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"  {cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "name: bomb\ndescription:\n" + "\n".join(lines) + "\nruns: [{label: x}]\n"


BAD_SUITES = [
    (_bomb(), "line 3: YAML anchors and aliases (&name, *name) are not accepted in a suite"),
    ("defaults: &d {nprocs: 2}\nruns: [{label: a}]\n", "line 1: YAML anchors and aliases"),
    ("runs: " + "[" * 50 + "]" * 50 + "\n", f"more than {MAX_DEPTH} levels of nesting"),
    ("description: " + "x" * MAX_SUITE_BYTES + "\nruns: [{}]\n", f"larger than {MAX_SUITE_BYTES // 1024} KB"),
    ("runs:\n" + "- {}\n" * (MAX_RUNS + 1), f"{MAX_RUNS + 1} runs; a suite holds at most {MAX_RUNS}"),
    ("runs: [{label: a, sizes: [" + ",".join(["8"] * (MAX_SIZES + 1)) + "]}]\n",
     f"{MAX_SIZES + 1} sizes is more than a run takes (at most {MAX_SIZES})"),
    ("runs: [{label: a, nprocs: " + "9" * 5000 + "}]\n", "not valid YAML (Exceeds the limit"),
    ("runs: [{label: a, nprocs: " + str(MAX_NPROCS + 1) + "}]\n", f"is more ranks than commbench starts (at most {MAX_NPROCS})"),
    ("runs: [{label: a, iters: 10000000}]\n", f"--iters 10000000 is more than {MAX_ITERS}"),
    ("runs: [{label: a, sizes: 2T}]\n", "size '2T' is larger than 1T"),
    ("name: ../../etc\nruns: [{label: a}]\n", "name '../../etc' must be 1-64 letters"),
    ("description: [1, 2]\nruns: [{label: a}]\n", "description must be text"),
    ("1: 2\nruns: [{label: a}]\n", "unknown top-level field '1'"),
    ("? [a]\nruns: [{label: a}]\n", "line 1: a key is a name, not a list or a mapping"),  # found by the fuzz test
    ("runs: [{label: a, ? {x: 1} : 2}]\n", "line 1: a key is a name, not a list or a mapping"),
    ("runs: [{label: a, " + "x" * 100 + ": 1}]\n", "unknown field '" + "x" * 40 + "'"),
    ("runs: [{label: a}]\ndefaults: !!python/object/apply:os.system [echo hi]\n", "not valid YAML (could not determine a constructor"),
    ("runs: [{label: a}]\n\xff", "not valid YAML ('utf-8' codec"),
]


@pytest.mark.parametrize("text,message", BAD_SUITES, ids=range(len(BAD_SUITES)))
def test_bad_suite_is_refused_up_front(tmp_path, launch_nothing, text, message):
    f, out = tmp_path / "s.yaml", tmp_path / "out"
    f.write_bytes(text.encode("latin-1") if "\xff" in text else text.encode())
    outcome = run_cli("sweep", f, "--out", out)
    outcome.assert_clean(codes=(BAD_INPUT,))
    assert message in outcome.stderr and str(f) in outcome.stderr, outcome.stderr
    assert not out.exists()


def test_alias_bomb_costs_nothing(tmp_path):
    """The bomb that took 93 s and 2.5 GB: refused while it is read, before anything is built."""
    f = tmp_path / "bomb.yaml"
    f.write_text(_bomb())
    assert len(f.read_bytes()) < 500
    tracemalloc.start()
    with pytest.raises(InputError, match="anchors and aliases"):
        load_suite(str(f))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 5e6


def test_largest_suite_file_is_read_within_bounds(tmp_path):
    """A suite file at the size limit, as many nodes as it can hold, is refused in tens of MB (the
    runs counted before any is validated; its time: tests/acceptance/test_unbounded_work.py)."""
    f = tmp_path / "flat.yaml"
    f.write_text("runs: [" + ",".join(["{}"] * ((MAX_SUITE_BYTES - 10) // 3)) + "]\n")
    assert f.stat().st_size <= MAX_SUITE_BYTES
    tracemalloc.start()
    with pytest.raises(InputError, match=f"a suite holds at most {MAX_RUNS}"):
        load_suite(str(f))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 100e6


def test_bundled_suites_fit_the_limits():
    for f in SUITES_DIR.glob("*.yaml"):
        assert f.stat().st_size < MAX_SUITE_BYTES / 16
        assert len(load_suite(f.stem).runs) <= MAX_RUNS


# --- suites, fuzzed -------------------------------------------------------------------------------
field_name = st.one_of(st.sampled_from(sorted(SUITE_FIELDS)), st.text(max_size=10))
run = st.dictionaries(field_name, value, max_size=5)
suite_doc = st.fixed_dictionaries({}, optional={
    "name": st.one_of(st.sampled_from(["ok", "../x", ""]), scalar), "description": value,
    "defaults": st.one_of(st.dictionaries(field_name, value, max_size=4), value),
    "runs": st.one_of(st.lists(run, max_size=4), value)})
SNIPPETS = ["&a ", "*a", "<<: *a\n", "[" * 12, "]", "{", "}", ": ", "\n- ", "\t", "\x00", "9" * 5000, "1e999", ".nan",
            "!!python/object/apply:os.system [x]", "nprocs: 100000\n", "sizes: [1T, 2T]\n", "repeat: 1000\n",
            "label: ../x\n", "- {}\n" * 30, "iters: 10000000\n", "'", '"', "#", "%YAML 1.1\n---\n", "? [a]\n"]
BUNDLED = sorted(SUITES_DIR.glob("*.yaml"))


def _sweep_is_clean(base: Path, text: bytes) -> None:
    f, out = base / "suite.yaml", base / "out"
    f.write_bytes(text)
    before = snapshot(base, out)
    outcome = run_cli("sweep", f, "--out", out, cwd=base)
    outcome.assert_clean()
    event(f"exit {outcome.code}: {outcome.stderr[18:60]}")
    assert snapshot(base, out) == before and not out.exists()  # nothing launched, nothing written


@FUZZ
@given(suite_doc)
def test_random_suites_end_clean(tmp_path_factory, launch_nothing, doc):
    import yaml

    _sweep_is_clean(Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())), yaml.safe_dump(doc).encode())


@FUZZ
@given(st.sampled_from(BUNDLED), st.lists(st.tuples(st.integers(-1, 3), field_name, value), min_size=1, max_size=3))
def test_bundled_suites_with_fields_changed_end_clean(tmp_path_factory, launch_nothing, suite, changes):
    """A bundled suite with fields set to anything (huge numbers, wrong types, lists, nesting):
    defaults (-1) or a run's."""
    import yaml

    doc = yaml.safe_load(suite.read_text())
    for target, name, new in changes:
        where = doc.setdefault("defaults", {}) if target < 0 else doc["runs"][target % len(doc["runs"])]
        where[name] = new
    _sweep_is_clean(Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())), yaml.safe_dump(doc).encode())


@FUZZ
@given(st.sampled_from(BUNDLED), st.lists(st.tuples(st.sampled_from(["insert", "delete", "replace"]), st.floats(0, 1),
                                                    st.one_of(st.sampled_from(SNIPPETS), st.text(max_size=8))),
                                          min_size=1, max_size=4))
def test_mutated_bundled_suites_end_clean(tmp_path_factory, launch_nothing, suite, edits):
    text = suite.read_text()
    for op, where, snippet in edits:
        i = int(where * len(text))
        text = (text[:i] + snippet + text[i:] if op == "insert" else text[:i] + text[i + len(snippet):]
                if op == "delete" else text[:i] + snippet + text[i + len(snippet):])
    _sweep_is_clean(Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())),
                    text.encode("utf-8", "surrogatepass"))
