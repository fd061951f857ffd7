"""commbench.folder.samples reads a folder's samples in pieces: what it gives is what reading
the files whole gave (order, keys, the Parquet file's samples winning over the CSV file's), and a
bad cell is named by its row in the file, whichever piece it is in."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from commbench.folder import samples
from commbench.errors import InputError

HEADER = "run_id,point,iteration,time_us,job\n"


@pytest.fixture
def small_pieces(monkeypatch):
    monkeypatch.setattr(samples, "BATCH", 2)


def _csv(folder, lines):
    folder.mkdir(exist_ok=True)
    (folder / "samples.csv").write_text(HEADER + "".join(f"{line}\n" for line in lines))
    return folder


def test_a_bad_cell_is_named_by_its_row_in_the_file(tmp_path, small_pieces):
    d = _csv(tmp_path / "run", ["r,0,0,1.5,1", "r,0,1,1.5,1", "r,0,2,1.5,1", "r,0,3,-2,1", "r,0,4,1.5,1"])
    with pytest.raises(InputError, match=r"samples.csv row 4: time_us '-2' is not a time"):
        samples.grouped(d, ["run_id", "point", "job"])


def test_pieces_join_in_file_order_and_the_parquet_file_wins(tmp_path, small_pieces):
    d = _csv(tmp_path / "run", ["r,0,0,9,1", "r,1,0,1,1", "r,1,1,2,1", "r,1,2,3,1", "r,2,0,7"])  # a piece each 2
    pd.DataFrame({"run_id": ["r"] * 3, "point": [0] * 3, "iteration": [0, 1, 2], "time_us": [4.0, 5.0, 6.0],
                  "job": [1] * 3}).to_parquet(d / "samples.parquet")
    keys, found = samples.grouped(d, ["run_id", "point", "job"])
    assert keys == ["run_id", "point", "job"]
    assert {k: v.tolist() for k, v in found.items()} == {("r", 0, 1): [4.0, 5.0, 6.0], ("r", 1, 1): [1.0, 2.0, 3.0],
                                                          ("r", 2, 1): [7.0]}  # job empty: 1


def test_a_csv_file_of_only_its_header_beside_the_parquet_file_adds_nothing(tmp_path):
    """Found by the loader's fuzz test: the CSV file's piece without rows, filtered against the
    Parquet file's keys, kept its columns (an empty list was taken for a column selection)."""
    d = tmp_path / "run"
    d.mkdir()
    pd.DataFrame({"run_id": ["r"] * 2, "point": [0] * 2, "iteration": [0, 1], "time_us": [4.0, 5.0],
                  "job": [1] * 2}).to_parquet(d / "samples.parquet")
    (d / "samples.csv").write_text("run_id,point,iteration,time_us")  # no newline, no row
    keys, found = samples.grouped(d, ["run_id", "point", "job"])
    assert keys == ["run_id", "point", "job"] and {k: v.tolist() for k, v in found.items()} == {("r", 0, 1): [4.0, 5.0]}


def test_a_folder_of_one_job_has_no_job_column(tmp_path, small_pieces):
    d = tmp_path / "run"
    d.mkdir()
    (d / "samples.csv").write_text("run_id,point,iteration,time_us\nr,0,0,1\nr,0,1,2\nr,0,2,3\n")
    keys, found = samples.grouped(d, ["run_id", "point", "job"])
    assert keys == ["run_id", "point", "job"] and np.array_equal(found[("r", 0, 1)], [1.0, 2.0, 3.0])


def test_an_empty_parquet_file_is_checked_for_its_columns(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    pd.DataFrame({"run_id": pd.Series([], dtype=str), "iteration": pd.Series([], dtype=int)}).to_parquet(
        d / "samples.parquet")
    with pytest.raises(InputError, match="samples.parquet is missing columns point, time_us"):
        samples.grouped(d, ["run_id", "point", "job"])
    from commbench.folder.load import read_samples

    assert read_samples(d).empty
