"""RunFolder: the one writer of a run folder (run.json, results.csv, samples), in the parent.

Rows and samples are appended, flushed and fsync'ed as each arrives (samples first, so a row on
disk always has its samples), so a crash, kill or Ctrl-C leaves valid files holding every row
received so far; `repair` makes such a folder resumable. run.json is replaced atomically on each
change. Rank 0's events become files through `record`.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from pathlib import Path

from commbench import runinfo
from commbench.errors import InputError
from commbench.results import (COLUMNS, FORMAT_VERSION, RESULTS_CSV, RUN_JSON, SAMPLE_COLUMNS, SAMPLES_CSV,
                               SAMPLES_PARQUET)


def _header(path: Path) -> list[str] | None:
    if not path.exists() or path.stat().st_size == 0:
        return None
    with open(path, newline="") as f:
        return next(csv.reader(f), None)


def _append(path: Path, columns, rows) -> None:
    """Rows under the file's own header: a run resumed by a newer commbench keeps the columns it
    started with (a column added since stays out of that file)."""
    header = _header(path)
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header or columns, extrasaction="ignore")
        if header is None:
            writer.writeheader()
        writer.writerows(rows)
        f.flush()
        os.fsync(f.fileno())


def _drop_partial_line(path: Path) -> None:
    """A crash mid-write can leave a last line without its newline: cut it off."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)
            os.fsync(f.fileno())


def _job_key(row: dict) -> tuple[int, str]:
    """(point, job) of a results or samples line; a line without a job is job 1."""
    return int(row["point"]), str(row.get("job") or "1")


def _wrong(value) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0  # empty: not checked


class RunFolder:
    """Writes one run folder. Counts the rows on disk (earlier sessions of a resumed run
    included, once `repair` has read them) and their wrong elements."""

    def __init__(self, path: str | Path):
        self.dir = Path(path)
        self.rows = 0
        self.wrong = 0
        self.skipped: list[dict] = []
        self.warnings: list[str] = []
        self._samples: dict[int, list[float]] = {}  # samples events of the point whose row is next
        self.has_facts = False  # rank 0's "facts" arrived (run.json's world, versions, machines)
        self.job = 1  # the job number stamped on rows and samples (commbench.run.jobs: --repeat)
        self.measured: set[tuple[int, str]] = set()  # (point, job) with a row, once `repair` has read them

    # --- run.json -------------------------------------------------------------------------------
    def has_results(self) -> bool:
        return (self.dir / RESULTS_CSV).exists()

    def check_new(self) -> None:
        if self.has_results():
            raise InputError(f"output folder {str(self.dir)!r} already holds results (choose another --out)")

    def create(self, meta: dict) -> None:
        """Start a new folder: refuse one that holds results, write run.json with the format version."""
        self.check_new()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.update({"format_version": FORMAT_VERSION, **meta})

    def read_meta(self) -> dict:
        return json.loads((self.dir / RUN_JSON).read_text())

    def update(self, patch: dict) -> dict:
        """Merge patch into run.json and replace the file atomically (temp file + rename)."""
        path = self.dir / RUN_JSON
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(patch)
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".run.json.")
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True, default=str)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return data

    # --- rows and samples -----------------------------------------------------------------------
    def add(self, row: dict, samples_us) -> None:
        """Append a row and its per-iteration samples (µs), samples first; both get this folder's
        job number (the row in place, so what is shown is what is on disk)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        row["job"] = self.job
        _append(self.dir / SAMPLES_CSV, SAMPLE_COLUMNS, (
            {"run_id": row["run_id"], "point": row["point"], "iteration": i, "time_us": f"{t:.4f}", "job": self.job}
            for i, t in enumerate(samples_us)))
        _append(self.dir / RESULTS_CSV, COLUMNS, [row])
        self.rows += 1
        self.wrong += _wrong(row.get("wrong"))

    def finalize(self) -> str:
        """Convert samples.csv to Parquet when pyarrow is installed; returns the samples file."""
        src = self.dir / SAMPLES_CSV
        try:
            import pyarrow.csv as pacsv
            import pyarrow.parquet as pq
        except ImportError:
            return SAMPLES_CSV
        if not src.exists():
            return SAMPLES_CSV
        table = pacsv.read_csv(src)
        dst = self.dir / SAMPLES_PARQUET
        if dst.exists():  # a resumed run adds to what is there
            import pyarrow as pa

            old = pq.read_table(dst)  # its columns: an older folder's samples have no `job`
            table = pa.concat_tables([old, table.select(old.schema.names).cast(old.schema)])
        tmp = self.dir / (SAMPLES_PARQUET + ".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, dst)
        src.unlink()
        return SAMPLES_PARQUET

    def repair(self) -> set[int]:
        """Points that have a row, after repairing what an interrupted run can leave behind: a
        partial last line, and samples of a point whose row was never written (dropped, since the
        point will be measured again). Counts the rows and wrong elements found."""
        path = self.dir / RESULTS_CSV
        if not path.exists():
            return set()
        _drop_partial_line(path)
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        done = {int(row["point"]) for row in rows}
        self.measured = measured = {_job_key(row) for row in rows}  # (point, job): a row per job of a point
        self.rows, self.wrong = len(rows), sum(_wrong(row.get("wrong")) for row in rows)
        samples = self.dir / SAMPLES_CSV
        if samples.exists():
            _drop_partial_line(samples)
            header = _header(samples) or list(SAMPLE_COLUMNS)
            with open(samples, newline="") as f:
                keep = [row for row in csv.DictReader(f) if _job_key(row) in measured]
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".samples.")
            with os.fdopen(fd, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=header)
                writer.writeheader()
                writer.writerows(keep)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, samples)
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
            self.update({"skipped": self.skipped, "samples_file": self.finalize(), "wrong_total": self.wrong})
        return True

    def finish(self, status: str, error: str | None) -> None:
        """Record how the run ended; totals count every row of the run (a resumed run included)."""
        self.update({"status": status, "error": error, "end_time": runinfo.utc_now(),
                     "points_measured": self.rows, "wrong_total": self.wrong})
