"""The one reader of run folders (for report, compare, the model and the topology comparison):
rows checked against the schema (commbench.results), run.json, and on request the samples.
An unusable folder is one InputError, "<folder>: <problem>". Folders of every format version up
to commbench.results.FORMAT_VERSION load (version 1: no format_version in run.json)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from commbench.errors import InputError
from commbench.results import FORMAT_VERSION, REQUIRED, RESULTS_CSV, RUN_JSON, SAMPLES_CSV, SAMPLES_PARQUET

OPTIONAL_STATS = ("time_us_min", "time_us_p95", "time_us_p99", "samples")  # NaN where a folder lacks them


def run_dirs(path: str | Path) -> list[Path]:
    """A run folder, or every run folder below a folder (a sweep)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{str(p)!r} does not exist")
    if (p / RESULTS_CSV).exists():
        return [p]
    found = sorted(d.parent for d in p.rglob(RESULTS_CSV))
    if not found:
        raise InputError(f"{str(p)!r} holds no results.csv")
    return found


def read_samples(d: str | Path) -> pd.DataFrame:
    """All per-iteration samples of a run, whichever form they are in (both after a resume)."""
    d = Path(d)
    parts = []
    if (d / SAMPLES_PARQUET).exists():
        parts.append(pd.read_parquet(d / SAMPLES_PARQUET))
    if (d / SAMPLES_CSV).exists():
        parts.append(pd.read_csv(d / SAMPLES_CSV))
    if not parts:
        raise FileNotFoundError(f"no samples ({SAMPLES_PARQUET} or {SAMPLES_CSV})")
    return pd.concat(parts, ignore_index=True)


def _read(d: Path, name: str, reader):
    try:
        return reader()
    except FileNotFoundError as exc:
        raise InputError(f"{d}: {exc}".splitlines()[0]) from None
    except Exception as exc:  # noqa: BLE001 - any unreadable file is unusable input
        raise InputError(f"{d}: unreadable {name} ({type(exc).__name__}: {exc})".splitlines()[0]) from None


def _version(d: Path, meta: dict) -> int:
    version = meta.get("format_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InputError(f"{d}: {RUN_JSON} has format_version {version!r}, not a version number")
    if version > FORMAT_VERSION:
        raise InputError(f"{d}: results format version {version} is newer than this commbench reads "
                         f"(up to {FORMAT_VERSION}); upgrade commbench")
    return version


def _with_samples(d: Path, rows: pd.DataFrame) -> pd.DataFrame:
    """Each row's samples as an array (sample_values); a row without samples has its time_us."""
    samples = _read(d, "samples", lambda: read_samples(d))
    if not {"run_id", "point", "time_us"} <= set(samples.columns):
        raise InputError(f"{d}: the samples are missing columns run_id, point or time_us")
    jobs = samples.job.fillna(1).astype(int) if "job" in samples else 1  # a folder of one job: no column
    grouped = {k: g.time_us.to_numpy(float)
               for k, g in samples.assign(job=jobs).groupby(["run_id", "point", "job"])}
    return rows.assign(sample_values=[grouped.get((r, p, j), np.array([t])) for r, p, j, t in
                                      zip(rows.run_id, rows.point, rows.job, rows.time_us, strict=True)])


def load_run(d: str | Path, samples: bool = False) -> tuple[pd.DataFrame, dict]:
    """One run folder: its rows (with `run`, the run's name, and sample_values if samples) and
    its run.json ({} when it has none)."""
    d = Path(d)
    meta = _read(d, RUN_JSON, lambda: json.loads((d / RUN_JSON).read_text())) if (d / RUN_JSON).exists() else {}
    if not isinstance(meta, dict):
        raise InputError(f"{d}: {RUN_JSON} is not a JSON object")
    _version(d, meta)
    rows = _read(d, "results", lambda: pd.read_csv(d / RESULTS_CSV))
    missing = [c for c in REQUIRED if c not in rows.columns]
    if missing:
        raise InputError(f"{d}: {RESULTS_CSV} is missing columns {', '.join(missing)}")
    rows = rows.assign(run=str(meta.get("label") or meta.get("run_id") or d.name), op=rows.op.fillna("none"),
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
