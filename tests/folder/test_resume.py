"""`run --resume` and the trust boundary of a results folder (issue 20): nothing in a folder is run
unconfirmed (its launcher arguments are shown, not used), a tampered spec and run.json's fields
are validated again, options --resume would ignore are refused, a damaged folder is one line and
exit 2 and is left byte for byte as it was, and a partial last row is cut only after every check.

The folders are written without launching anything (tests/folder_fixtures.py); where a resume
gets past every check, the launch is replaced by a sentinel (no job starts). One test at the end
makes and resumes a real MPI run."""

from __future__ import annotations

import csv
import io

import pytest

from cli_inprocess import run_cli
from conftest import commbench, needs_mpirun
from commbench.errors import BAD_INPUT, InputError, OK
from folder_fixtures import (LAUNCHED, edit_cell, files, folder, make_folder, meta_of, no_launch,  # noqa: F401
                             rejected, set_meta, set_spec)


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
    (lambda d: (d / "samples.csv").write_text((d / "samples.csv").read_text().replace("\n", ",\n", 2).replace(
        ",\n", "\n", 1)), "samples.csv line 2 has 6 fields, its header 5"),  # one trailing empty field (pandas takes it)
    (lambda d: (d / "samples.parquet").write_bytes(b"PAR1 not parquet"), "unreadable samples.parquet"),
    (lambda d: edit_cell(d, 5, "point", "999"), "results.csv has a row of point 999, but the run's spec has 6 points"),
    (lambda d: set_meta(d, label="\ud800"), "run.json holds text that is not Unicode (a lone surrogate escape)"),
    (lambda d: edit_cell(d, 0, "run_id", "someone-else"), "results.csv has rows of another run ('someone-else', "
                                                          "not 'r1')"),
    (lambda d: (d / "run.json").write_text(" " * (32 << 20) + "{}"), "more than the limit of 32 MiB (raise it with COMMBENCH_MAX_RUN_JSON_MB"),
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

