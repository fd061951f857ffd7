"""The trust boundary of result folders (issue 20): a folder is data, read like command-line
input by the one loader and by `run --resume`; nothing in it is run unconfirmed (launcher
arguments), a damaged one is one line and exit 2 and is left byte for byte as it was, and output
folders that readers would not find whole are refused up front.

The folders here are written without launching anything (RunFolder and build_row); where a
resume gets past every check, the launch is replaced by a sentinel (no job starts). One test at
the end makes and resumes a real MPI run."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cli_inprocess import run_cli
from conftest import commbench, needs_mpirun
from commbench.errors import BAD_INPUT, InputError, OK
from commbench.results import AB_COLUMNS, COLUMNS, KINDS, build_row
from commbench.run.folder import RunFolder
from commbench.spec import SweepSpec

LAUNCHED = "launch reached (test sentinel)"
FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# --- folders --------------------------------------------------------------------------------------

def _rows():
    """Six rows: native and ring, three sizes, two nodes (so topo-compare and model fit have work)."""
    for i, (algorithm, size) in enumerate((a, s) for a in ("native", "ring") for s in (8, 1024, 65536)):
        time_us = 5.0 + size / 1e3 * (1.5 if algorithm == "ring" else 1.0)
        yield build_row(run_id="r1", label="lab", point=i, collective="all_reduce", backend="mpi", algorithm=algorithm,
                        device="cpu", dtype="float32", op="sum", in_place=1, world_size=4, nodes=2, ranks_per_node=2,
                        size_bytes=size, count=size // 4, time_us=time_us, time_us_mean=time_us, time_us_min=time_us,
                        time_us_max=time_us * 1.1, time_us_stdev=0.1, samples=3, iterations=3, batch=1, warmup=1,
                        wrong=0, timer="python"), [time_us * 0.9, time_us, time_us * 1.1]


def make_folder(path: Path, launcher_args=(), status="interrupted") -> Path:
    """A run folder as an interrupted run leaves it: run.json with a valid spec, rows, samples in
    Parquet (an earlier session) and CSV (the last one)."""
    spec = SweepSpec(backends=["mpi"], collectives=["all_reduce"], algorithms=["native", "ring"],
                     sizes=[8, 1024, 65536], in_place=[True], nprocs=2, iters=3, out_dir=str(path),
                     run_id="r1").validate()
    folder = RunFolder(path)
    folder.create({"run_id": "r1", "label": "lab", "spec": spec.__dict__, "status": status, "launcher": "mpirun",
                   "launcher_args": list(launcher_args), "launch_host": "elsewhere", "launch_pid": 1,
                   "ranks": [{"hostname": "h1"}], "versions": {"python": "3"}})
    for i, (row, samples) in enumerate(_rows()):
        folder.add(row, samples)
        if i == 3:
            folder.finalize()
    return path


@pytest.fixture
def folder(tmp_path):
    return make_folder(tmp_path / "run")


@pytest.fixture
def no_launch(monkeypatch):
    """Replace the launch: a resume that passes every check ends in the sentinel line, exit 2."""
    from commbench.run import api

    launched = []

    def sentinel(spec, folder, launcher, commands, launcher_args, on_event, relay):
        launched.append(launcher_args)
        raise InputError(LAUNCHED)

    monkeypatch.setattr(api, "_launch", sentinel)
    return launched


def files(root: Path) -> dict[str, bytes]:
    """Every file under root, by relative path: its bytes (a link: where it points)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = b"-> " + os.readlink(p).encode()
        elif p.is_file():
            out[rel] = p.read_bytes()
        else:
            out[rel] = b"<dir>"
    return out


def meta_of(d: Path) -> dict:
    return json.loads((d / "run.json").read_text())


def set_meta(d: Path, **fields) -> None:
    (d / "run.json").write_text(json.dumps(dict(meta_of(d), **fields)))


def set_spec(d: Path, **fields) -> None:
    meta = meta_of(d)
    set_meta(d, spec=dict(meta["spec"], **fields))


