"""What reading a result folder costs in memory (issue 43's bound: peak <= 1 GB and <= 10x the
folders' size on disk): `compare` and `report` (the readers of samples) on folders at the samples limit,
each command's peak RSS (a new process, ru_maxrss) beside the size of what it read.

    python benchmarks/reader_memory.py                  # 2.49 M samples a folder (about a minute)
    python benchmarks/reader_memory.py --samples 500000

Folders: `timed` (samples lognormal around each point's time, as a run writes them), `coarse`
(the same rounded to 0.1 us: repeated values, which Parquet stores in fewer bytes) and `repeated`
(every sample the same: the 40 M-row kind of bomb, at the limit). Each command's own start (Python,
pandas, pyarrow, plotly: a cost that does not grow with the data) is its peak on two tiny folders
(10 samples a point); the bound is on what it takes above that.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from commbench.folder.schema import build_row
from commbench.folder.write import RunFolder

BIN = Path(sys.executable).parent
POINTS = 16


def write_folder(path: Path, samples: int, kind: str, seed: int) -> int:
    """A completed run of POINTS all-reduce points, samples spread over them; its bytes on disk."""
    rng = np.random.default_rng(seed)
    folder = RunFolder(path)
    folder.create({"run_id": f"r{seed}", "label": path.name, "status": "completed", "world_size": 2})
    each = samples // POINTS
    for point in range(POINTS):
        size = 8 << point
        values = 2.0 * (1 + size / 65536) * np.exp(0.05 * rng.standard_normal(each))
        if kind == "coarse":
            values = np.maximum(np.round(values, 1), 0.1)
        elif kind == "repeated":
            values = np.ones(each)
        folder.add(build_row(run_id=f"r{seed}", point=point, collective="all_reduce", backend="mpi",
                             algorithm="native", device="cpu", dtype="float32", op="sum", in_place=0, world_size=2,
                             size_bytes=size, time_us=float(np.median(values)), samples=each, wrong=0), values)
    folder.finalize()
    folder.release()
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file())


def peak(argv: list[str]) -> tuple[float, float, int]:
    """(peak RSS in MB, seconds, exit code) of one command in a process of its own."""
    probe = ("import resource, subprocess, sys, time; t = time.monotonic(); "
             "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.monotonic() - t, p.returncode); "
             "print(p.stderr.strip()[-300:], file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True)
    kb, seconds, rc = proc.stdout.split()
    if int(rc) not in (0, 1):  # 1: compare found a difference
        print(f"  {argv[1]} exited {rc}: {proc.stderr.strip()}", file=sys.stderr)
    return int(kb) / 1024, float(seconds), int(rc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2_490_000, help="samples in each folder")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="commbench-memory-"))
    try:
        cb = str(BIN / "commbench")
        print(f"{'folders':<10} {'command':<9} {'on disk':>9} {'peak':>7} {'its start':>9} {'above start':>11} "
              f"{'/ disk':>7} {'time':>6}  exit")
        starts: dict[str, float] = {}
        for kind in ("tiny", "timed", "coarse", "repeated"):
            a, b = root / f"{kind}-a", root / f"{kind}-b"
            begun = time.monotonic()
            count = POINTS * 10 if kind == "tiny" else args.samples
            disk = write_folder(a, count, "timed" if kind == "tiny" else kind, 1) + \
                write_folder(b, count, "timed" if kind == "tiny" else kind, 2)
            print(f"  (wrote two {kind} folders in {time.monotonic() - begun:.0f} s)", file=sys.stderr)
            for name, argv, read in (("compare", [cb, "compare", str(a), str(b)], disk),
                                     ("report", [cb, "report", str(a), "--output", str(root / f"{kind}.html")],
                                      disk // 2)):
                mb, seconds, rc = peak(argv)
                start = starts.setdefault(name, mb)  # the command on two tiny folders: Python and its libraries
                print(f"{kind:<10} {name:<9} {read / 2**20:>7.1f}MB {mb:>5.0f}MB {start:>7.0f}MB {mb - start:>9.0f}MB "
                      f"{(mb - start) * 2**20 / read:>6.1f}x {seconds:>5.1f}s  {rc}")
            shutil.rmtree(a)
            shutil.rmtree(b)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
