"""RunFolder: the one writer of a run folder (run.json, results.csv, samples), in the parent.

Rows and samples are appended, flushed and fsync'ed as each arrives (samples first, so a row on
disk always has its samples), so a crash, kill or Ctrl-C leaves valid files holding every row
received so far; `repair` makes such a folder resumable (commbench.folder.resume; where a
folder may go: commbench.folder.place). run.json is replaced atomically on each
change (on a full disk, where no new file fits, rewritten in the room it already has). Rank 0's
events become files through `record`. One writer per folder, and only into a folder of its own
(commbench.folder.lock): `create` takes the folder's lock, `release` gives it back.
"""

from __future__ import annotations

import csv
import errno
import json
import os
import stat
import tempfile
from pathlib import Path

from commbench import runinfo
from commbench.errors import InputError
from commbench.folder.schema import (COLUMNS, FORMAT_VERSION, RANK_COLUMNS, RANKS_CSV, RESULTS_CSV, RUN_JSON, SAMPLE_COLUMNS,
                              SAMPLES_CSV, SAMPLES_PARQUET)
from commbench.folder import lock as folder_lock
from commbench.folder import record as run_record
from commbench.folder import resume as folder_resume
from commbench.folder.load import read_meta
from commbench.folder.place import has_run_json


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


def _rewrite_in_place(path: Path, text: bytes) -> bool:
    """Write text over a regular file whose blocks already hold that much (no new block needed, so a
    full disk takes it); False when it does not fit or is no such file. A shorter text is padded with
    spaces to the old length before the file is cut to it, so a reader meanwhile (or after a kill)
    finds whole JSON, never the new text followed by the old one's end."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not (stat.S_ISREG(st.st_mode) and len(text) <= st.st_blocks * 512):
            return False
        padded = text.ljust(st.st_size)
        if os.pwrite(fd, padded, 0) != len(padded):
            return False
        os.ftruncate(fd, len(text))
        os.fsync(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _wrong(value) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0  # empty: not checked


class RunFolder:
    """Writes one run folder. Counts the rows on disk (earlier sessions of a resumed run
    included, once `repair` has read them) and their wrong elements."""

    columns, sample_columns = COLUMNS, SAMPLE_COLUMNS  # the headers a new folder's files get

    def __init__(self, path: str | Path):
        self.dir = Path(path)
        self.rows = 0
        self.wrong = 0
        self.unreliable = 0  # rows flagged unreliable (commbench.machine.load)
        self.skipped: list[dict] = []
        self.warnings: list[str] = []
        self._samples: dict[int, list[float]] = {}  # samples events of the point whose row is next
        self._ranks: dict[int, dict[int, tuple[list, list]]] = {}  # its ranks events: point -> rank -> (time, late)
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
        """run.json, checked by the one reader (commbench.folder.load.read_meta); an InputError
        when the folder has none."""

        if not (self.dir / RUN_JSON).exists():
            raise InputError(f"{str(self.dir)!r} holds no {RUN_JSON}")
        return read_meta(self.dir)

    def update(self, patch: dict, fresh: bool = False, sent: bool = False) -> dict:
        """Merge patch, checked against run.json's fields (commbench.folder.record.change), into run.json
        (fresh: replace it; sent: rank 0's facts) and replace the file atomically (temp file +
        rename; the temp file removed if that fails). On a full disk, where no temp file fits, the
        file is rewritten in place when the new text fits in the room it has, written compact (no
        indent: about 30 % smaller) where the indented text does not (so a run's status is recorded
        however it ends)."""
        patch = run_record.change(patch, sent)
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
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            compact = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()
            if not any(_rewrite_in_place(path, t) for t in (text, compact)):
                raise
        return data

    # --- rows and samples -----------------------------------------------------------------------
    def add(self, row: dict, samples_us, tags=None, ranks: dict | None = None) -> None:
        """Append a row and its per-iteration samples (µs), samples first (and its ranks' samples,
        ranks.csv: {rank: (time_us, late_us)}, first of all); all get this folder's job number (the row
        in place, so what is shown is what is on disk). tags: per sample, more of its columns
        (commbench ab: side, round, pair)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        row["job"] = self.job
        for key, value in row.items():  # a number not recorded (NaN): an empty cell, as the loader reads it
            if isinstance(value, float) and value != value:
                row[key] = None
        if ranks:
            _append(self.dir / RANKS_CSV, RANK_COLUMNS, (
                {"run_id": row["run_id"], "point": row["point"], "job": self.job, "iteration": i, "rank": r,
                 "time_us": f"{t:.4f}", "late_us": "" if late is None else f"{late:.4f}"}
                for r, (times, lates) in sorted(ranks.items())
                for i, (t, late) in enumerate(zip(times, lates if lates is not None else [None] * len(times)))))
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
        """What a resume finds, checked and nothing written (commbench.folder.resume.check)."""
        return folder_resume.check(self)

    def repair(self) -> set[int]:
        """Points that have a row, the folder checked and repaired for a resume
        (commbench.folder.resume.repair)."""
        return folder_resume.repair(self)

    # --- rank 0's events --------------------------------------------------------------------------
    def record(self, event: dict) -> bool:
        """Write what one event of rank 0 says: facts, skip, warning, samples, row, done."""
        kind = event["event"]
        if kind == "facts":
            self.update(event["run"], sent=True)
            self.has_facts = True
        elif kind == "skip":
            self.skipped.append(event["point"] | {"reason": event["reason"]}
                                 | ({"failed": True} if event.get("failed") else {}))
        elif kind == "warning":
            self.warnings.append(event["text"])
            self.update({"warnings": self.warnings})
        elif kind == "samples":
            self._samples.setdefault(event["point"], []).extend(event["values"])
        elif kind == "ranks":
            times, lates = self._ranks.setdefault(event["point"], {}).setdefault(event["rank"], ([], []))
            if len(times) == event["start"]:  # (a lost line leaves a gap: that rank's samples are dropped below)
                times.extend(event["time_us"])
                lates.extend(event["late_us"])
        elif kind == "row":  # written only with all its samples (a lost line: the point is not on disk)
            samples = self._samples.pop(event["row"]["point"], [])
            ranks = self._ranks.pop(event["row"]["point"], {})
            if len(samples) != int(event["row"]["samples"]):
                return False
            kept = {len(t) for t, _ in ranks.values()}
            self.add(event["row"], samples, ranks=ranks if len(kept) == 1 else None)
        elif kind == "check":  # commbench check: how its repetitions ended (commbench.rank.fabric)
            self.update({"check": {k: v for k, v in event.items() if k != "event"}})
        elif kind == "done":
            self.update({"skipped": self.skipped, "samples_file": self.finalize(), "wrong_total": self.wrong,
                         "unreliable_points": self.unreliable})
        return True

    def finish(self, status: str, error: str | None) -> None:
        """Record how the run ended; totals count every row of the run (a resumed run included)."""
        self.update({"status": status, "error": error, "end_time": runinfo.utc_now(),
                     "points_measured": self.rows, "wrong_total": self.wrong,
                     "unreliable_points": self.unreliable})