def edit_cell(d: Path, row: int, column: str, value: str, name: str = "results.csv") -> None:
    lines = list(csv.reader(io.StringIO((d / name).read_text(), newline="")))
    lines[row + 1][lines[0].index(column)] = value
    buf = io.StringIO()
    csv.writer(buf).writerows(lines)
    (d / name).write_text(buf.getvalue())


def rejected(d: Path, *args, fragment: str, cmd=("run", "--resume")) -> None:
    """The command refuses d in one line holding fragment, exit 2, and d is left as it was."""
    before = files(d.parent)
    outcome = run_cli(*cmd, d, *args)
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and fragment in outcome.stderr, outcome.stderr
    assert files(d.parent) == before


# --- 1. nothing from a folder is run ----------------------------------------------------------------

def test_recorded_launcher_args_are_shown_not_run(tmp_path, no_launch):
    d = make_folder(tmp_path / "run", launcher_args=["--hostfile", "their hosts", "-x", "LD_PRELOAD=/tmp/evil.so"])
    rejected(d, fragment="launched with the launcher arguments [--hostfile 'their hosts' -x LD_PRELOAD=/tmp/evil.so], "
                         "which commbench does not take from a folder unconfirmed: to resume, repeat them with "
                         "--launcher-args")
    assert no_launch == []
    # given again on the command line: those (the command line's) are used
    outcome = run_cli("run", "--resume", d, "--launcher-args", "--hostfile mine")
    assert LAUNCHED in outcome.stderr and no_launch == [["--hostfile", "mine"]]
    # an explicitly empty --launcher-args: none
    outcome = run_cli("run", "--resume", d, "--launcher-args", "")
    assert LAUNCHED in outcome.stderr and no_launch[-1] == []


def test_a_suite_resumes_with_its_own_launcher_args(tmp_path):
    """The suite file is the user's input: its launcher arguments stand (the folder's are not used)."""
    from commbench.run.api import resumable

    d = make_folder(tmp_path / "run", launcher_args=["--their", "args"])
    assert resumable(d, ["--from-suite"])[3] == ["--from-suite"]
    assert resumable(d, [])[3] == []
    with pytest.raises(InputError, match="repeat them with --launcher-args"):
        resumable(d, None)


@pytest.mark.parametrize("change,fragment", [
    (dict(nprocs=True), "spec field 'nprocs' must be int, not True"),
    (dict(nprocs="2"), "spec field 'nprocs' must be int, not '2'"),
    (dict(sizes=[8, -1]), "spec field 'sizes' holds -1: each must be at least 1"),
    (dict(sizes="8"), "spec field 'sizes' must be list[int]"),
    (dict(backends=["mpi", 7]), "spec field 'backends' must be list[str]"),
    (dict(done_points=[0, "1"]), "spec field 'done_points' must be list[int]"),
    (dict(timeout="never"), "spec field 'timeout' must be float | None"),
    (dict(in_place=[1]), "spec field 'in_place' must be list[bool]"),
    (dict(nprocs=0), "invalid number of processes 0"),
    (dict(backends=["evil"]), "unknown backend 'evil'"),
    (dict(shell="rm -rf /"), "unknown spec fields: shell"),
])
def test_a_tampered_spec_is_validated_again(folder, no_launch, change, fragment):
    set_spec(folder, **change)
    rejected(folder, fragment=fragment)


@pytest.mark.parametrize("field,value,fragment", [
    ("launch_pid", "1", "run.json field 'launch_pid' must be a process id (1 to 2^22), not '1'"),
    ("launch_pid", 2**70, "run.json field 'launch_pid' must be a process id (1 to 2^22)"),
    ("launch_pid", -1, "run.json field 'launch_pid' must be a process id"),
    ("launch_pid", True, "run.json field 'launch_pid' must be a process id"),
    ("status", ["running"], "run.json field 'status' must be a string"),
    ("repeat", "3", "run.json field 'repeat' must be an integer from 1 to 100"),
    ("repeat", 10**6, "run.json field 'repeat' must be an integer from 1 to 100"),
    ("launcher_args", "--hostfile h", "run.json field 'launcher_args' must be a list"),
    ("launcher_args", ["ok", 3], "run.json field 'launcher_args' must be a list of texts"),
    ("skipped", [{"index": [1]}], "run.json field 'skipped' must be a list of points with an integer index"),
    ("resumes", {}, "run.json field 'resumes' must be a list"),
    ("spec", None, "run.json is not a commbench run record (it holds no spec)"),  # null: not recorded
    ("spec", [], "run.json field 'spec' must be an object"),
    ("format_version", 99, "results format version 99 is newer"),
])
def test_run_json_fields_are_checked_before_use(folder, no_launch, field, value, fragment):
    set_meta(folder, **{field: value})
    rejected(folder, fragment=fragment)


