"""The one loader as a trust boundary (issue 20): a results folder is data, read like command-line
input by every reader (report, compare, topo-compare, model fit); a bad folder is refused in one
line, exit 2, and is left as it was; a good one reads. The folders are written without launching
anything (tests/folder_fixtures.py)."""

from __future__ import annotations

import csv
import io

import pytest

from cli_inprocess import run_cli
from commbench.errors import BAD_INPUT, NO_VERDICT, InputError, OK
from commbench.folder.schema import AB_COLUMNS, COLUMNS, KINDS
from commbench.folder.write import RunFolder
from folder_fixtures import (READERS, edit_cell, files, folder, make_folder, read_all, set_meta,  # noqa: F401
                             set_spec, six_rows)


@pytest.mark.parametrize("damage,fragment", [
    (lambda d: edit_cell(d, 0, "time_us", "nan"), "results.csv row 1: time_us 'nan' is not a time in µs"),
    (lambda d: edit_cell(d, 4, "time_us", "0"), "results.csv row 5: time_us '0' is not a time in µs"),
    (lambda d: edit_cell(d, 2, "time_us", "1e300"), "results.csv row 3: time_us '1e+300' is not a time in µs"),
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
    for command, outcome in zip(READERS, read_all(folder, out), strict=True):
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
    for command, outcome in zip(READERS, read_all(folder, out), strict=True):
        # compare against its own copy: one job a side judges nothing, "no verdict" (its one line, exit 2)
        outcome.assert_clean(codes=(NO_VERDICT,) if command[0] == "compare" else (OK,))


def test_schema_kinds_name_schema_columns():
    assert set(KINDS) <= set(AB_COLUMNS) and set(COLUMNS) < set(AB_COLUMNS)  # ab folders' rows add side, round


def test_an_amount_not_recorded_is_an_empty_cell(tmp_path):
    """A power reading without samples is NaN: written as an empty cell, and a "nan" an older
    commbench wrote in such an optional amount loads as not recorded; a time is never NaN."""
    from commbench.folder.load import load_runs

    f = RunFolder(tmp_path / "run")
    f.create({"run_id": "r1"})
    row, samples = next(six_rows())
    f.add(dict(row, power_w_avg=float("nan"), power_w_max=float("nan")), samples)
    cells = next(csv.DictReader(io.StringIO((f.dir / "results.csv").read_text())))
    assert cells["power_w_avg"] == "" and cells["power_w_max"] == ""
    edit_cell(f.dir, 0, "power_w_max", "nan")
    rows, _ = load_runs([f.dir])
    assert rows.power_w_avg.isna().all() and rows.power_w_max.isna().all()
    edit_cell(f.dir, 0, "power_w_max", "inf")
    with pytest.raises(InputError, match="row 1: power_w_max 'inf' is not a finite number >= 0"):
        load_runs([f.dir])


def test_rows_of_another_run_than_run_json_are_refused(tmp_path):
    """Two writers in one folder leave rows of two runs under one run.json: not one run (issue 43)."""
    import pandas as pd

    from commbench.folder.load import load_run, load_runs
    from synthetic_runs import write_run

    run = write_run(tmp_path / "r", [10.0], run_id="first")
    assert set(load_run(run)[0].run_id) == {"first"}
    rows = pd.read_csv(run / "results.csv", dtype=str, keep_default_na=False)
    rows.loc[rows.index[-1], "run_id"] = "second"
    rows.to_csv(run / "results.csv", index=False)
    for read in (load_run, load_runs):
        with pytest.raises(InputError, match="holds rows of run 'second', not only of run.json's 'first': two runs"):
            read(run)
    assert "two runs wrote this folder" in run_cli("report", str(run), "--output", str(tmp_path / "r.html")).stderr


def test_a_parser_s_refusal_is_the_file_s_fault_a_reader_s_bug_is_not(tmp_path):
    """read_file: what csv / json / pandas / pyarrow say of the data is one InputError naming the file; any
    other exception is commbench's own bug and rises as it is (exit 3, the traceback in the crash file)."""
    import json

    from commbench.folder.files import read_file

    with pytest.raises(InputError, match=r"^.*: unreadable run.json \(JSONDecodeError: "):
        read_file(tmp_path, "run.json", lambda: json.loads("{"))
    with pytest.raises(InputError, match=r"unreadable samples.parquet \(ArrowInvalid"):
        import pyarrow.parquet as pq

        (tmp_path / "s.parquet").write_bytes(b"PAR1 not parquet PAR1")
        read_file(tmp_path, "samples.parquet", lambda: pq.read_metadata(tmp_path / "s.parquet"))
    with pytest.raises(TypeError, match="unsupported operand"):
        read_file(tmp_path, "results.csv", lambda: 1 + "1")
    with pytest.raises(KeyError):
        read_file(tmp_path, "run.json", lambda: {}["status"])
