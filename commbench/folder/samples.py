"""A run folder's per-iteration samples, read in bounded memory (issue 43: a command's peak within
10x the folders' size on disk): each samples file streamed in pieces of BATCH rows (a Parquet
file's row groups one at a time, a CSV file's lines), each piece checked as the loader checks
cells (frames.checked_samples, with the file's row numbers), and only each sample's time kept, in
one array per (run, point, job[, side, round]).

Samples in both files (a conversion to Parquet cut short between writing the Parquet file and
removing the CSV) are read once: the Parquet file's win, and the CSV file's samples of a key the
Parquet file holds are left out. Every file is within commbench.folder.limits before a byte of
it is parsed (its bytes, rows and columns): what reading it takes is a piece and 8 bytes a sample, however
few bytes the file holds (a Parquet file of repeated rows).
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from commbench.folder import limits
from commbench.folder.frames import SAMPLES_CSV_OPTIONS, checked_samples
from commbench.folder.files import file_size, header_names, parquet_rows, read_bytes, read_file
from commbench.errors import InputError
from commbench.folder.schema import SAMPLES_CSV, SAMPLES_PARQUET

BATCH = 1 << 16  # rows a piece: a few MB while it is checked
KEYS = ("run_id", "point", "job", "side", "round")  # a point's samples of one job (ab: of a side and round)


def batches(d: Path, strict: bool = True) -> Iterator[tuple[str, pd.DataFrame, int]]:
    """(file name, a piece of its samples, the file's row of the piece's first) for each samples
    file of folder d, the Parquet file's first; strict: each piece checked (checked_samples)."""
    held: set[tuple] = set()  # the Parquet file's keys (of held_by), as text: the CSV file's are left out
    held_by: list[str] = []
    found = False
    if os.path.lexists(d / SAMPLES_PARQUET):
        found = True
        file_size(d, SAMPLES_PARQUET)
        rows, columns = parquet_rows(d, SAMPLES_PARQUET)
        limits.SAMPLES.check(f"{d}: {SAMPLES_PARQUET}", rows)
        limits.COLUMNS.check(f"{d}: {SAMPLES_PARQUET}", columns)
        if strict and rows == 0:  # no piece to check: its columns are checked all the same
            checked_samples(d, pd.DataFrame(columns=_parquet_columns(d)), SAMPLES_PARQUET)
        for start, piece in _pieces(d, SAMPLES_PARQUET, _parquet_pieces(d / SAMPLES_PARQUET)):
            if strict:
                piece = checked_samples(d, piece, SAMPLES_PARQUET, start)
            held_by = [k for k in KEYS if k in piece]
            held.update(_row_keys(piece[held_by].drop_duplicates(), held_by))
            yield SAMPLES_PARQUET, piece, start
    if os.path.lexists(d / SAMPLES_CSV):
        found = True
        data = read_bytes(d, SAMPLES_CSV)
        limits.SAMPLES.check(f"{d}: {SAMPLES_CSV}", max(data.count(b"\n") - 1, 0))
        header_names(d, SAMPLES_CSV, data)
        for start, piece in _pieces(d, SAMPLES_CSV, _csv_pieces(data, SAMPLES_CSV_OPTIONS if strict else {})):
            if strict:
                piece = checked_samples(d, piece, SAMPLES_CSV, start)
            shared = [k for k in held_by if k in piece]
            if held and shared:
                seen = {tuple(key[held_by.index(k)] for k in shared) for key in held}
                new = np.array([key not in seen for key in _row_keys(piece, shared)], dtype=bool)  # a mask, even empty
                piece = piece[new].reset_index(drop=True)
            yield SAMPLES_CSV, piece, start
    if not found:
        raise InputError(f"{d}: no samples ({SAMPLES_PARQUET} or {SAMPLES_CSV})")


def grouped(d: Path, keys: list[str]) -> tuple[list[str], dict[tuple, np.ndarray]]:
    """(the keys grouped by, each key's samples: time_us in file order) of folder d, checked. The
    keys are those asked for that the samples have (a folder of one job has no job column: job 1);
    a piece of samples without one that others have is left out, as a missing value would be."""
    parts: dict[tuple, dict[tuple, list[np.ndarray]]] = {}
    for _, piece, _ in batches(d, strict=True):
        if "job" in keys:
            piece = piece.assign(job=piece.job.fillna(1).astype(int) if "job" in piece else 1)
        by = [k for k in keys if k in piece]
        times = piece.time_us.to_numpy(float)
        into = parts.setdefault(tuple(by), {})
        for key, index in piece.groupby(by, sort=False).indices.items():
            into.setdefault(key if isinstance(key, tuple) else (key,), []).append(times[index])
    used = [k for k in keys if any(k in by for by in parts)]
    chunks = parts.get(tuple(used), {})
    return used, {key: c[0] if len(c) == 1 else np.concatenate(c) for key, c in chunks.items()}


def _pieces(d: Path, name: str, pieces: Iterator[pd.DataFrame]) -> Iterator[tuple[int, pd.DataFrame]]:
    """(the file's row of the piece's first, piece); a file that does not read is one InputError naming it."""
    start = 0
    while (piece := read_file(d, name, lambda: next(pieces, None))) is not None:
        yield start, piece
        start += len(piece)


def _parquet_pieces(path: Path) -> Iterator[pd.DataFrame]:
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as f:
        for batch in f.iter_batches(batch_size=BATCH):
            yield batch.to_pandas()


def _parquet_columns(d: Path) -> list[str]:
    import pyarrow.parquet as pq

    return read_file(d, SAMPLES_PARQUET, lambda: pq.read_schema(d / SAMPLES_PARQUET).names)


def _csv_pieces(data: bytes, options: dict) -> Iterator[pd.DataFrame]:
    """The CSV file's rows BATCH at a time, strict as frames.read_csv (a row with more fields than the
    header is an error, not a shifted row)."""
    with pd.read_csv(io.BytesIO(data), index_col=False, chunksize=BATCH, **options) as reader:
        while True:
            with warnings.catch_warnings():
                warnings.simplefilter("error", pd.errors.ParserWarning)
                piece = next(reader, None)
            if piece is None:
                return
            yield piece


def _row_keys(piece: pd.DataFrame, keys: list[str]) -> list[tuple]:
    return list(zip(*(piece[k].astype(str) for k in keys), strict=True))
