"""The one reader of run folders (for report, compare, the model, the topology comparison and
`run --resume`): rows checked against the schema (commbench.results) like command-line input,
run.json, and on request the samples. An unusable folder is one InputError, "<folder>: <problem>"
naming the first bad row. Folders of every format version up to commbench.results.FORMAT_VERSION
load (version 1: no format_version in run.json)."""

from __future__ import annotations

import csv
import io
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from commbench.errors import InputError
from commbench.rank.collectives import COLLECTIVES
from commbench.results import (AMOUNT, COUNT, FORMAT_VERSION, KINDS, MAY_BE_EMPTY, POSITIVE, REQUIRED, RESULTS_CSV,
                               RUN_JSON, SAMPLE_KINDS, SAMPLE_REQUIRED, SAMPLES_CSV, SAMPLES_PARQUET, TIME)

AB_KEYS = ("side", "round")  # commbench ab: a point has a row per side and round
OPTIONAL_STATS = ("time_us_min", "time_us_p95", "time_us_p99", "samples")  # NaN where a folder lacks them
_EXACT = 2**53  # integers past this are not exact as numbers
_WHAT = {COUNT: "an integer >= 0", POSITIVE: "an integer >= 1", TIME: "a time in µs (a finite number > 0)",
         AMOUNT: "a finite number >= 0"}
# run.json fields that readers use, and the JSON type each has where present
MAX_RUN_JSON_BYTES = 32 << 20  # a run's record: its spec (10,000 sizes), ranks, jobs and skips fit many times
_META_TYPES = {"run_id": str, "label": str, "status": str, "spec": dict, "versions": dict, "environment": dict,
               "rank0_environment": dict, "ranks": list, "jobs": list, "command_line": list, "launcher_args": list,
               "hosts": list, "gpus": list}
_JSON_NAMES = {str: "a string", dict: "an object", list: "a list"}


def run_dirs(path: str | Path) -> list[Path]:
    """A run folder, or every run folder below a folder (a sweep)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{str(p)!r} does not exist")
    if not p.is_dir():
        raise InputError(f"{str(p)!r} is not a folder (give a run folder, or a sweep holding runs)")
    if (p / RESULTS_CSV).exists():
        return [p]
    found = sorted(d.parent for d in p.rglob(RESULTS_CSV))
    if not found:
        raise InputError(f"{str(p)!r} holds no results.csv")
    return found


def read_csv(source, **options) -> pd.DataFrame:
    """pandas.read_csv, strict: a row with more fields than the header is an error (pandas would
    otherwise take the first column as an index and shift every value, or drop the extra one)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.ParserWarning)
        return pd.read_csv(source, index_col=False, **options)


def samples_csv(source) -> pd.DataFrame:
    """samples.csv as the checks read it: run ids as text, only an empty cell missing (a "nan"
    stays text, and is refused as a time)."""
    return read_csv(source, dtype={"run_id": str}, keep_default_na=False, na_values=[""])


def _sample_files(d: Path, strict: bool):
    """(file name, its samples) per samples file of the folder; strict: CSV read as the checks read it."""
    found = False
    for name, reader in ((SAMPLES_PARQUET, pd.read_parquet), (SAMPLES_CSV, samples_csv if strict else read_csv)):
        if (d / name).exists():
            regular_file(d, name)
            found = True
            yield name, read_file(d, name, lambda: reader(d / name))
    if not found:
        raise InputError(f"{d}: no samples ({SAMPLES_PARQUET} or {SAMPLES_CSV})")


def read_samples(d: str | Path) -> pd.DataFrame:
    """All per-iteration samples of a run, whichever form they are in (both after a resume)."""
    return pd.concat([samples for _, samples in _sample_files(Path(d), strict=False)], ignore_index=True)


def regular_file(d: Path, name: str) -> None:
    """A file a reader opens must be a regular file (not a folder, a FIFO or a device, which block or never end)."""
    if not (d / name).is_file():
        raise InputError(f"{d}: {name} is not a regular file")


def read_file(d: Path, name: str, reader):
    try:
        return reader()
    except InputError:
        raise
    except FileNotFoundError as exc:
        raise InputError(f"{d}: {exc}".splitlines()[0]) from None
    except Exception as exc:  # noqa: BLE001 - any unreadable file is unusable input
        raise InputError(f"{d}: unreadable {name} ({type(exc).__name__}: {exc})".splitlines()[0]) from None


