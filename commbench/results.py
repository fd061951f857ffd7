"""The results folder of one run: results.csv (one row per point), per-iteration samples, and
run.json. Rows and samples are appended, flushed and fsync'ed as each point finishes, so a crash
or Ctrl-C leaves valid files holding every point measured so far."""

from __future__ import annotations

import csv
import json
import os
import tempfile
from pathlib import Path

from commbench.metrics import STAT_COLUMNS

RESULTS_CSV = "results.csv"
SAMPLES_CSV = "samples.csv"
SAMPLES_PARQUET = "samples.parquet"
RUN_JSON = "run.json"

COLUMNS = (
    "run_id", "label", "point", "collective", "backend", "algorithm", "device", "dtype", "op",
    "in_place", "world_size", "nodes", "ranks_per_node", "size_bytes", "count",
    *STAT_COLUMNS, "iterations", "batch", "warmup", "algbw_gbps", "busbw_gbps", "bus_factor",
    "wrong", "library_choice", "power_w_avg", "power_w_max", "energy_j", "energy_j_per_byte", "placement", "internode_bytes_measured", "internode_bytes_expected", "predicted", "timestamp",
)
SAMPLE_COLUMNS = ("run_id", "point", "iteration", "time_us")


def _append(path: Path, columns, rows) -> None:
    """Rows under the file's own header: a run resumed by a newer commbench keeps the columns it
    started with (a column added since stays out of that file)."""
    new = not path.exists() or path.stat().st_size == 0
    if not new:
        with open(path, newline="") as f:
            columns = next(csv.reader(f))
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerows(rows)
        f.flush()
        os.fsync(f.fileno())


class ResultsWriter:
    """Appends rows and samples to a run folder (used by rank 0 only)."""

    def __init__(self, out_dir: str | Path):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)

    def add(self, row: dict, samples_us) -> None:
        # samples first: a row in results.csv always has its samples on disk
        _append(self.dir / SAMPLES_CSV, SAMPLE_COLUMNS, (
            {"run_id": row["run_id"], "point": row["point"], "iteration": i, "time_us": f"{t:.4f}"}
            for i, t in enumerate(samples_us)
        ))
        _append(self.dir / RESULTS_CSV, COLUMNS, [row])

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
        if (self.dir / SAMPLES_PARQUET).exists():  # a resumed run adds to what is there
            import pyarrow as pa

            table = pa.concat_tables([pq.read_table(self.dir / SAMPLES_PARQUET), table.cast(
                pq.read_schema(self.dir / SAMPLES_PARQUET))])
        tmp = self.dir / (SAMPLES_PARQUET + ".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, self.dir / SAMPLES_PARQUET)
        src.unlink()
        return SAMPLES_PARQUET


def _drop_partial_line(path: Path) -> None:
    """A crash mid-write can leave a last line without its newline: cut it off."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)
            os.fsync(f.fileno())


def measured_points(out_dir: str | Path) -> set[int]:
    """Points that have a row, after repairing what an interrupted run can leave behind: a
    partial last line, and samples of a point whose row was never written (dropped, since the
    point will be measured again)."""
    d = Path(out_dir)
    path = d / RESULTS_CSV
    if not path.exists():
        return set()
    _drop_partial_line(path)
    with open(path, newline="") as f:
        done = {int(row["point"]) for row in csv.DictReader(f)}
    samples = d / SAMPLES_CSV
    if samples.exists():
        _drop_partial_line(samples)
        with open(samples, newline="") as f:
            keep = [row for row in csv.DictReader(f) if int(row["point"]) in done]
        tmp = samples.with_suffix(".tmp")
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=SAMPLE_COLUMNS)
            writer.writeheader()
            writer.writerows(keep)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, samples)
    return done


def read_results(out_dir: str | Path):
    import pandas as pd

    return pd.read_csv(Path(out_dir) / RESULTS_CSV)


def read_samples(out_dir: str | Path):
    """All per-iteration samples of a run, whichever form they are in (both after a resume)."""
    import pandas as pd

    d = Path(out_dir)
    parts = []
    if (d / SAMPLES_PARQUET).exists():
        parts.append(pd.read_parquet(d / SAMPLES_PARQUET))
    if (d / SAMPLES_CSV).exists():
        parts.append(pd.read_csv(d / SAMPLES_CSV))
    if not parts:
        raise FileNotFoundError(f"no samples in {d}")
    return pd.concat(parts, ignore_index=True)


def update_run_json(out_dir: str | Path, patch: dict) -> dict:
    """Merge `patch` into run.json and replace the file atomically (temp file + rename)."""
    path = Path(out_dir) / RUN_JSON
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(patch)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".run.json.")
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return data


def read_run_json(out_dir: str | Path) -> dict:
    return json.loads((Path(out_dir) / RUN_JSON).read_text())
