"""What `run --resume` finds in a run folder, checked and repaired (RunFolder.check and repair):
the points that have a row, the files' whole lines, and what an interrupted run can leave behind
(a partial last line, samples of a point whose row was never written) cut away. Anything else is
one InputError, and nothing is written before the whole folder is checked. Appending rows and
samples and run.json are commbench.folder.write's."""

from __future__ import annotations

import csv
import io
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from commbench.folder import files as run_files, frames, limits, load
from commbench.errors import InputError
from commbench.folder.schema import (COLUMNS, RANK_COLUMNS, RANKS_CSV, RESULTS_CSV, SAMPLE_COLUMNS, SAMPLES_CSV,
                              SAMPLES_PARQUET)

if TYPE_CHECKING:
    from commbench.folder.write import RunFolder


def _text(data: bytes, partial: bool = False) -> bool:
    """UTF-8 text without NUL bytes; partial: a line cut mid-write, whose last character may be cut."""
    if b"\0" in data:
        return False
    for cut in range(4 if partial else 1):
        try:
            data[:len(data) - cut].decode("utf-8")
            return True
        except UnicodeDecodeError:
            pass
    return False


def _whole_lines(d: Path, name: str, columns) -> bytes:
    """The whole lines of a file the parent appends to, which must be text starting with its header:
    a crash mid-write can leave a last line without its newline, which a resume cuts off; anything
    but such a line (part of a row, or of the header commbench writes when nothing comes before it)
    is an InputError."""
    path = d / name
    if not path.exists() and not path.is_symlink():
        return b""
    if path.is_symlink() or not path.is_file():
        raise InputError(f"{d}: {name} is not a regular file of the folder (a resume appends to it)")
    data = run_files.read_bytes(d, name)  # within the readers' limit on a file's size
    if b"\0" in data:  # binary: refused before any copy of it
        raise InputError(f"{d}: {name} is not a {name} commbench wrote (not text: it holds NUL bytes)")
    whole = data[:data.rfind(b"\n") + 1]
    tail = data[len(whole):]
    header_first = not whole or whole.split(b"\n", 1)[0].strip()
    cut_short = not tail or _text(tail, partial=True) and (whole or ",".join(columns).encode().startswith(tail))
    if not (_text(whole) and header_first and cut_short):
        raise InputError(f"{d}: {name} is not a {name} commbench wrote (not UTF-8 text, no header first, or a "
                         "partial line that is no row)")
    return whole


def _same_width(d: Path, name: str, data: bytes) -> None:
    """Every line of a file the parent appends to has its header's number of fields: a line with
    one more, even an empty one, is no line commbench wrote (pandas would take it; repair could not)."""
    if not data:
        return
    rows = csv.reader(io.StringIO(data.decode("utf-8", errors="replace"), newline=""))
    width = len(next(rows, []))
    for number, row in enumerate(rows, start=2):
        if row and len(row) != width:
            raise InputError(f"{d}: {name} line {number} has {len(row)} fields, its header {width}: not a line "
                             "commbench wrote")


def _cut(path: Path, size: int) -> None:
    """Cut a file to its whole lines (size: their length)."""
    if path.exists() and path.stat().st_size > size:
        with open(path, "r+b") as f:
            f.truncate(size)
            os.fsync(f.fileno())


def _job_key(row: dict) -> tuple[int, int]:
    """(point, job) of a checked results or samples line; a line without a job is job 1."""
    return int(float(row["point"])), int(float(row.get("job") or 1))