# --- 5. options that --resume would ignore ----------------------------------------------------------

@pytest.mark.parametrize("args,flag", [
    (["-n", "2"], "-n/--nprocs"), (["--sizes", "8"], "--sizes"), (["-b", "8"], "-b/--min-bytes"),
    (["-e", "1K"], "-e/--max-bytes"), (["-f", "4"], "-f/--step-factor"), (["--backend", "mpi"], "--backend"),
    (["--label", "x"], "--label"), (["-c", "all_reduce"], "-c/--collective"), (["-a", "ring"], "-a/--algorithm"),
    (["-d", "int8"], "-d/--dtype"), (["-o", "max"], "-o/--op"), (["--in-place"], "--in-place"),
    (["--no-graph"], "--graph/--no-graph"), (["--iters", "9"], "--iters"), (["--out", "elsewhere"], "--out"),
    (["--launcher", "local"], "--launcher"),
])
def test_resume_refuses_options_it_would_ignore(folder, no_launch, args, flag):
    rejected(folder, *args, fragment=f"--resume measures with the options recorded with the run: {flag} would be "
                                     "ignored")
    assert no_launch == []


def test_resume_takes_quiet_json_and_launcher_args(folder, no_launch):
    outcome = run_cli("run", "--resume", folder, "--quiet", "--json", "--launcher-args", "--bind-to none")
    assert LAUNCHED in outcome.stderr and no_launch == [["--bind-to", "none"]]


# --- 2, 5. damaged folders given to --resume ----------------------------------------------------------

def _binary(d):
    (d / "results.csv").write_bytes(bytes(range(256)) * 8)


def _link(d):
    (d / "results.csv").unlink()
    (d / "results.csv").symlink_to("/dev/zero")


def _missing_column(d):
    lines = list(csv.reader(io.StringIO((d / "results.csv").read_text(), newline="")))
    drop = lines[0].index("size_bytes")
    buf = io.StringIO()
    csv.writer(buf).writerows([line[:drop] + line[drop + 1:] for line in lines])
    (d / "results.csv").write_text(buf.getvalue())


def _extra_fields(d):
    header, rows = (d / "results.csv").read_bytes().split(b"\r\n", 1)
    (d / "results.csv").write_bytes(header + b"\r\n" + rows.replace(b"\r\n", b",x\r\n"))


