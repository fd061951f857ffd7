"""The one reader of run folders (for report, compare, the model, the topology comparison and
`run --resume`): rows checked against the schema (commbench.schema) like command-line input,
run.json, and on request the samples. An unusable folder is one InputError, "<folder>: <problem>"
naming the first bad row. Folders of every format version up to commbench.schema.FORMAT_VERSION
load (version 1: no format_version in run.json). Nothing is parsed before its size is known to be
within commbench.analysis.limits (run_dirs' survey; each reader for its own file), no link is
followed out of a folder, and only regular files are opened (regular_file)."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import stat
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from commbench.analysis import limits
from commbench.errors import InputError
from commbench.collectives import COLLECTIVES
from commbench.schema import (AMOUNT, COUNT, FORMAT_VERSION, KINDS, MAY_BE_EMPTY, POSITIVE, REQUIRED, RESULTS_CSV,
                               RUN_JSON, SAMPLE_KINDS, SAMPLE_REQUIRED, SAMPLES_CSV, SAMPLES_PARQUET, TIME)

AB_KEYS = ("side", "round")  # commbench ab: a point has a row per side and round
OPTIONAL_STATS = ("time_us_min", "time_us_p95", "time_us_p99", "samples")  # NaN where a folder lacks them
_EXACT = 2**53  # integers past this are not exact as numbers
_WHAT = {COUNT: "an integer >= 0", POSITIVE: "an integer >= 1", TIME: "a time in µs (a finite number > 0)",
         AMOUNT: "a finite number >= 0"}
# run.json fields that readers use, and the JSON type each has where present
_META_TYPES = {"run_id": str, "label": str, "status": str, "spec": dict, "versions": dict, "environment": dict,
               "rank0_environment": dict, "ranks": list, "jobs": list, "command_line": list, "launcher_args": list,
               "hosts": list, "gpus": list}
_JSON_NAMES = {str: "a string", dict: "an object", list: "a list"}


def run_dirs(path: str | Path) -> list[Path]:
    """A run folder, or every run folder below a folder (a sweep), found without following a link
    (a link to a folder inside the path is left to the folder itself; one to outside, or a loop, is
    refused) and within the limits (commbench.analysis.limits): folder depth, folders walked, run
    folders, and what their files hold (survey), all before a file is parsed."""
    p = Path(path)
    if not p.exists():
        if os.path.lexists(p):
            raise InputError(f"{str(p)!r} is a link that leads nowhere (a loop, or a missing target)")
        raise InputError(f"{str(p)!r} does not exist")
    if not p.is_dir():
        raise InputError(f"{str(p)!r} is not a folder (give a run folder, or a sweep holding runs)")
    found = [p] if os.path.lexists(p / RESULTS_CSV) else _walk(p)
    if not found:
        raise InputError(f"{str(p)!r} holds no results.csv")
    survey(str(p), found)
    return found


def _walk(top: Path) -> list[Path]:
    """The folders below top that hold a results.csv, sorted; no link followed."""
    root, found, todo, walked = os.path.realpath(top), [], [(top, 0)], 0
    depth, folders, runs = limits.DEPTH.value(), limits.FOLDERS.value(), limits.RUNS.value()
    while todo:
        d, level = todo.pop()
        walked += 1
        if walked > folders:
            raise limits.FOLDERS.refusal(str(top))
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as exc:
            raise InputError(f"{str(d)!r}: {exc.strerror or exc}") from None
        for entry in entries:
            if entry.name == RESULTS_CSV and d != top:
                found.append(Path(d))
                if len(found) > runs:
                    raise limits.RUNS.refusal(str(top))
            if entry.is_symlink():
                _link(Path(entry.path), root)
            elif entry.is_dir(follow_symlinks=False):
                if level + 1 > depth:
                    raise limits.DEPTH.refusal(f"{str(top)!r} ({entry.path[:80]!r}...)")
                todo.append((Path(entry.path), level + 1))
    return sorted(found)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _link(link: Path, root: str) -> None:
    """A link met while walking: to a folder inside root, left (the folder is read where it is); to
    outside, or a loop, refused; to nothing or to a file, left."""
    try:
        target = os.stat(link)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"{str(link)!r} is a link loop") from None
        return  # leads nowhere
    if stat.S_ISDIR(target.st_mode) and not _inside(os.path.realpath(link), root):
        raise InputError(f"{str(link)!r} links to a folder outside {root!r}: readers follow no link out of a folder "
                         "(give that folder itself)")


def _count_lines(path: Path, limit: limits.Limit, subject: str) -> int:
    """Line ends in a file, read in 1 MiB pieces, refused as soon as they pass the limit."""
    lines, most = 0, limit.value() + 1  # + 1: the header
    with open(path, "rb") as f:
        while block := f.read(limits.MIB):
            lines += block.count(b"\n")
            if lines > most:
                raise limit.refusal(subject, lines - 1)
    return lines


PARQUET_FOOTER_MAX = 16 << 20  # a samples file's metadata is kilobytes


def parquet_rows(d: Path, name: str) -> tuple[int, int]:
    """(rows, columns) of a Parquet file from its metadata alone (a footer larger than
    PARQUET_FOOTER_MAX is refused before it is read)."""
    import importlib

    pq = read_file(d, name, lambda: importlib.import_module("pyarrow.parquet"))  # not installed: unreadable
    path = d / name
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() < 12:
            raise InputError(f"{d}: unreadable {name} (too short for Parquet)")
        f.seek(-8, os.SEEK_END)
        tail = f.read(8)
    if tail[4:] != b"PAR1" or int.from_bytes(tail[:4], "little") > PARQUET_FOOTER_MAX:
        raise InputError(f"{d}: unreadable {name} (no Parquet footer, or one over {PARQUET_FOOTER_MAX >> 20} MiB)")
    meta = read_file(d, name, lambda: pq.read_metadata(path))
    return meta.num_rows, meta.num_columns


def survey(subject: str, folders: list[Path]) -> None:
    """Every limit on what the folders' files hold, checked before one is parsed: each file a regular
    file inside its folder and within FILE_BYTES; together within READ_BYTES, ROWS and SAMPLES
    (a Parquet file's rows from its metadata, a CSV file's by counting line ends)."""
    total, rows, samples = 0, 0, 0
    for d in folders:
        for name in (RESULTS_CSV, SAMPLES_CSV, SAMPLES_PARQUET):
            if not os.path.lexists(d / name):
                continue
            total += file_size(d, name)
            limits.READ_BYTES.check(subject, total)
            if name == SAMPLES_PARQUET:
                samples += parquet_rows(d, name)[0]
            else:
                count = max(_count_lines(d / name, limits.ROWS if name == RESULTS_CSV else limits.SAMPLES,
                                         f"{d}: {name}") - 1, 0)
                rows, samples = (rows + count, samples) if name == RESULTS_CSV else (rows, samples + count)
            limits.ROWS.check(subject, rows)
            limits.SAMPLES.check(subject, samples)


def file_size(d: Path, name: str, limit: limits.Limit = limits.FILE_BYTES) -> int:
    """The size of a file of the folder: a regular file inside it (regular_file), within the limit."""
    return limit.check(f"{d}: {name}", regular_file(d, name).st_size)


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


def read_samples(d: str | Path) -> pd.DataFrame:
    """All per-iteration samples of a run as written, whichever form they are in (both after a
    resume: commbench.analysis.samples.batches), unchecked."""
    from commbench.analysis.samples import batches

    parts = [batch for _, batch, _ in batches(Path(d), strict=False)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(SAMPLE_REQUIRED))


def regular_file(d: Path, name: str, inside: bool = True) -> os.stat_result:
    """A file a reader opens must be a regular file (not a folder, a FIFO or a device, which block or
    never end) and, in a result folder (inside), not a link to outside the folder. Its stat. A file
    named on the command line (not inside) is refused as "cannot read '<path>': ..."."""
    p = Path(d) / name
    where = f"{d}: {name}" if inside else f"cannot read {str(p)!r}"
    try:
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            if inside and not _inside(os.path.realpath(p), os.path.realpath(d)):
                raise InputError(f"{d}: {name} links to outside the folder (readers follow no link out of a folder)")
            st = os.stat(p)
    except OSError as exc:  # a loop, a dangling link, no permission
        raise InputError(f"{where}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{d}: {name} is not a regular file" if inside else
                         f"{where}: not a regular file (a FIFO, device or folder is not read)")
    return st


def read_bytes(d: Path, name: str, limit: limits.Limit = limits.FILE_BYTES) -> bytes:
    """A file of the folder, whole: a regular file inside it, its size within the limit before it is read."""
    size = file_size(d, name, limit)
    with open(d / name, "rb") as f:
        return read_file(d, name, lambda: f.read(size + 1))[:size]


def header_names(d: Path, name: str, data: bytes) -> list[str]:
    """The names of a CSV file's header (its first line), at most COLUMNS of them, in linear time."""
    first = data.split(b"\n", 1)[0]
    limits.COLUMNS.check(f"{d}: {name}", first.count(b",") + 1)
    return read_file(d, name, lambda: next(csv.reader([first.decode("utf-8")]), []))


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


def parse_results(d: Path, data: bytes) -> pd.DataFrame:
    """results.csv's bytes (whole lines) as checked rows: UTF-8 text, a header of distinct names
    with every required column, each cell what its column holds (commbench.schema.KINDS).
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


def checked_samples(d: Path, samples: pd.DataFrame, name: str = "samples", first_row: int = 0) -> pd.DataFrame:
    """Samples with point, iteration and job as integers and every time_us finite and > 0 (first_row:
    the file's row of the frame's first, for the refusal's row number)."""
    samples = checked(d, name, samples, SAMPLE_KINDS, SAMPLE_REQUIRED, first_row=first_row)
    return samples.assign(run_id=samples.run_id.astype(str))


def _with_samples(d: Path, rows: pd.DataFrame) -> pd.DataFrame:
    """Each row's samples as an array (sample_values); a row without samples has its time_us."""
    from commbench.analysis.samples import grouped

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
