"""The one reader of run folders (for report, compare, the model, the topology comparison and
`run --resume`): rows checked against the schema (commbench.folder.schema) like command-line input,
run.json, and on request the samples. An unusable folder is one InputError, "<folder>: <problem>"
naming the first bad row. Folders of every format version up to commbench.folder.schema.FORMAT_VERSION
load (version 1: no format_version in run.json). Nothing is parsed before its size is known to be
within commbench.folder.limits, no link is followed out of a folder, and only regular files are
opened: finding the folders and opening their files is commbench.folder.files'."""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from commbench.folder import limits
from commbench.folder.files import header_names, read_bytes, read_file, run_dirs
from commbench.folder.frames import checked, read_csv
from commbench.folder.record import read_fields
from commbench.folder.samples import batches, grouped
from commbench.errors import InputError
from commbench.collectives import COLLECTIVES
from commbench.folder.schema import FORMAT_VERSION, KINDS, MAY_BE_EMPTY, REQUIRED, RESULTS_CSV, RUN_JSON, SAMPLE_REQUIRED

AB_KEYS = ("side", "round")  # commbench ab: a point has a row per side and round
OPTIONAL_STATS = ("time_us_min", "time_us_p95", "time_us_p99", "samples")  # NaN where a folder lacks them
_READ = read_fields()  # run.json fields that readers use: their JSON type checked where present