@pytest.mark.parametrize("damage,fragment", [
    (lambda d: edit_cell(d, 1, "point", "nan"), "results.csv row 2: point 'nan' is not an integer >= 0"),
    (lambda d: edit_cell(d, 0, "point", "first"), "results.csv row 1: point 'first' is not an integer >= 0"),
    (lambda d: edit_cell(d, 2, "time_us", "NaN"), "results.csv row 3: time_us 'NaN' is not a time in µs"),
    (lambda d: edit_cell(d, 2, "time_us", "-4"), "results.csv row 3: time_us '-4' is not a time in µs"),
    (lambda d: edit_cell(d, 0, "job", "0"), "results.csv row 1: job '0' is not an integer >= 1"),
    (lambda d: edit_cell(d, 0, "wrong", "many"), "results.csv row 1: wrong 'many' is not an integer >= 0"),
    (_missing_column, "results.csv is missing columns size_bytes"),
    (_binary, "results.csv is not a results.csv commbench wrote"),
    (lambda d: (d / "results.csv").write_bytes((d / "results.csv").read_bytes() + b"\x00\xff tail"),
     "results.csv is not a results.csv commbench wrote"),
    (lambda d: (d / "results.csv").write_text("a,b,c\n1,2,3\n"), "results.csv is missing columns run_id, point"),
    (_extra_fields, "unreadable results.csv (ParserWarning: Length of header"),
    (lambda d: (d / "results.csv").write_bytes((d / "results.csv").read_bytes().replace(b"\r\n", b",x\r\n", 1)),
     "results.csv has columns commbench does not write: 'x'"),
    (lambda d: (d / "results.csv").write_text((d / "results.csv").read_text().replace("run_id,label", "run_id,run_id",
                                                                                        1)),
     "results.csv names columns twice: run_id"),
    (_link, "results.csv is not a regular file of the folder"),
    (lambda d: (d / "run.json").write_text((d / "run.json").read_text()[:200]), "unreadable run.json"),
    (lambda d: (d / "run.json").write_text("[]"), "run.json is not a JSON object"),
    (lambda d: edit_cell(d, 0, "time_us", "inf", "samples.csv"), "samples.csv row 1: time_us 'inf' is not a time"),
    (lambda d: (d / "samples.parquet").write_bytes(b"PAR1 not parquet"), "unreadable samples.parquet"),
    (lambda d: edit_cell(d, 5, "point", "999"), "results.csv has a row of point 999, but the run's spec has 6 points"),
    (lambda d: set_meta(d, label="\ud800"), "run.json holds text that is not Unicode (a lone surrogate escape)"),
    (lambda d: edit_cell(d, 0, "run_id", "someone-else"), "results.csv has rows of another run ('someone-else', "
                                                          "not 'r1')"),
    (lambda d: (d / "run.json").write_text(" " * (32 << 20) + "{}"), "run.json is larger than 32 MiB"),
])
def test_a_damaged_folder_is_one_line_and_left_as_it_was(folder, no_launch, damage, fragment):
    damage(folder)
    rejected(folder, fragment=fragment)


@pytest.mark.parametrize("make,fragment", [
    (lambda p: p.write_text("x"), "is not a folder: nothing to resume"),
    (lambda p: None, "does not exist: nothing to resume"),
    (lambda p: p.mkdir(), "holds no run.json: nothing to resume"),
])
def test_resume_of_no_run(tmp_path, make, fragment):
    make(tmp_path / "x")
    rejected(tmp_path / "x", fragment=fragment)


def test_the_partial_line_is_cut_only_after_every_check(folder, no_launch):
    """A crash mid-write leaves a partial last row: with a bad row before it the folder is refused
    and nothing is cut; without one the partial row is cut and the resume goes on."""
    whole = (folder / "results.csv").read_bytes()
    cut = whole[:-30]  # the last row cut mid-line
    (folder / "results.csv").write_bytes(cut)
    edit_cell(folder, 0, "size_bytes", "-8")
    damaged = (folder / "results.csv").read_bytes()
    rejected(folder, fragment="results.csv row 1: size_bytes '-8' is not an integer >= 1")
    assert (folder / "results.csv").read_bytes() == damaged
    (folder / "results.csv").write_bytes(cut)
    outcome = run_cli("run", "--resume", folder)
    assert LAUNCHED in outcome.stderr
    assert (folder / "results.csv").read_bytes() == whole[:whole.rfind(b"\n", 0, len(whole) - 1) + 1]


# --- readers: report, compare, topo-compare, model fit --------------------------------------------------

READERS = (("report", "-o", "{out}/report.html"), ("compare", "{d}"), ("topo-compare", "--csv", "{out}/t.csv"),
           ("model", "fit", "-o", "{out}/model.json"))


def read_with(command, d: Path, out: Path):
    """One reader of d (compare: d against itself), its output under out."""
    args = [a.format(out=out, d=d) for a in command]
    cmd, rest = (args[:2], args[2:]) if args[0] == "model" else (args[:1], args[1:])
    return run_cli(*cmd, d, *rest, cwd=out)


def _read_all(d: Path, out: Path) -> list:
    return [read_with(command, d, out) for command in READERS]