def format_version(d: Path, meta: dict) -> int:
    """The folder's results format version; an InputError for a version this commbench cannot read."""
    version = meta.get("format_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InputError(f"{d}: {RUN_JSON} has format_version {version!r}, not a version number")
    if version > FORMAT_VERSION:
        raise InputError(f"{d}: results format version {version} is newer than this commbench reads "
                         f"(up to {FORMAT_VERSION}); upgrade commbench")
    return version


def read_meta(d: str | Path) -> dict:
    """run.json ({} when the folder has none), its fields checked: a JSON object, a format version
    this commbench reads, the fields readers use of their types, and the recorded spec's fields
    of the types a spec has (commbench.spec.SweepSpec.from_json)."""
    from commbench.spec import SweepSpec

    d = Path(d)
    if not (d / RUN_JSON).exists():
        return {}
    regular_file(d, RUN_JSON)
    if (d / RUN_JSON).stat().st_size > MAX_RUN_JSON_BYTES:
        raise InputError(f"{d}: {RUN_JSON} is larger than {MAX_RUN_JSON_BYTES >> 20} MiB, more than any run records")
    meta = read_file(d, RUN_JSON, lambda: json.loads((d / RUN_JSON).read_bytes()))
    if not isinstance(meta, dict):
        raise InputError(f"{d}: {RUN_JSON} is not a JSON object")
    try:  # JSON's \ud800 escapes decode to lone surrogates, which no file or terminal takes
        json.dumps(meta, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{d}: {RUN_JSON} holds text that is not Unicode (a lone surrogate escape)") from None
    format_version(d, meta)
    meta = {k: v for k, v in meta.items() if not (v is None and k in _META_TYPES)}  # null: not recorded (older)
    for key, kind in _META_TYPES.items():
        if key in meta and not isinstance(meta[key], kind):
            raise InputError(f"{d}: {RUN_JSON} field {key!r} must be {_JSON_NAMES[kind]}, "
                             f"not {json.dumps(meta[key])[:40]}")
    for key in ("ranks", "jobs"):
        if not all(isinstance(item, dict) for item in meta.get(key, [])):
            raise InputError(f"{d}: {RUN_JSON} field {key!r} holds an entry that is not a JSON object")
    if "spec" in meta:
        known = {k: v for k, v in meta["spec"].items() if k in SweepSpec.__dataclass_fields__}
        try:
            SweepSpec.from_json(json.dumps(known))
        except InputError as exc:
            raise InputError(f"{d}: {RUN_JSON}: {exc}") from None
    return meta


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
                ok &= (num == np.floor(num)) & (np.abs(num) < _EXACT) & (num >= (1 if kind == POSITIVE else 0))
            else:
                ok &= num > 0 if kind == TIME else num >= 0
        bad = ~ok & ~empty.to_numpy()
        if bad.any():
            i = int(np.argmax(bad))
            value = raw.iloc[i]
            value = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
            found.append((i, f"{col} {value[:40] + ('...' if len(value) > 40 else '')!r} is not {_WHAT[kind]}"))
    return min(found) if found else None


def checked(d: Path, name: str, frame: pd.DataFrame, kinds: dict, required, may_be_empty=()) -> pd.DataFrame:
    """frame with the columns of kinds as numbers (integers where no cell is empty), after checking
    every cell: an InputError "<d>: <name> row N: <problem>" for the first bad one."""
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError(f"{d}: {name} is missing columns {', '.join(missing)}")
    bad = _first_bad(name, frame, kinds, required, may_be_empty)
    if bad:
        raise InputError(f"{d}: {name} row {bad[0] + 1}: {bad[1]}")
    numbers = {}
    for col in frame.columns:
        if col in kinds:
            num = pd.to_numeric(frame[col], errors="coerce").astype(float)
            numbers[col] = num.astype(np.int64) if kinds[col] in (COUNT, POSITIVE) and not num.isna().any() else num
    return frame.assign(**numbers)


def parse_results(d: Path, data: bytes) -> pd.DataFrame:
    """results.csv's bytes (whole lines) as checked rows: UTF-8 text, a header of distinct names
    with every required column, each cell what its column holds (commbench.results.KINDS).
    Text columns are read as text, the others as numbers where every cell is one."""
    if b"\0" in data:
        raise InputError(f"{d}: unreadable {RESULTS_CSV} (not text: it holds NUL bytes)")
    header = read_file(d, RESULTS_CSV, lambda: next(csv.reader([data.split(b"\n", 1)[0].decode("utf-8")]), []))
    if data and not "".join(header).strip():
        raise InputError(f"{d}: {RESULTS_CSV} does not start with its header (its first line is blank)")
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise InputError(f"{d}: {RESULTS_CSV} names columns twice: {', '.join(twice)}")
    text = {c: str for c in header if c not in KINDS}
    rows = read_file(d, RESULTS_CSV, lambda: read_csv(io.BytesIO(data), dtype=text, keep_default_na=False,
                                                      na_values=[""]))
    rows = checked(d, RESULTS_CSV, rows, KINDS, REQUIRED, MAY_BE_EMPTY)
    unknown = ~rows.collective.isin(list(COLLECTIVES))  # the registry's, plugins' included (what readers look up)
    if unknown.any():
        i = int(np.argmax(unknown.to_numpy()))
        raise InputError(f"{d}: {RESULTS_CSV} row {i + 1}: collective {str(rows.collective.iloc[i])[:40]!r} is none "
                         f"this commbench knows ({', '.join(COLLECTIVES)})")
    return rows


def read_results(d: Path) -> pd.DataFrame:
    regular_file(d, RESULTS_CSV)
    rows = parse_results(d, read_file(d, RESULTS_CSV, lambda: (d / RESULTS_CSV).read_bytes()))
    if rows.empty:
        raise InputError(f"{d}: {RESULTS_CSV} holds no rows")
    return rows


def checked_samples(d: Path, samples: pd.DataFrame, name: str = "samples") -> pd.DataFrame:
    """Samples with point, iteration and job as integers and every time_us finite and > 0."""
    samples = checked(d, name, samples, SAMPLE_KINDS, SAMPLE_REQUIRED)
    return samples.assign(run_id=samples.run_id.astype(str))


def _with_samples(d: Path, rows: pd.DataFrame) -> pd.DataFrame:
    """Each row's samples as an array (sample_values); a row without samples has its time_us."""
    samples = pd.concat([checked_samples(d, part, name) for name, part in _sample_files(d, strict=True)],
                        ignore_index=True)
    jobs = samples.job.fillna(1).astype(int) if "job" in samples else 1  # a folder of one job: no column
    keys = ["run_id", "point", "job"] + [c for c in AB_KEYS if c in rows and c in samples]  # ab: a row per side, round
    grouped = {k: g.time_us.to_numpy(float) for k, g in samples.assign(job=jobs).groupby(keys)}
    return rows.assign(sample_values=[grouped.get(tuple(k), np.array([t])) for *k, t in
                                      zip(*(rows[c] for c in keys), rows.time_us, strict=True)])


def load_run(d: str | Path, samples: bool = False) -> tuple[pd.DataFrame, dict]:
    """One run folder: its rows (with `run`, the run's name, and sample_values if samples) and
    its run.json ({} when it has none)."""
    d = Path(d)
    meta = read_meta(d)
    rows = read_results(d)
    name = str(meta.get("label") or meta.get("run_id") or d.name)
    runs = name + " " + rows.side.astype(str) if "side" in rows else name  # ab: each side a run of its own
    rows = rows.assign(run=runs, op=rows.op.fillna("none"),
                       run_id=rows.run_id.astype(str),
                       job=rows.job.fillna(1).astype(int) if "job" in rows else 1)  # job: 1..N (--repeat)
    for col in OPTIONAL_STATS:
        if col not in rows:
            rows[col] = float("nan")
    return (_with_samples(d, rows) if samples else rows), meta


def load_runs(paths, samples: bool = False) -> tuple[pd.DataFrame, list[tuple[str, dict]]]:
    """Every run under paths (run folders or sweeps): all rows, and (folder, run.json) per run."""
    frames, metas = [], []
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        for d in run_dirs(path):
            rows, meta = load_run(d, samples)
            frames.append(rows)
            metas.append((str(d), meta))
    rows = pd.concat(frames, ignore_index=True)
    if "energy_j" in rows and "energy_j_per_byte" not in rows:
        rows["energy_j_per_byte"] = rows.energy_j / rows.size_bytes
    return rows, metas
