"""The readers' limits (commbench.folder.limits, issue 43): each is its default or its environment
variable, a bad variable is one InputError naming it, a refusal names the limit and the variable that
raises it; the loader applies them before it parses (folder depth, runs, rows, samples from Parquet
metadata, columns in linear time), follows no link out of a folder, refuses special files, and reads
samples present in both CSV and Parquet once (the Parquet file's win)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd
import pytest

from commbench.folder import limits
from commbench.folder.load import load_run, read_samples
from commbench.folder.files import regular_file, run_dirs
from commbench.errors import InputError
from folder_fixtures import folder, make_folder  # noqa: F401 - folder: a fixture

LIMIT = limits.Limit("COMMBENCH_MAX_TEST_THINGS", 10, "things in the test")
MIB_LIMIT = limits.Limit("COMMBENCH_MAX_TEST_MB", 2, "in the test file", limits.MIB)


def test_default_and_variable(monkeypatch):
    monkeypatch.delenv(LIMIT.env, raising=False)
    assert LIMIT.value() == 10 and MIB_LIMIT.value() == 2 << 20
    monkeypatch.setenv(LIMIT.env, "1_000")
    monkeypatch.setenv(MIB_LIMIT.env, "3")
    assert LIMIT.value() == 1000 and MIB_LIMIT.value() == 3 << 20
    monkeypatch.setenv(LIMIT.env, " ")
    assert LIMIT.value() == 10  # empty: the default


@pytest.mark.parametrize("bad", ["0", "-1", "1e6", "ten", "１０", "9" * 19, "1.5"])
def test_a_bad_variable_is_one_input_error(monkeypatch, bad):
    monkeypatch.setenv(LIMIT.env, bad)
    with pytest.raises(InputError, match="COMMBENCH_MAX_TEST_THINGS=.*give a whole number >= 1"):
        LIMIT.value()


def test_refusal_names_the_limit_and_its_variable(monkeypatch):
    monkeypatch.delenv(LIMIT.env, raising=False)
    assert LIMIT.check("x", 10) == 10
    with pytest.raises(InputError) as err:
        LIMIT.check("f.csv", 11)
    assert str(err.value) == ("f.csv: 11 things in the test, more than the limit of 10 "
                              "(raise it with COMMBENCH_MAX_TEST_THINGS=40)")
    with pytest.raises(InputError, match=r"f: 3 MiB in the test file, more than the limit of 2 MiB .*_MB=8\)"):
        MIB_LIMIT.check("f", 3 << 20)


def test_every_limit_has_its_own_variable():
    envs = [lim.env for lim in limits.ALL]
    assert len(set(envs)) == len(envs) and all(e.startswith("COMMBENCH_MAX_") for e in envs)
    assert all(lim.default >= 1 for lim in limits.ALL) and len(limits.table()) == len(limits.ALL)


def test_a_folder_that_goes_during_the_walk_is_passed_over(tmp_path, monkeypatch):
    """`report /` met another program's temporary folder that went between its listing and its
    reading: that folder is passed over, not the end of the command."""
    import os

    from commbench.folder import files as run_files

    sweep = tmp_path / "sweep"
    make_folder(sweep / "run1")
    (sweep / "going").mkdir()
    real = os.scandir

    def scandir(path):
        if str(path).endswith("going"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real(path)

    monkeypatch.setattr(run_files.os, "scandir", scandir)
    assert [d.name for d in run_dirs(sweep)] == ["run1"]


def test_depth_runs_rows_and_samples_are_counted_before_parsing(folder, tmp_path, monkeypatch):
    sweep = tmp_path / "sweep"
    make_folder(sweep / "a" / "b" / "run1")
    make_folder(sweep / "c" / "run2")
    assert [d.name for d in run_dirs(sweep)] == ["run1", "run2"]
    monkeypatch.setenv("COMMBENCH_MAX_DEPTH", "2")
    with pytest.raises(InputError, match="folder levels below the path, more than the limit of 2 .*MAX_DEPTH="):
        run_dirs(sweep)
    monkeypatch.delenv("COMMBENCH_MAX_DEPTH")
    monkeypatch.setenv("COMMBENCH_MAX_RUNS", "1")
    with pytest.raises(InputError, match="run folders under one path, more than the limit of 1"):
        run_dirs(sweep)
    monkeypatch.delenv("COMMBENCH_MAX_RUNS")
    monkeypatch.setenv("COMMBENCH_MAX_ROWS", "5")
    with pytest.raises(InputError, match="results.csv rows under one path, more than the limit of 5"):
        run_dirs(folder)
    with pytest.raises(InputError, match="results.csv: 6 results.csv rows"):
        load_run(folder)  # a folder read on its own (run --resume's checks) is bounded too
    monkeypatch.setenv("COMMBENCH_MAX_ROWS", "6")
    monkeypatch.setenv("COMMBENCH_MAX_SAMPLES", "11")  # 4 points x 3 in Parquet, 2 x 3 in CSV
    with pytest.raises(InputError, match="18 samples under one path, more than the limit of 11"):
        run_dirs(folder)
    with pytest.raises(InputError, match="samples.parquet: 12 samples"):
        load_run(folder, samples=True)  # the Parquet file's rows from its metadata


def test_a_wide_header_is_refused_in_linear_time(folder):
    text = (folder / "results.csv").read_text()
    (folder / "results.csv").write_text(text.replace("\n", "".join(f",x{i}" for i in range(10**6)) + "\n", 1))
    start = time.perf_counter()
    with pytest.raises(InputError, match="columns in one header, more than the limit of 256"):
        load_run(folder)
    assert time.perf_counter() - start < 2


def test_a_column_named_twice(folder):
    text = (folder / "results.csv").read_text()
    (folder / "results.csv").write_text(text.replace("\n", ",label,point\n", 1))
    with pytest.raises(InputError, match="names columns twice: label, point"):
        load_run(folder)


def test_links_out_of_a_folder_and_special_files(folder, tmp_path):
    outside = tmp_path / "outside.csv"
    os.replace(folder / "results.csv", outside)
    (folder / "results.csv").symlink_to(outside)
    with pytest.raises(InputError, match="results.csv links to outside the folder"):
        load_run(folder)
    os.replace(outside, folder / "real.csv")
    (folder / "results.csv").unlink()
    (folder / "results.csv").symlink_to("real.csv")  # a link inside the folder is read
    assert len(load_run(folder)[0]) == 6
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(InputError, match="cannot read .*fifo.*: not a regular file"):
        regular_file(tmp_path, "fifo", inside=False)
    with pytest.raises(InputError, match="fifo is not a regular file"):
        regular_file(tmp_path, "fifo")


def test_walk_follows_no_link(tmp_path):
    sweep = tmp_path / "sweep"
    make_folder(sweep / "run1")
    (sweep / "latest").symlink_to("run1")  # inside: read where it is, once
    (sweep / "run1" / "up").symlink_to("..")
    assert run_dirs(sweep) == [sweep / "run1"]
    (sweep / "loop").symlink_to("loop")
    with pytest.raises(InputError, match="is a link loop"):
        run_dirs(sweep)
    (sweep / "loop").unlink()
    make_folder(tmp_path / "elsewhere")
    (sweep / "other").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="links to a folder outside"):
        run_dirs(sweep)


def test_samples_in_both_forms_are_read_once(folder):
    parquet = pd.read_parquet(folder / "samples.parquet")
    csv_only = len(read_samples(folder)) - len(parquet)
    both = pd.concat([pd.read_csv(folder / "samples.csv", dtype={"run_id": str}), parquet.astype({"run_id": str})])
    both.to_csv(folder / "samples.csv", index=False)  # the CSV holds the Parquet file's samples again
    assert len(read_samples(folder)) == len(parquet) + csv_only
    rows, _ = load_run(folder, samples=True)
    assert [len(v) for v in rows.sample_values] == [3] * 6


def test_the_docs_list_every_limit_as_the_table_says():
    from docs_pages import rendered

    page = rendered("reference/environment.md")
    for variable, default, what in limits.table():
        assert f"| `{variable}` | {default} | {what} |" in page, variable
