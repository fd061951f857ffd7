"""The uneven all-to-all against the even one (issue 65): at spread 0 `all_to_allv` moves the bytes of
`all_to_all` (every block 16 B-aligned), so the two should take the same time. One `commbench run` per
repetition measures both, MPI native (the C loop: MPI_Alltoallv against MPI_Alltoall) and the own
pairwise exchange, out of place, 8 B - 4 MB; the repetitions alternate which collective runs first.
Per size the median over repetitions of each; ratio = all_to_allv / all_to_all.

    python benchmarks/alltoallv_even.py                 # 4 ranks, 5 repetitions
    python benchmarks/alltoallv_even.py --ranks 2 --reps 3

Target: ratio within 0.90-1.10 at every size (a figure of this machine, with its noise: compare
the spread of the repetitions printed beside it)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from commbench.folder.load import load_run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--max-bytes", default="4M")
    args = parser.parse_args()
    frames = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            order = "all_to_all,all_to_allv" if rep % 2 == 0 else "all_to_allv,all_to_all"
            out = Path(tmp) / f"rep{rep}"
            subprocess.run([sys.executable, "-m", "commbench", "run", "-n", str(args.ranks), "--backend", "mpi",
                            "-c", order, "-a", "native,pairwise", "--spread", "0", "-b", str(args.ranks * 16),
                            "-e", args.max_bytes, "-f", "4", "--out-of-place", "--oversubscribe", "--quiet",
                            "--out", str(out)], check=True, cwd=ROOT)
            rows, _ = load_run(out)
            frames.append(rows.assign(rep=rep))
    rows = pd.concat(frames)
    assert (rows.wrong == 0).all()
    table = rows.pivot_table(index=["algorithm", "size_bytes", "rep"], columns="collective", values="time_us")
    table["ratio"] = table["all_to_allv"] / table["all_to_all"]
    summary = table.groupby(level=["algorithm", "size_bytes"]).agg(
        even_us=("all_to_all", "median"), uneven_us=("all_to_allv", "median"),
        ratio_lo=("ratio", "min"), ratio_hi=("ratio", "max"))
    summary["ratio"] = summary.uneven_us / summary.even_us
    pd.set_option("display.width", 160)
    print(summary.round(3).to_string())
    inside = summary.ratio.between(0.9, 1.1)
    print(f"\n{int(inside.sum())} of {len(summary)} sizes within 0.90-1.10 (ratio of the medians); "
          f"worst {summary.ratio.min():.3f} - {summary.ratio.max():.3f}")


if __name__ == "__main__":
    main()