def read_samples(d: str | Path) -> pd.DataFrame:
    """All per-iteration samples of a run as written, whichever form they are in (both after a
    resume: commbench.folder.samples.batches), unchecked."""
    parts = [batch for _, batch, _ in batches(Path(d), strict=False)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(SAMPLE_REQUIRED))


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
    if not os.path.lexists(d / RUN_JSON):
        return {}
    data = read_bytes(d, RUN_JSON, limits.RUN_JSON_BYTES)
    meta = read_file(d, RUN_JSON, lambda: json.loads(data))
    if not isinstance(meta, dict):
        raise InputError(f"{d}: {RUN_JSON} is not a JSON object")
    try:  # JSON's \ud800 escapes decode to lone surrogates, which no file or terminal takes
        json.dumps(meta, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{d}: {RUN_JSON} holds text that is not Unicode (a lone surrogate escape)") from None
    format_version(d, meta)
    meta = {k: v for k, v in meta.items() if not (v is None and k in _READ)}  # null: not recorded (older)
    for key, field in _READ.items():
        if key in meta and not field.fits(meta[key]):
            raise InputError(f"{d}: {RUN_JSON} field {key!r} must be {field.what}, not {json.dumps(meta[key])[:40]}")
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


def parse_results(d: Path, data: bytes) -> pd.DataFrame:
    """results.csv's bytes (whole lines) as checked rows: UTF-8 text, a header of distinct names
    with every required column, each cell what its column holds (commbench.folder.schema.KINDS).
    Text columns are read as text, the others as numbers where every cell is one."""
    if b"\0" in data:
        raise InputError(f"{d}: unreadable {RESULTS_CSV} (not text: it holds NUL bytes)")
    header = header_names(d, RESULTS_CSV, data)
    if data and not "".join(header).strip():
        raise InputError(f"{d}: {RESULTS_CSV} does not start with its header (its first line is blank)")
    twice = sorted(c for c, n in Counter(header).items() if n > 1)
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
    """results.csv within the limits (its bytes, rows and columns counted before it is parsed), checked
    (parse_results), with rows and no point measured twice by one job (a row copied)."""
    data = read_bytes(d, RESULTS_CSV)
    limits.ROWS.check(f"{d}: {RESULTS_CSV}", max(data.count(b"\n") - 1, 0))
    rows = parse_results(d, data)
    if rows.empty:
        raise InputError(f"{d}: {RESULTS_CSV} holds no rows")
    keys = ["run_id", "point"] + [k for k in ("job", *AB_KEYS) if k in rows]
    twice = rows.duplicated(keys).to_numpy()
    if twice.any():
        i = int(np.argmax(twice))
        raise InputError(f"{d}: {RESULTS_CSV} row {i + 1} measures what an earlier row does (the same "
                         f"{', '.join(keys)}): a copied row")
    return rows


def _with_samples(d: Path, rows: pd.DataFrame) -> pd.DataFrame:
    """Each row's samples as an array (sample_values); a row without samples has its time_us."""
    keys, found = grouped(d, ["run_id", "point", "job"] + [c for c in AB_KEYS if c in rows])  # ab: per side, round
    return rows.assign(sample_values=[found.get(tuple(k), np.array([t])) for *k, t in
                                      zip(*(rows[c] for c in keys), rows.time_us, strict=True)])


def load_run(d: str | Path, samples: bool = False, name: str | None = None) -> tuple[pd.DataFrame, dict]:
    """One run folder: its rows (with `run`, the run's name: `name`, else its label, run id or
    folder name; `folder`, the folder; and sample_values if samples) and its run.json ({} when
    it has none)."""
    d = Path(d)
    meta = read_meta(d)
    return _rows(d, meta, samples, name or _own_name(d, meta)), meta


def _rows(d: Path, meta: dict, samples: bool, name: str) -> pd.DataFrame:
    rows = read_results(d)
    own = meta.get("run_id")
    others = sorted(set(rows.run_id.astype(str)) - {str(own)}) if own else []
    if others:  # (one writer per folder: two runs' rows in one results.csv are not one run)
        raise InputError(f"{d}: {RESULTS_CSV} holds rows of run {others[0][:40]!r}"
                         f"{f' (and {len(others) - 1} more)' if len(others) > 1 else ''}, not only of "
                         f"run.json's {str(own)[:40]!r}: two runs wrote this folder")
    runs = name + " " + rows.side.astype(str) if "side" in rows else name  # ab: each side a run of its own
    rows = rows.assign(run=runs, folder=str(d), op=rows.op.fillna("none"),
                       run_id=rows.run_id.astype(str),
                       job=rows.job.fillna(1).astype(int) if "job" in rows else 1)  # job: 1..N (--repeat)
    for col in OPTIONAL_STATS:
        if col not in rows:
            rows[col] = float("nan")
    return _with_samples(d, rows) if samples else rows


def _own_name(d: Path, meta: dict) -> str:
    return str(meta.get("label") or meta.get("run_id") or d.name)


def run_names(folders: list[Path], metas: list[dict]) -> list[str]:
    """A name per run that no other run of the list has, for the report's legends and tables: the
    label, else the folder's name (which a person chose, or is the run id); runs that share one
    (two `sweep ci` folders, each with a run labelled "native") are told apart by the end of their
    folder path, as short as tells each apart ("ci_a/native", "ci_b/native"; "nightly (run1)"
    where the folder is not named for the label), and a name still shared (the same folder given
    twice) gets a number ("#2")."""
    own = [str(m.get("label") or Path(d).name or m.get("run_id")) for d, m in zip(folders, metas, strict=True)]
    names = list(own)
    for name in set(own):
        same = [i for i, o in enumerate(own) if o == name]
        if len(same) < 2:
            continue
        parts = [Path(folders[i]).resolve().parts for i in same]
        for i, p in zip(same, parts, strict=True):
            others = {q for q in parts if q != p}  # the same folder twice: told apart below
            depth = next((d for d in range(1, len(p)) if all(q[-d:] != p[-d:] for q in others)), len(p))
            tail = str(Path(*p[-depth:]))
            names[i] = tail if p[-1] == name else f"{name} ({tail})"
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            names[i] = f"{name} #{seen[name]}"
    return names


def refuse_repeats(runs, consequence: str) -> None:
    """(run id, folder) of each run as found: a run found a second time (its folder given twice, or a
    copy of it) is refused in one line saying `consequence`."""
    seen: dict[str, str] = {}
    for run_id, folder in runs:
        if run_id in seen:
            raise InputError(f"run {str(run_id)[:60]!r} is there twice ({str(seen[run_id])!r} and {str(folder)!r}): "
                             f"{consequence}; give each run once")
        seen[run_id] = folder


def load_runs(paths, samples: bool = False) -> tuple[pd.DataFrame, list[tuple[str, dict]]]:
    """Every run under paths (run folders or sweeps): all rows, each run's named apart from the
    others (run_names), and (folder, run.json) per run."""
    folders = [d for path in ([paths] if isinstance(paths, (str, Path)) else paths) for d in run_dirs(path)]
    metas = [read_meta(d) for d in folders]
    names = run_names(folders, metas)
    frames = [_rows(d, meta, samples, name) for d, meta, name in zip(folders, metas, names, strict=True)]
    rows = pd.concat(frames, ignore_index=True)
    if "energy_j" in rows and "energy_j_per_byte" not in rows:
        rows["energy_j_per_byte"] = rows.energy_j / rows.size_bytes
    return rows, [(str(d), meta) for d, meta in zip(folders, metas, strict=True)]
