"""How often `commbench compare` cries wolf, and whether it catches a real slowdown.

    python benchmarks/compare_false_positives.py --pairs 5

Runs 2 x PAIRS back-to-back sweeps of the `ci` suite, compares each disjoint pair (false
positives: any regression between two runs of the same code), then copies the first sweep with
every time multiplied by 1.10 and compares it against the original (it must be flagged).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from commbench.analysis.compare import compare
from commbench.analysis.load import read_samples, run_dirs
from commbench.results import RESULTS_CSV, SAMPLES_CSV, SAMPLES_PARQUET


def inject_slowdown(src: Path, dst: Path, factor: float) -> Path:
    """A copy of a result folder (run or sweep) with every time multiplied by factor."""
    shutil.copytree(src, dst)
    for d in run_dirs(dst):
        rows = pd.read_csv(d / RESULTS_CSV)
        for col in [c for c in rows.columns if c.startswith("time_us")]:
            rows[col] *= factor
        rows[["algbw_gbps", "busbw_gbps"]] /= factor
        rows.to_csv(d / RESULTS_CSV, index=False)
        samples = read_samples(d)
        samples["time_us"] *= factor
        (d / SAMPLES_PARQUET).unlink(missing_ok=True)
        samples.to_csv(d / SAMPLES_CSV, index=False)
    return dst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--suite", default="ci")
    ap.add_argument("--threshold", type=float, default=0.05)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="compare-fp-"))
    sweeps = []
    for i in range(2 * args.pairs):
        out = root / f"sweep{i}"
        subprocess.run([sys.executable, "-m", "commbench", "sweep", args.suite, "--out", str(out), "--quiet"],
                       check=True, capture_output=True)
        sweeps.append(out)
    false_pos = 0
    for i in range(args.pairs):
        c = compare(sweeps[2 * i], sweeps[2 * i + 1], args.threshold)
        false_pos += c.count("regression")
        print(f"pair {i + 1}: {c.summary()}")
    slowed = inject_slowdown(sweeps[0], root / "slowed", 1.10)
    c = compare(sweeps[0], slowed, args.threshold)
    print(f"\nfalse-positive regressions over {args.pairs} pairs of back-to-back '{args.suite}' sweeps: {false_pos} "
          f"(of {args.pairs * len(c.verdicts)} point comparisons)")
    print(f"10% slowdown injected into a copy: {c.count('regression')} of {len(c.verdicts)} points flagged")
    print(f"results in {root}")


if __name__ == "__main__":
    main()