@pytest.mark.parametrize("damage,fragment", [
    (lambda d: edit_cell(d, 0, "time_us", "nan"), "results.csv row 1: time_us 'nan' is not a time in µs"),
    (lambda d: edit_cell(d, 4, "time_us", "0"), "results.csv row 5: time_us '0' is not a time in µs"),
    (lambda d: edit_cell(d, 1, "time_us_p95", "-inf"), "results.csv row 2: time_us_p95 '-inf' is not a time"),
    (lambda d: edit_cell(d, 0, "size_bytes", "1.5"), "results.csv row 1: size_bytes '1.5' is not an integer >= 1"),
    (lambda d: edit_cell(d, 0, "busbw_gbps", "fast"), "results.csv row 1: busbw_gbps 'fast' is not a finite number"),
    (lambda d: edit_cell(d, 3, "collective", ""), "results.csv row 4: collective is empty"),
    (lambda d: edit_cell(d, 0, "time_us", "NaN", "samples.csv"), "samples.csv row 1: time_us 'NaN' is not a time"),
    (lambda d: set_meta(d, ranks="h1"), "run.json field 'ranks' must be a list"),
    (lambda d: set_meta(d, jobs=[1]), "run.json field 'jobs' holds an entry that is not a JSON object"),
    (lambda d: set_spec(d, segment_bytes="1M"), "run.json: spec field 'segment_bytes' must be int"),
    (lambda d: (d / "results.csv").write_text(",".join(COLUMNS) + "\n"), "results.csv holds no rows"),
    (lambda d: [edit_cell(d, r, "collective", "x") for r in range(6)], "row 1: collective 'x' is none this commbench "
                                                                       "knows"),
    (lambda d: set_meta(d, label="\udfff"), "run.json holds text that is not Unicode (a lone surrogate escape)"),
])
def test_readers_refuse_a_bad_folder_in_one_line(folder, tmp_path, damage, fragment):
    damage(folder)
    out = tmp_path / "out"
    out.mkdir()
    before = files(folder)
    for command, outcome in zip(READERS, _read_all(folder, out), strict=True):
        outcome.assert_clean()
        if "samples" not in fragment or command[0] == "compare":  # only compare reads the samples
            assert outcome.code == BAD_INPUT and fragment in outcome.stderr, (command, outcome.stderr)
    assert files(folder) == before


def test_compare_of_nan_samples_is_exit_2(folder, tmp_path):
    """The regression gate: NaN timings are unusable data (2), not "unchanged" (0)."""
    good = make_folder(tmp_path / "good")
    edit_cell(folder, 0, "time_us", "nan", "samples.csv")
    outcome = run_cli("compare", good, folder)
    assert outcome.code == BAD_INPUT and "samples.csv row 1: time_us" in outcome.stderr


def test_a_good_folder_reads(folder, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for outcome in _read_all(folder, out):
        outcome.assert_clean(codes=(OK,))


# --- 4. output folders readers would not find whole -----------------------------------------------------

RUN = ("run", "-n", "2", "--backend", "mpi", "--sizes", "8", "--iters", "2", "--quiet")


def test_run_out_must_be_a_usable_folder_readers_find(folder, tmp_path, no_launch):
    (tmp_path / "file").write_text("x")
    sweep = tmp_path / "sweep"
    make_folder(sweep / "one")
    for out, fragment in [
        ("/proc/commbench-nope", "cannot be written"),
        (tmp_path / "file" / "sub", "which is a file"),
        (tmp_path / "file", "is a file, not a folder"),
        (folder / "sub", f"is inside the run folder {str(folder)!r}, where report and compare would not see it"),
        (sweep, f"holds run folders ({str(sweep / 'one')!r}): a run's results there would hide them"),
        (folder, "already holds results"),
    ]:
        before = files(tmp_path)
        outcome = run_cli(*RUN, "--out", out)
        outcome.assert_clean()
        assert outcome.code == BAD_INPUT and fragment in outcome.stderr, outcome.stderr
        assert files(tmp_path) == before and no_launch == []
    # a new run beside the sweep's runs is one more run of the sweep: allowed
    outcome = run_cli(*RUN, "--out", sweep / "two")
    assert LAUNCHED in outcome.stderr


def _suite(tmp_path, label="one") -> Path:
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: tiny\ndefaults: {nprocs: 2, sizes: [8], iters: 2, collective: all_reduce, backend: mpi}\n"
                     f"runs:\n  - {{label: {label}}}\n")
    return suite


