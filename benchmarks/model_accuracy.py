"""How well the α-β-γ model predicts, and what it says at scale.

    python benchmarks/model_accuracy.py                         # 3 MPI sweeps here + held-out errors
    sudo python benchmarks/model_accuracy.py --emulated         # also the emulated 2x2 speedup check
    python benchmarks/model_accuracy.py --mpi-run DIR --emulated-run DIR   # reuse earlier sweeps

1. MPI, 4 ranks, all-reduce 8 B - 64 MB, ring/tree/rhd, each point timed for at least 0.3 s, in
   --repeat independent sweeps: fit, then held-out error (leave one size out, leave one
   algorithm out), overall and for points of 64 KB and up, per sweep.
2. Emulated 2x2 cluster at 1 Gbit/s (gloo): fit on the algorithms `model predict` shows, and
   again without hierarchical; predicted hierarchical-over-ring speedup against the measured one.
3. Scale: 32 .. 1024 GPUs at 8 per node, 450 GB/s inside nodes, 50 GB/s per GPU between them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pandas as pd

from commbench.analysis.model import load_rows
from commbench.analysis.model.costs import Params, Shape, time_s
from commbench.analysis.model.fit import fit_backend, usable_rows
from commbench.analysis.model.validate import HELD_OUT_MIN_BYTES, held_out, summary
from commbench.analysis.model.predict import best_and_crossovers, predict, predicted

MPI_ALGORITHMS = ("ring", "tree", "rhd")  # this experiment's choice for the one-node sweeps (section 1)


def sweep(out: str, args: list[str]) -> str:
    subprocess.run([sys.executable, "-m", "commbench", "run", "--out", out, "--quiet", *args], check=True)
    return out


def mpi_accuracy(run: str) -> dict:
    """Fit and held-out errors of one sweep; returns the held-out points >= 64 KB by method."""
    rows = load_rows([run])
    rows = rows[rows.algorithm.isin(MPI_ALGORITHMS)]
    f = fit_backend(usable_rows(rows), "mpi")
    print(f"MPI fit of {run} ({f.points} points, lanes {f.lanes}): " + ", ".join(
        f"{k}={v:.3g}" for k, v in f.params.items() if v is not None) + f"; fit error median {100 * f.median_error:.1f} %")
    held = {}
    for by in ("size_bytes", "algorithm"):
        errors = held_out(rows, by)
        s = summary(errors)
        held[by] = errors[errors.size_bytes >= HELD_OUT_MIN_BYTES]
        per_algo = held[by].groupby("algorithm").error.apply(lambda e: e.abs().median())
        print(f"  held out by {by}: median |error| {100 * s['median_abs_error']:.1f} % ({s['points']} points); "
              f">= 64 KB {100 * s['median_abs_error_64k_up']:.1f} % ({s['points_64k_up']} points); per algorithm >= 64 KB: "
              + ", ".join(f"{a} {100 * v:.1f} %" for a, v in per_algo.items()))
    return held


def emulated_speedup(run: str) -> None:
    rows = usable_rows(load_rows([run]))
    measured = rows[rows.algorithm.isin(["ring", "hierarchical"])].pivot_table(
        index="size_bytes", columns="algorithm", values="time_us")
    measured = (measured.ring / measured.hierarchical).dropna()
    for label, train in (("all algorithms", rows), ("without hierarchical", rows[rows.algorithm != "hierarchical"])):
        f = fit_backend(train, "gloo")
        p, shape = f.to_params(), Shape(2, 2, "block", f.links_per_node, f.lanes)
        print(f"emulated fit, {label} ({f.points} points, lanes {f.lanes}, error median {100 * f.median_error:.1f} %): "
              + ", ".join(f"{k}={v:.3g}" for k, v in f.params.items() if v is not None))
        for size, m in measured.items():
            if size < 1 << 20:
                continue
            pred = time_s(p, "ring", "all_reduce", shape, size) / time_s(p, "hierarchical", "all_reduce", shape, size)
            print(f"  {size >> 20} MB: hierarchical over ring measured {m:.3f}, predicted {pred:.3f} "
                  f"({100 * (pred / m - 1):+.1f} %)")


def at_scale() -> None:
    params = Params(2e-6, 1 / 450e9, 5e-6, 1 / 50e9, 0.0)
    for gpus in (8, 32, 128, 512, 1024):
        shape = Shape(gpus // 8, 8, "block", 8)
        table = predict(params, shape, "all_reduce", [2**k for k in range(3, 34)])
        best, changes = best_and_crossovers(table)
        big = table[table.size_bytes == 2**33].set_index("algorithm")
        ring_tree = table.pivot(index="size_bytes", columns="algorithm", values="time_us")
        over = ring_tree[ring_tree.ring < ring_tree.tree].index
        print(f"{gpus:5} GPUs: busbw at 8 GB: " + ", ".join(f"{a} {big.busbw_gbps[a]:.1f}" for a in big.index)
              + f" GB/s; ring beats tree from {over.min() if len(over) else '-'} B; best: "
              + " -> ".join(f"{a}" for a in dict.fromkeys(best.values))
              + (" (changes at " + ", ".join(f"{s} B" for s, _, _ in changes) + ")" if changes else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mpi-run", action="append", help="Reuse an MPI sweep (repeatable).")
    parser.add_argument("--repeat", type=int, default=3, help="Independent MPI sweeps to measure (default 3).")
    parser.add_argument("--emulated", action="store_true")
    parser.add_argument("--emulated-run")
    parser.add_argument("--out", default="results/model-accuracy")
    args = parser.parse_args()
    mpi_runs = args.mpi_run or [sweep(f"{args.out}/mpi-{i}", [
        "-n", "4", "--backend", "mpi", "-a", ",".join(MPI_ALGORITHMS), "-c", "all_reduce", "-b", "8", "-e", "64M",
        "--out-of-place", "--min-time", "0.3"]) for i in range(args.repeat)]
    results = [mpi_accuracy(run) for run in mpi_runs]
    for by in ("size_bytes", "algorithm") if results else ():
        pooled = pd.concat([r[by] for r in results]).error.abs()
        print(f"held out by {by}, >= 64 KB: median |error| per sweep "
              + ", ".join(f"{100 * r[by].error.abs().median():.1f} %" for r in results)
              + f"; all {len(pooled)} points {100 * pooled.median():.1f} % (p90 {100 * pooled.quantile(0.9):.1f} %)")
    if args.emulated or args.emulated_run:
        run = args.emulated_run or sweep(f"{args.out}/emulated", [
            "--backend", "gloo", "--emulate", "2x2", "-a", ",".join(predicted()), "-c", "all_reduce",
            "--sizes", "4K,64K,256K,1M,4M,16M,64M", "--in-place", "-w", "1"])
        emulated_speedup(run)
    at_scale()


if __name__ == "__main__":
    main()
