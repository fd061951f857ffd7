"""commbench's own algorithms next to the library's native call, measured in one job.

    python benchmarks/algorithms_vs_native.py                  # 4 MPI ranks, 2 per node
    python benchmarks/algorithms_vs_native.py --backend gloo -n 4

Runs `commbench run` (float32 sum, out-of-place, 8 B / 16 MB / 64 MB, every algorithm), then
prints busbw of each algorithm divided by native's at the large sizes, and the 8-byte latency
of each algorithm with the per-step cost it implies (latency / steps on the critical path, the
step counts from each algorithm's cost(): its α terms).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from commbench.analysis.model.costs import Params, Shape, time_s
from commbench.analysis.model.predict import predicted

ALGOS = ["native", *predicted()]  # the algorithms `model predict` compares (ring_topology: see ring)


def steps(algo: str, n: int, per_node: int) -> int | None:
    """Messages on the critical path of an 8-byte all-reduce: the algorithm's cost with α = 1,
    β = γ = 0 and no contention inside nodes (lanes: as many as messages)."""
    shape = Shape(n // per_node, per_node, lanes=n * n)
    t = time_s(Params(1.0, 0.0, 1.0, 0.0, 0.0), algo, "all_reduce", shape, 8)
    return None if t is None else round(t)


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