def test_sweep_out_must_not_be_or_be_inside_a_run_folder(folder, tmp_path, no_launch):
    suite = _suite(tmp_path)
    for out, fragment in [(folder, "is a run folder: a sweep needs a folder of its own"),
                          (folder / "sweep", "is inside the run folder"),
                          ("/proc/commbench-nope", "cannot be written")]:
        before = files(tmp_path)
        outcome = run_cli("sweep", suite, "--out", out, "--quiet")
        outcome.assert_clean()
        assert outcome.code == BAD_INPUT and fragment in outcome.stderr, outcome.stderr
        assert files(tmp_path) == before


def test_sweep_resume_checks_every_run_before_anything_starts(tmp_path, no_launch):
    suite = _suite(tmp_path)
    sweep = tmp_path / "sweep"
    d = make_folder(sweep / "one")
    shutil.copyfile(suite, sweep / "suite.yaml")
    (d / "run.json").write_text((d / "run.json").read_text()[:150])  # truncated
    before = files(tmp_path)
    outcome = run_cli("sweep", suite, "--out", sweep, "--resume", "--quiet")
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and "run 'one': " in outcome.stderr and "unreadable run.json" in outcome.stderr
    assert files(tmp_path) == before


# --- 6. property-based: whatever a folder holds, one line or a result, and nothing else changes ----------

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


def test_schema_kinds_name_schema_columns():
    assert set(KINDS) <= set(AB_COLUMNS) and set(COLUMNS) < set(AB_COLUMNS)  # ab folders' rows add side, round


# --- a real run ---------------------------------------------------------------------------------------

@needs_mpirun
def test_a_real_run_resumes_only_with_its_launcher_args_confirmed(job, tmp_path):
    out = tmp_path / "real"
    commbench("run", "-n", 2, "--backend", "mpi", "--sizes", "8,64", "-c", "all_reduce", "--in-place", "--iters", 3,
              "--launcher-args", "--bind-to none", "--out", out, "--quiet", check_rc=OK)
    lines = (out / "results.csv").read_text().splitlines(keepends=True)
    (out / "results.csv").write_text("".join(lines[:2]))  # as if cut short after the first point
    set_meta(out, status="interrupted")
    before = files(out)
    proc = commbench("run", "--resume", out, "--quiet")
    assert proc.returncode == BAD_INPUT and "[--bind-to none]" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert files(out) == before
    commbench("run", "--resume", out, "--quiet", "--launcher-args", "--bind-to none", check_rc=OK)
    meta = meta_of(out)
    assert meta["status"] == "completed" and meta["launcher_args"] == ["--bind-to", "none"]
    assert len((out / "results.csv").read_text().splitlines()) == 3


def test_an_amount_not_recorded_is_an_empty_cell(tmp_path):
    """A power reading without samples is NaN: written as an empty cell, and a "nan" an older
    commbench wrote in such an optional amount loads as not recorded; a time is never NaN."""
    from commbench.analysis.load import load_runs

    f = RunFolder(tmp_path / "run")
    f.create({"run_id": "r1"})
    row, samples = next(_rows())
    f.add(dict(row, power_w_avg=float("nan"), power_w_max=float("nan")), samples)
    cells = next(csv.DictReader(io.StringIO((f.dir / "results.csv").read_text())))
    assert cells["power_w_avg"] == "" and cells["power_w_max"] == ""
    edit_cell(f.dir, 0, "power_w_max", "nan")
    rows, _ = load_runs([f.dir])
    assert rows.power_w_avg.isna().all() and rows.power_w_max.isna().all()
    edit_cell(f.dir, 0, "power_w_max", "inf")
    with pytest.raises(InputError, match="row 1: power_w_max 'inf' is not a finite number >= 0"):
        load_runs([f.dir])
