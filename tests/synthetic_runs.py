"""Result folders with known statistics, written through the one writer (RunFolder + build_row), for
tests of compare's verdicts: each job's samples are lognormal around the median the test gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from commbench.folder.schema import build_row
from commbench.folder.write import RunFolder

SIZES = (1024, 65536)
META = {"world_size": 2, "nodes": 1, "ranks_per_node": 2, "launcher": "mpirun",
        "versions": {"mpi_library": "Open MPI v5.0.11", "python": "3.11.7", "commbench": "0.1.0"},
        "ranks": [{"hostname": "node-a", "rank": 0}, {"hostname": "node-a", "rank": 1}],
        "environment": {}, "rank0_environment": {"OMPI_MCA_btl": "self,vader"}}


def write_run(path: Path, job_medians: list[float], samples: int = 200, noise: float = 0.05, seed: int = 0,
              background: list[float] | None = None, meta: dict | None = None, run_id: str = "r",
              algorithm: str = "native") -> Path:
    """One run folder of len(job_medians) jobs; every point of SIZES in job k has samples around
    job_medians[k] x (1 + size / 64K). background: per job, cores of other work (of 2)."""
    rng = np.random.default_rng(seed)
    folder = RunFolder(path)
    folder.create({"run_id": run_id, "label": path.name, "status": "completed", "repeat": len(job_medians),
                   **META, **(meta or {})})
    log, hosts = [], sorted({r["hostname"] for r in (meta or {}).get("ranks", META["ranks"])})
    for k, median in enumerate(job_medians, 1):
        folder.job = k
        for point, size in enumerate(SIZES):
            values = median * (1 + size / 65536) * np.exp(noise * rng.standard_normal(samples))
            row = build_row(run_id=run_id, point=point, collective="all_reduce", backend="mpi", algorithm=algorithm,
                            device="cpu", dtype="float32", op="sum", in_place=0, world_size=2, size_bytes=size,
                            time_us=float(np.median(values)), samples=samples, wrong=0)
            folder.add(row, values)
        log.append({"job": k, "block": 1, "points": list(range(len(SIZES))), "hosts": hosts,
                    "background_cores": None if background is None else background[k - 1], "cpu_count": 2})
    folder.finalize()
    folder.update({"jobs": log})
    return path


def drop_job_column(path: Path) -> Path:
    """Make a folder look like one written before the `job` column (CSV samples, no column)."""
    rows = pd.read_csv(path / "results.csv").drop(columns="job")
    rows.to_csv(path / "results.csv", index=False)
    samples = pd.read_parquet(path / "samples.parquet").drop(columns="job")
    (path / "samples.parquet").unlink()
    samples.to_csv(path / "samples.csv", index=False)
    meta = json.loads((path / "run.json").read_text())
    for key in ("jobs", "repeat", "format_version"):
        meta.pop(key, None)
    (path / "run.json").write_text(json.dumps(meta))
    return path
