"""RunFolder: the one writer of a run folder (run.json, results.csv, samples), in the parent.

Rows and samples are appended, flushed and fsync'ed as each arrives (samples first, so a row on
disk always has its samples), so a crash, kill or Ctrl-C leaves valid files holding every row
received so far; `repair` makes such a folder resumable. run.json is replaced atomically on each
change (on a full disk, where no new file fits, rewritten in the room it already has). Rank 0's
events become files through `record`. One writer per folder, and only into a folder of its own
(commbench.run.folder_lock): `create` takes the folder's lock, `release` gives it back.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import stat
import tempfile
from pathlib import Path

from commbench import runinfo
from commbench.errors import InputError
from commbench.outputs import output_folder, probe_folder
from commbench.schema import (COLUMNS, FORMAT_VERSION, REQUIRED, RESULTS_CSV, RUN_JSON, SAMPLE_COLUMNS, SAMPLES_CSV,
                               SAMPLES_PARQUET)
from commbench.run import folder_lock


def _header(path: Path) -> list[str] | None:
    if not path.exists() or path.stat().st_size == 0:
        return None
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        return next(csv.reader(f), None)


def _append(path: Path, columns, rows) -> None:
    """Rows under the file's own header: a run resumed by a newer commbench keeps the columns it
    started with (a column added since stays out of that file)."""
    header = _header(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)  # no link followed
    with open(fd, "a", newline="", encoding="utf-8", errors="backslashreplace") as f:
        writer = csv.DictWriter(f, fieldnames=header or columns, extrasaction="ignore")
        if header is None:
            writer.writeheader()
        writer.writerows(rows)
        f.flush()
        os.fsync(f.fileno())


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
    from commbench.analysis import load

    data = load.read_bytes(d, name)  # within the readers' limit on a file's size
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


def _rewrite_in_place(path: Path, text: bytes) -> bool:
    """Write text over a regular file whose blocks already hold that much (no new block needed, so a
    full disk takes it); False when it does not fit or is no such file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not (stat.S_ISREG(st.st_mode) and len(text) <= st.st_blocks * 512):
            return False
        os.pwrite(fd, text, 0)
        os.ftruncate(fd, len(text))
        os.fsync(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _cut(path: Path, size: int) -> None:
    """Cut a file to its whole lines (size: their length)."""
    if path.exists() and path.stat().st_size > size:
        with open(path, "r+b") as f:
            f.truncate(size)
            os.fsync(f.fileno())


def _job_key(row: dict) -> tuple[int, int]:
    """(point, job) of a checked results or samples line; a line without a job is job 1."""
    return int(float(row["point"])), int(float(row.get("job") or 1))


def _wrong(value) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0  # empty: not checked


def is_run_folder(d: Path) -> bool:
    """Does d hold a commbench run: a results.csv whose header has the schema's required columns,
    or a run.json naming a run? (Anyone's results.csv or run.json is not one.)"""
    try:
        with open(d / RESULTS_CSV, newline="", encoding="utf-8", errors="replace") as f:
            if set(REQUIRED) <= set(next(csv.reader([f.readline(65536)]), [])):
                return True
    except (OSError, csv.Error):
        pass
    return has_run_json(d)


def has_run_json(d: Path) -> bool:
    """Does d hold a run.json commbench wrote (a JSON object naming a run id or format version)?"""
    try:
        with open(d / RUN_JSON, "rb") as f:
            head = f.read(1 << 20)
        meta = json.loads(head)
        return isinstance(meta, dict) and ("run_id" in meta or "format_version" in meta)
    except (OSError, ValueError):
        return False


def _run_below(path: Path, depth: int = 3) -> Path | None:
    """A run folder below path, looking `depth` levels down."""
    base = len(path.parts)
    for root, dirs, files in os.walk(path):
        if Path(root) != path and (RESULTS_CSV in files or RUN_JSON in files) and is_run_folder(Path(root)):
            return Path(root)
        if len(Path(root).parts) - base >= depth:
            dirs.clear()
    return None


def check_place(path, sweep: bool = False, what: str = "--out", probe: bool = True) -> Path:
    """An output folder that readers (report, compare, model: commbench.analysis.load.run_dirs)
    will find whole, checked before anything starts: usable (commbench.outputs.output_folder);
    not inside a run folder, since a reader takes a folder holding results.csv as one run and
    looks no further; a sweep's folder not a run folder itself; a new run's folder not above run
    folders, which its results.csv would hide. Returns the path."""
    p = output_folder(path, what, probe=False)
    if (p.absolute().parent / "suite.yaml").is_file():  # in a sweep's folder: not while another sweep writes it
        folder_lock.check_free(p.absolute().parent)
    for parent in p.absolute().parents:
        if is_run_folder(parent):
            raise InputError(f"{what} {str(path)!r} is inside the run folder {str(parent)!r}, where report and "
                             "compare would not see it: choose a folder outside it")
    if sweep and is_run_folder(p):
        raise InputError(f"{what} {str(path)!r} is a run folder: a sweep needs a folder of its own, or report and "
                         "compare would see only that run")
    below = None if sweep or not p.is_dir() else _run_below(p)
    if below is not None:
        raise InputError(f"{what} {str(path)!r} holds run folders ({str(below)!r}): a run's results there would "
                         "hide them from report and compare; choose a folder of its own")
    if probe:  # the caller's own checks first (probe=False), where a folder may be refused before a probe writes in it
        probe_folder(path, what)
    return p


class RunFolder:
    """Writes one run folder. Counts the rows on disk (earlier sessions of a resumed run
    included, once `repair` has read them) and their wrong elements."""

    columns, sample_columns = COLUMNS, SAMPLE_COLUMNS  # the headers a new folder's files get

    def __init__(self, path: str | Path):
        self.dir = Path(path)
        self.rows = 0
        self.wrong = 0
        self.unreliable = 0  # rows flagged unreliable (commbench.rank.load)
        self.skipped: list[dict] = []
        self.warnings: list[str] = []
        self._samples: dict[int, list[float]] = {}  # samples events of the point whose row is next
        self.has_facts = False  # rank 0's "facts" arrived (run.json's world, versions, machines)
        self.job = 1  # the job number stamped on rows and samples (commbench.run.jobs: --repeat)
        self.measured: set[tuple[int, str]] = set()  # (point, job) with a row, once `repair` has read them
        self.run_ids: set[str] = set()  # the run ids of the rows on disk, once `check` has read them
        self._lock = None  # folder_lock.acquire's token while this object holds the folder

    # --- run.json -------------------------------------------------------------------------------
    def has_results(self) -> bool:
        return (self.dir / RESULTS_CSV).exists()

    def check_new(self, others: bool = True) -> None:
        """A new run's folder: none yet, or one of its own (folder_lock.foreign_entry), and (others)
        not being written by another process; nothing written."""
        if others and self.dir.is_dir():
            folder_lock.check_free(self.dir)
        if self.has_results() or (self.dir / RESULTS_CSV).is_symlink():
            raise InputError(f"output folder {str(self.dir)!r} already holds results (choose another --out)")
        if not self.dir.is_dir():
            return
        other = folder_lock.foreign_entry(self.dir, has_run_json)
        if other is not None:
            raise InputError(f"output folder {str(self.dir)!r} is not a commbench run folder and not empty (it holds "
                             f"{other!r}): a run is written only into a new or empty folder (choose another --out)")

    def lock(self) -> None:
        """Make the folder (parents too) and hold its lock (folder_lock.acquire) until `release`."""
        if self._lock is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._lock = folder_lock.acquire(self.dir)

    def release(self) -> None:
        lock, self._lock = self._lock, None
        folder_lock.release(lock)

    def __del__(self):
        try:
            self.release()
        except Exception:  # noqa: BLE001 - at interpreter exit the kernel drops the lock anyway
            pass

    def create(self, meta: dict) -> None:
        """Start a new folder: refuse one that is not new (check_new), hold its lock, then check again
        (another writer may have come first) and write run.json, a new one, with the format version."""
        self.check_new()
        self.lock()
        self.check_new()
        self.update({"format_version": FORMAT_VERSION, **meta}, fresh=True)

    def read_meta(self) -> dict:
        """run.json, checked by the one reader (commbench.analysis.load.read_meta); an InputError
        when the folder has none."""
        from commbench.analysis.load import read_meta

        if not (self.dir / RUN_JSON).exists():
            raise InputError(f"{str(self.dir)!r} holds no {RUN_JSON}")
        return read_meta(self.dir)

    def update(self, patch: dict, fresh: bool = False) -> dict:
        """Merge patch into run.json (fresh: replace it) and replace the file atomically (temp file +
        rename; the temp file removed if that fails). On a full disk, where no temp file fits, the
        file is rewritten in place when the new text fits in the room it has (so a run's status is
        recorded however it ends)."""
        path = self.dir / RUN_JSON
        data = {} if fresh or not path.exists() else json.loads(path.read_text(encoding="utf-8"))
        data.update(patch)
        text = json.dumps(data, indent=2, sort_keys=True, default=str).encode()
        fd, tmp = None, None
        try:
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".run.json.")
            os.fchmod(fd, 0o644)
            with os.fdopen(fd, "wb") as f:
                fd = None
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            tmp = None
        except OSError as exc:
            if fd is not None:
                os.close(fd)
            if tmp is not None:
                os.unlink(tmp)
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not _rewrite_in_place(path, text):
                raise
        return data

    # --- rows and samples -----------------------------------------------------------------------
    def add(self, row: dict, samples_us, tags=None) -> None:
        """Append a row and its per-iteration samples (µs), samples first; both get this folder's
        job number (the row in place, so what is shown is what is on disk). tags: per sample, more
        of its columns (commbench ab: side, round, pair)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        row["job"] = self.job
        for key, value in row.items():  # a number not recorded (NaN): an empty cell, as the loader reads it
            if isinstance(value, float) and value != value:
                row[key] = None
        _append(self.dir / SAMPLES_CSV, self.sample_columns, (
            {"run_id": row["run_id"], "point": row["point"], "iteration": i, "time_us": f"{t:.4f}", "job": self.job,
             **(tags[i] if tags else {})}
            for i, t in enumerate(samples_us)))
        _append(self.dir / RESULTS_CSV, self.columns, [row])
        self.rows += 1
        self.wrong += _wrong(row.get("wrong"))
        self.unreliable += bool(row.get("unreliable"))

    def finalize(self) -> str:
        """Convert samples.csv to Parquet when pyarrow is installed; returns the samples file."""
        src = self.dir / SAMPLES_CSV
        try:
            import pyarrow.csv as pacsv
            import pyarrow.parquet as pq
        except ImportError:
            return SAMPLES_CSV
        dst = self.dir / SAMPLES_PARQUET
        if not src.exists():  # nothing new (or converted already)
            return SAMPLES_PARQUET if dst.exists() else SAMPLES_CSV
        table = pacsv.read_csv(src)
        if dst.exists():  # a resumed run adds to what is there
            import pyarrow as pa

            old = pq.read_table(dst)  # its columns: an older folder's samples have no `job`
            table = pa.concat_tables([old, table.select(old.schema.names).cast(old.schema)])
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".samples.parquet.")  # a new name: no planted link followed
        os.close(fd)
        try:
            pq.write_table(table, tmp)
            os.chmod(tmp, 0o644)
            os.replace(tmp, dst)
        except BaseException:
            os.unlink(tmp)
            raise
        src.unlink()
        return SAMPLES_PARQUET

    def check(self) -> tuple[set[int], bytes, bytes]:
        """What a resume finds, checked like command-line input and nothing written: the points
        that have a row (results.csv's whole lines), and the whole lines of results.csv and
        samples.csv. Anything but what an interrupted run leaves behind (a partial last line,
        samples of a point without a row) is one InputError: rows and samples as the loader checks
        them (commbench.analysis.load), results.csv's columns the schema's, samples.parquet
        readable with the samples' columns. Counts the rows and wrong elements found."""
        import pandas as pd

        from commbench.analysis import limits, load

        results = _whole_lines(self.dir, RESULTS_CSV, COLUMNS)
        samples = _whole_lines(self.dir, SAMPLES_CSV, SAMPLE_COLUMNS)
        rows = load.parse_results(self.dir, results) if results else pd.DataFrame(columns=["point", "wrong"])
        unknown = [c for c in rows.columns if c not in COLUMNS]
        if unknown:
            raise InputError(f"{self.dir}: {RESULTS_CSV} has columns commbench does not write: "
                             f"{', '.join(map(repr, unknown[:5]))}")
        for name, text in ((RESULTS_CSV, results), (SAMPLES_CSV, samples)):
            _same_width(self.dir, name, text)
        readers = {SAMPLES_CSV: lambda: load.samples_csv(io.BytesIO(samples))} if samples else {}
        if (self.dir / SAMPLES_PARQUET).exists():
            load.file_size(self.dir, SAMPLES_PARQUET)  # a regular file of the folder, before it is opened
            parquet_rows, _ = load.parquet_rows(self.dir, SAMPLES_PARQUET)  # from its metadata, before reading it
            limits.SAMPLES.check(f"{self.dir}: {SAMPLES_PARQUET}", parquet_rows)
            readers[SAMPLES_PARQUET] = lambda: pd.read_parquet(self.dir / SAMPLES_PARQUET)
        for name, read in readers.items():
            load.regular_file(self.dir, name)
            found = load.read_file(self.dir, name, read)
            extra = [c for c in found.columns if c not in SAMPLE_COLUMNS]  # a resumed run's samples join them
            if extra:
                raise InputError(f"{self.dir}: {name} has columns commbench does not write: "
                                 f"{', '.join(map(repr, extra[:5]))}")
            load.checked_samples(self.dir, found, name)
        points = rows.point.astype(int)
        jobs = rows.job.fillna(1).astype(int) if "job" in rows else [1] * len(rows)
        self.measured = set(zip(points, jobs))  # (point, job): a row per job of a point
        self.rows, self.wrong = len(rows), int(rows.wrong.fillna(0).sum())
        self.unreliable = int(rows.unreliable.fillna("").astype(str).str.len().gt(0).sum()) if "unreliable" in rows else 0
        self.run_ids = set(rows.run_id.astype(str)) if "run_id" in rows else set()
        return set(points), results, samples

    def repair(self) -> set[int]:
        """Points that have a row, after checking the folder (check: an InputError changes
        nothing) and repairing what an interrupted run can leave behind: a partial last line, and
        samples of a point whose row was never written (dropped, since the point will be measured
        again). Counts the rows and wrong elements found."""
        done, results, samples_text = self.check()
        _cut(self.dir / RESULTS_CSV, len(results))
        samples = self.dir / SAMPLES_CSV
        if samples.exists():
            text = samples_text.decode()
            header = next(csv.reader(io.StringIO(text, newline="")), None) or list(SAMPLE_COLUMNS)
            keep = [row for row in csv.DictReader(io.StringIO(text, newline="")) if _job_key(row) in self.measured]
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".samples.")
            try:
                with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
                    writer = csv.DictWriter(f, fieldnames=header)
                    writer.writeheader()
                    writer.writerows(keep)
                    f.flush()
                    os.fsync(f.fileno())
                os.chmod(tmp, 0o644)
                os.replace(tmp, samples)
            except BaseException:
                os.unlink(tmp)
                raise
        return done

    # --- rank 0's events --------------------------------------------------------------------------
    def record(self, event: dict) -> bool:
        """Write what one event of rank 0 says: facts, skip, warning, samples, row, done."""
        kind = event["event"]
        if kind == "facts":
            self.update(event["run"])
            self.has_facts = True
        elif kind == "skip":
            self.skipped.append(event["point"] | {"reason": event["reason"]})
        elif kind == "warning":
            self.warnings.append(event["text"])
            self.update({"warnings": self.warnings})
        elif kind == "samples":
            self._samples.setdefault(event["point"], []).extend(event["values"])
        elif kind == "row":  # written only with all its samples (a lost line: the point is not on disk)
            samples = self._samples.pop(event["row"]["point"], [])
            if len(samples) != int(event["row"]["samples"]):
                return False
            self.add(event["row"], samples)
        elif kind == "done":
            self.update({"skipped": self.skipped, "samples_file": self.finalize(), "wrong_total": self.wrong,
                         "unreliable_points": self.unreliable})
        return True

    def finish(self, status: str, error: str | None) -> None:
        """Record how the run ended; totals count every row of the run (a resumed run included)."""
        self.update({"status": status, "error": error, "end_time": runinfo.utc_now(),
                     "points_measured": self.rows, "wrong_total": self.wrong,
                     "unreliable_points": self.unreliable})