def check(folder: RunFolder) -> tuple[set[int], bytes, bytes]:
    """What a resume finds, checked like command-line input and nothing written: the points
    that have a row (results.csv's whole lines), and the whole lines of results.csv and
    samples.csv. Anything but what an interrupted run leaves behind (a partial last line,
    samples of a point without a row) is one InputError: rows and samples as the loader checks
    them (commbench.folder.load), results.csv's columns the schema's, samples.parquet
    readable with the samples' columns. Counts the rows and wrong elements found."""
    results = _whole_lines(folder.dir, RESULTS_CSV, COLUMNS)
    samples = _whole_lines(folder.dir, SAMPLES_CSV, SAMPLE_COLUMNS)
    rows = load.parse_results(folder.dir, results) if results else pd.DataFrame(columns=["point", "wrong"])
    unknown = [c for c in rows.columns if c not in COLUMNS]
    if unknown:
        raise InputError(f"{folder.dir}: {RESULTS_CSV} has columns commbench does not write: "
                         f"{', '.join(map(repr, unknown[:5]))}")
    for name, text in ((RESULTS_CSV, results), (SAMPLES_CSV, samples)):
        _same_width(folder.dir, name, text)
    readers = {SAMPLES_CSV: lambda: frames.samples_csv(io.BytesIO(samples))} if samples else {}
    if (folder.dir / SAMPLES_PARQUET).exists():
        run_files.file_size(folder.dir, SAMPLES_PARQUET)  # a regular file of the folder, before it is opened
        parquet_rows, _ = run_files.parquet_rows(folder.dir, SAMPLES_PARQUET)  # from its metadata, before reading it
        limits.SAMPLES.check(f"{folder.dir}: {SAMPLES_PARQUET}", parquet_rows)
        readers[SAMPLES_PARQUET] = lambda: pd.read_parquet(folder.dir / SAMPLES_PARQUET)
    for name, read in readers.items():
        run_files.regular_file(folder.dir, name)
        found = run_files.read_file(folder.dir, name, read)
        extra = [c for c in found.columns if c not in SAMPLE_COLUMNS]  # a resumed run's samples join them
        if extra:
            raise InputError(f"{folder.dir}: {name} has columns commbench does not write: "
                             f"{', '.join(map(repr, extra[:5]))}")
        frames.checked_samples(folder.dir, found, name)
    points = rows.point.astype(int)
    jobs = rows.job.fillna(1).astype(int) if "job" in rows else [1] * len(rows)
    folder.measured = set(zip(points, jobs))  # (point, job): a row per job of a point
    folder.rows, folder.wrong = len(rows), int(rows.wrong.fillna(0).sum())
    folder.unreliable = int(rows.unreliable.fillna("").astype(str).str.len().gt(0).sum()) if "unreliable" in rows else 0
    folder.run_ids = set(rows.run_id.astype(str)) if "run_id" in rows else set()
    return set(points), results, samples


def repair(folder: RunFolder) -> set[int]:
    """Points that have a row, after checking the folder (check: an InputError changes
    nothing) and repairing what an interrupted run can leave behind: a partial last line, and
    samples of a point whose row was never written (dropped, since the point will be measured
    again). Counts the rows and wrong elements found."""
    done, results, samples_text = check(folder)
    _cut(folder.dir / RESULTS_CSV, len(results))
    _keep_measured(folder, SAMPLES_CSV, samples_text, SAMPLE_COLUMNS)
    if (folder.dir / RANKS_CSV).exists() or (folder.dir / RANKS_CSV).is_symlink():
        ranks = _whole_lines(folder.dir, RANKS_CSV, RANK_COLUMNS)
        _same_width(folder.dir, RANKS_CSV, ranks)
        _keep_measured(folder, RANKS_CSV, ranks, RANK_COLUMNS)
    return done


def _keep_measured(folder: RunFolder, name: str, whole: bytes, columns) -> None:
    """Rewrite a samples file of the folder (its whole lines) with only the lines of points that have a row."""
    path = folder.dir / name
    if not path.exists():
        return
    text = whole.decode()
    header = next(csv.reader(io.StringIO(text, newline="")), None) or list(columns)
    keep = [row for row in csv.DictReader(io.StringIO(text, newline="")) if _job_key(row) in folder.measured]
    fd, tmp = tempfile.mkstemp(dir=folder.dir, prefix=f".{name}.")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=header)
            writer.writeheader()
            writer.writerows(keep)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
