"""Property-based (issue 20): whatever a results folder holds, every reader and `run --resume`
answer with one line or a result, and nothing else changes. The folders are written without
launching anything and the launch is replaced by a sentinel (tests/folder_fixtures.py)."""

from __future__ import annotations

import csv
import io
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cli_inprocess import run_cli
from commbench.errors import BAD_INPUT
from folder_fixtures import LAUNCHED, READERS, files, make_folder, meta_of, no_launch, read_with  # noqa: F401

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


CELL = st.one_of(st.sampled_from(["", "nan", "NaN", "inf", "-inf", "-1", "0", "-0", "1e400", "1e-300", "1.5", "abc",
                                  "99999999999999999999", "9007199254740993", '"', "\x1b[31m", "\n", "None", "NA",
                                  "True", " 3 ", "all_reduce", "all_gather", "x", "ring", "hierarchical", "nccl",
                                  "float64", "1", "2", "1024"]),
                 st.text(max_size=12), st.integers(-10**20, 10**20).map(str), st.floats().map(repr))


@st.composite
def damaged_csv(draw, text: str) -> bytes:
    """A CSV file's text after one to three edits: cells, columns, bytes."""
    lines = list(csv.reader(io.StringIO(text, newline="")))
    data = None
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["cell", "cell", "column", "drop", "rename", "field", "truncate", "insert",
                                     "bytes"]))
        if data is not None and kind in ("cell", "column", "drop", "rename", "field"):
            continue  # the file is bytes now
        if kind == "cell":
            row = draw(st.integers(0, len(lines) - 1))
            lines[row][draw(st.integers(0, len(lines[row]) - 1))] = draw(CELL)
        elif kind == "column":  # one value in every row
            col, value = draw(st.integers(0, len(lines[0]) - 1)), draw(CELL)
            for line in lines[1:]:
                line[col:col + 1] = [value]
        elif kind == "drop":
            col = draw(st.integers(0, len(lines[0]) - 1))
            lines = [line[:col] + line[col + 1:] for line in lines]
        elif kind == "rename":
            lines[0][draw(st.integers(0, len(lines[0]) - 1))] = draw(CELL)
        elif kind == "field":
            lines[draw(st.integers(0, len(lines) - 1))].append(draw(CELL))
        else:
            if data is None:
                buf = io.StringIO()
                csv.writer(buf).writerows(lines)
                data = buf.getvalue().encode()
            at = draw(st.integers(0, len(data)))
            if kind == "truncate":
                data = data[:at]
            elif kind == "insert":
                data = data[:at] + draw(st.binary(max_size=20)) + data[at:]
            else:
                data = draw(st.binary(max_size=300))
    if data is None:
        buf = io.StringIO()
        csv.writer(buf).writerows(lines)
        data = buf.getvalue().encode()
    return data


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)


@st.composite
def damaged_run_json(draw, meta: dict) -> bytes:
    """run.json after an edit: a field (or a spec field) set to any JSON, removed, the text cut or
    replaced by any JSON."""
    kind = draw(st.sampled_from(["field", "spec", "spec", "drop", "truncate", "any"]))
    meta = json.loads(json.dumps(meta))
    if kind == "field":
        meta[draw(st.sampled_from(sorted(meta)))] = draw(JSON)
    elif kind == "spec":
        meta["spec"][draw(st.sampled_from(sorted(meta["spec"])))] = draw(JSON)
    elif kind == "drop":
        meta.pop(draw(st.sampled_from(sorted(meta))))
    text = json.dumps(meta).encode()
    if kind == "truncate":
        return text[:draw(st.integers(0, len(text)))]
    if kind == "any":
        return json.dumps(draw(JSON)).encode()
    return text


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    return make_folder(tmp_path_factory.mktemp("template") / "run")


def _copy(template: Path) -> tuple[Path, Path]:
    """A fresh copy of the template folder in a temporary root, and an empty output folder there."""
    root = Path(tempfile.mkdtemp(prefix="trust-"))
    d = root / "run"
    shutil.copytree(template, d)
    (root / "out").mkdir()
    return root, d


def _outside_out(root: Path) -> dict:
    return {k: v for k, v in files(root).items() if not k.startswith("out")}


@FUZZ
@given(data=st.data(), name=st.sampled_from(["results.csv", "results.csv", "samples.csv"]),
       reader=st.sampled_from(READERS))
def test_fuzzed_rows_are_read_or_refused_in_one_line(template, data, name, reader):
    root, d = _copy(template)
    try:
        (d / name).write_bytes(data.draw(damaged_csv((template / name).read_text())))
        before = _outside_out(root)
        outcome = read_with(READERS[1] if name == "samples.csv" else reader, d, root / "out")  # compare reads samples
        event(f"exit {outcome.code}")
        outcome.assert_clean()
        assert _outside_out(root) == before
    finally:
        shutil.rmtree(root)


@FUZZ
@given(data=st.data(), reader=st.sampled_from(READERS))
def test_fuzzed_run_json_is_read_or_refused_in_one_line(template, no_launch, data, reader):
    root, d = _copy(template)
    try:
        (d / "run.json").write_bytes(data.draw(damaged_run_json(meta_of(template))))
        before = files(root)
        outcomes = [read_with(reader, d, root / "out"), run_cli("run", "--resume", d)]
        event(f"read exit {outcomes[0].code}, resume {'launched' if LAUNCHED in outcomes[1].stderr else 'refused'}")
        for outcome in outcomes:
            outcome.assert_clean()
        if LAUNCHED not in outcomes[1].stderr:  # refused: the folder as it was
            assert _outside_out(root) == {k: v for k, v in before.items() if not k.startswith("out")}
    finally:
        shutil.rmtree(root)


@FUZZ
@given(data=st.data(), name=st.sampled_from(["results.csv", "results.csv", "samples.csv"]))
def test_fuzzed_rows_given_to_resume_are_refused_untouched(template, no_launch, data, name):
    root, d = _copy(template)
    try:
        (d / name).write_bytes(data.draw(damaged_csv((template / name).read_text())))
        before = files(root)
        outcome = run_cli("run", "--resume", d)
        event("launched" if LAUNCHED in outcome.stderr else "refused")
        outcome.assert_clean(codes=(BAD_INPUT,))
        if LAUNCHED not in outcome.stderr:
            assert files(root) == before
    finally:
        shutil.rmtree(root)

