"""What a user waits for before and after the measuring (issue 42): `commbench run -n 2 --sizes 8`
from command to exit, as typed, and where that time goes.

    python benchmarks/startup.py            # 10 runs (about a minute here)
    python benchmarks/startup.py --runs 3

Target: median <= 2 s on the project's 2-core VM. Each run is timed whole (a new Python, the CLI, the
launcher, the ranks' start and MPI's, the two points, the folder written); the floor beside it is
`mpirun -n 2 python -c 'from mpi4py import MPI'` (the launcher and MPI's start alone), which no
change to commbench can go under. Run it on an otherwise idle machine: the figures are wall times.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def timed(argv: list[str]) -> float:
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="commbench-startup-"))
    floor_argv = [str(BIN / "mpirun"), "-n", "2", "--allow-run-as-root", "--oversubscribe", sys.executable, "-c",
                  "from mpi4py import MPI; MPI.COMM_WORLD.Barrier()"]
    runs, floors = [], []
    try:
        for k in range(args.runs):
            out = root / f"r{k}"
            runs.append(timed([str(BIN / "commbench"), "run", "-n", "2", "--sizes", "8", "--out", str(out)]))
            floors.append(timed(floor_argv))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"commbench run -n 2 --sizes 8: median {statistics.median(runs):.2f} s "
          f"(min {min(runs):.2f}, max {max(runs):.2f}, {len(runs)} runs; target <= 2 s)")
    print(f"floor (mpirun + MPI start, 2 ranks): median {statistics.median(floors):.2f} s")


if __name__ == "__main__":
    main()
