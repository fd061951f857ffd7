"""commbench's own algorithms next to the library's native call, measured in one job.

    python benchmarks/algorithms_vs_native.py                  # 4 MPI ranks, 2 per node
    python benchmarks/algorithms_vs_native.py --backend gloo -n 4

Runs `commbench run` (float32 sum, out-of-place, 8 B / 16 MB / 64 MB, every algorithm), then
prints busbw of each algorithm divided by native's at the large sizes, and the 8-byte latency
of each algorithm with the per-step cost it implies (latency / steps on the critical path, the
step counts from each algorithm's docstring).
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ALGOS = ["native", "ring", "tree", "dbtree", "rhd", "hierarchical"]


def steps(algo: str, n: int, per_node: int) -> int | None:
    """Messages on the critical path of an all-reduce (α terms of the cost formulas)."""
    log = math.ceil(math.log2(n)) if n > 1 else 0
    p = 1 << (n.bit_length() - 1)
    nodes = n // per_node
    return {
        "ring": 2 * (n - 1),
        "tree": 2 * log,
        "dbtree": 2 * log,
        "rhd": 2 * int(math.log2(p)) + (2 if p != n else 0),
        "hierarchical": 2 * (per_node - 1) + 2 * (nodes - 1),
    }.get(algo)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("--backend", default="mpi")
    ap.add_argument("--ranks-per-node", type=int, default=2)
    ap.add_argument("--min-time", default="1")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="algos-")) / "run"
    cmd = [sys.executable, "-m", "commbench", "run", "-n", str(args.n), "--backend", args.backend,
           "-a", ",".join(ALGOS), "--ranks-per-node", str(args.ranks_per_node), "--sizes", "8,16M,64M",
           "-d", "float32", "-o", "sum", "--out-of-place", "--min-time", args.min_time, "--out", str(out), "--quiet"]
    print("$", " ".join(cmd[1:]).replace("-m commbench", "commbench", 1))
    subprocess.run(cmd, check=True)
    rows = pd.read_csv(out / "results.csv")
    assert (rows.wrong == 0).all()
    big = rows[rows.size_bytes >= 16 << 20]
    bw = big.pivot_table(index=["collective", "size_bytes"], columns="algorithm", values="busbw_gbps")
    print("\nbusbw (GB/s) and ratio to native")
    for algo in [a for a in ALGOS[1:] if a in bw]:
        bw[f"{algo}/native"] = bw[algo] / bw["native"]
    print(bw.round(3).to_string())
    small = rows[(rows.size_bytes == 8) & (rows.collective == "all_reduce")].set_index("algorithm")
    print(f"\nall-reduce latency at 8 B, {args.n} ranks ({args.ranks_per_node} per node)")
    print(f"{'algorithm':>13} {'time_us':>9} {'steps':>6} {'us/step':>8}")
    for algo in ALGOS:
        if algo in small.index:
            t, s = small.loc[algo, "time_us"], steps(algo, args.n, args.ranks_per_node)
            print(f"{algo:>13} {t:>9.1f} {s if s else '-':>6} {t / s if s else float('nan'):>8.1f}")
    print(f"\nresults: {out}")


if __name__ == "__main__":
    main()
