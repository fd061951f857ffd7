"""The folder's CSV files as frames, read strictly and checked cell by cell against the kinds its
schema gives each column (commbench.folder.schema): the checks every reader of a results folder
shares (rows by commbench.folder.load, samples by commbench.folder.samples, ranks by
commbench.analysis.stragglers)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from commbench.errors import InputError
from commbench.folder.schema import (AMOUNT, COUNT, EXACT_INTEGERS, MAX_TIME_US, POSITIVE, SAMPLE_KINDS,
                                     SAMPLE_REQUIRED, TIME)

_WHAT = {COUNT: "an integer >= 0", POSITIVE: "an integer >= 1",
         TIME: f"a time in µs (a number > 0, at most {MAX_TIME_US:g})", AMOUNT: "a finite number >= 0"}


def read_csv(source, **options) -> pd.DataFrame:
    """pandas.read_csv, strict: a row with more fields than the header is an error (pandas would
    otherwise take the first column as an index and shift every value, or drop the extra one)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.ParserWarning)
        return pd.read_csv(source, index_col=False, **options)


SAMPLES_CSV_OPTIONS = {"dtype": {"run_id": str}, "keep_default_na": False, "na_values": [""]}


def samples_csv(source) -> pd.DataFrame:
    """samples.csv as the checks read it: run ids as text, only an empty cell missing (a "nan"
    stays text, and is refused as a time)."""
    return read_csv(source, **SAMPLES_CSV_OPTIONS)


def _first_bad(name: str, frame: pd.DataFrame, kinds: dict, required, may_be_empty=()) -> tuple[int, str] | None:
    """(row, problem) of the first cell that is not what its column holds, or None."""
    found = []
    for col in frame.columns:
        raw = frame[col]
        empty = raw.isna() if pd.api.types.is_numeric_dtype(raw) else raw.isna() | (raw.astype(str).str.strip() == "")
        if col in required and col not in may_be_empty and empty.any():
            found.append((int(np.argmax(empty.to_numpy())), f"{col} is empty"))
        kind = kinds.get(col)
        if kind is None:
            continue
        if kind == AMOUNT and col not in required and not pd.api.types.is_numeric_dtype(raw):
            empty |= raw.astype(str).str.strip().str.lower() == "nan"  # NaN written for an amount not recorded
        num = pd.to_numeric(raw, errors="coerce").astype(float).to_numpy()
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(num)
            if kind in (COUNT, POSITIVE):
                ok &= (num == np.floor(num)) & (np.abs(num) < EXACT_INTEGERS)
                ok &= num >= (1 if kind == POSITIVE else 0)
            else:
                ok &= (num > 0) & (num <= MAX_TIME_US) if kind == TIME else num >= 0
        bad = ~ok & ~empty.to_numpy()
        if bad.any():
            i = int(np.argmax(bad))
            value = raw.iloc[i]
            whole = isinstance(value, float) and value.is_integer() and abs(value) < EXACT_INTEGERS
            value = str(int(value)) if whole else str(value)
            found.append((i, f"{col} {value[:40] + ('...' if len(value) > 40 else '')!r} is not {_WHAT[kind]}"))
    return min(found) if found else None


def checked(d: Path, name: str, frame: pd.DataFrame, kinds: dict, required, may_be_empty=(),
            first_row: int = 0) -> pd.DataFrame:
    """frame with the columns of kinds as numbers (integers where no cell is empty), after checking
    every cell: an InputError "<d>: <name> row N: <problem>" for the first bad one (N counted from
    first_row + 1: the frame may be a piece of the file)."""
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError(f"{d}: {name} is missing columns {', '.join(missing)}")
    bad = _first_bad(name, frame, kinds, required, may_be_empty)
    if bad:
        raise InputError(f"{d}: {name} row {first_row + bad[0] + 1}: {bad[1]}")
    numbers = {}
    for col in frame.columns:
        if col in kinds:
            num = pd.to_numeric(frame[col], errors="coerce").astype(float)
            numbers[col] = num.astype(np.int64) if kinds[col] in (COUNT, POSITIVE) and not num.isna().any() else num
    return frame.assign(**numbers)


def checked_samples(d: Path, samples: pd.DataFrame, name: str = "samples", first_row: int = 0) -> pd.DataFrame:
    """Samples with point, iteration and job as integers and every time_us finite and > 0 (first_row:
    the file's row of the frame's first, for the refusal's row number)."""
    samples = checked(d, name, samples, SAMPLE_KINDS, SAMPLE_REQUIRED, first_row=first_row)
    return samples.assign(run_id=samples.run_id.astype(str))
