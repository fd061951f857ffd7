"""ring_kernel and tree_kernel next to the library's native call (and the Python ring), one
`commbench run` job per configuration, so the algorithms of a configuration share the job.

    python benchmarks/kernels_vs_native.py                   # CPU: MPI, 2 and 4 ranks (a few minutes)
    python benchmarks/kernels_vs_native.py --quick           # fewer sizes, 0.05 s a point (< 1 minute)
    python benchmarks/kernels_vs_native.py --device cuda     # also ring_kernel vs NCCL, 64 MB - 1 GB
    python benchmarks/kernels_vs_native.py --jobs 3          # 3 jobs a configuration, the median of each job's ratio
    python benchmarks/kernels_vs_native.py --every-size --jobs 3   # issue 44's table (run's defaults, ~2 minutes)

Configurations (float32 sum, out of place):
  latency   2 ranks, all-reduce 8 B - 4 KB: native, ring_kernel, tree_kernel, ring
  busbw     2 and 4 ranks, all three collectives, 1 - 64 MB: native, ring_kernel
  gpu       (--device cuda) every GPU of this machine (at least 2), NCCL, 64 MB - 1 GB: native, ring_kernel
  every     (--every-size, alone) 2 and 4 ranks, all three collectives, 8 B - 16 MB by x8 and 64 MB, run's
            own --min-time: native, ring_kernel, tree_kernel; the better kernel's time / native per point
            (<= 1.0, and <= 0.67 from 1 MB; with --jobs, the median of each job's ratio), and the 2-rank
            8 B all-reduce / the run's exchange floor (<= 1.2)

Targets, each judged on its worst point (the median is shown beside it):
  ring_kernel and tree_kernel latency / native        <= 1.5 (moonshot <= 1.0)
  ring_kernel busbw / native, 2 and 4 ranks, 1-64 MB  >= 1.0
  Python ring latency / ring_kernel latency at 8 B    >= 10
The GPU ratio (ring_kernel busbw / NCCL busbw) is reported without a target.
On this VM a whole job's ratio moves with the machine's slow periods; benchmarks/kernel_isolation.py
judges the CPU targets with the loops side by side in one process.

Note: the kernels' host build times its calls in a loop in C (commbench.kernels.host.HostNode.bind);
native's MPI calls by the harness' C loop (commbench/kernels/mpi_loop.c; the `timer` column says which loop
timed each row: gloo's native calls keep the Python loop, NCCL's a CUDA graph).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

LATENCY_SIZES = [8 << i for i in range(10)]  # 8 B .. 4 KB
EVERY_SIZES = [8 << 3 * i for i in range(8)] + [64 << 20]  # 8 B, 64 B, ... 16 MB (x8 steps) and 64 MB
EVERY_TARGET, EVERY_LARGE_TARGET, LARGE = 1.0, 0.67, 1 << 20  # the better kernel's time / native at most
FLOOR_TARGET = 1.2  # 2-rank 8 B all-reduce time / the machine's exchange floor (commbench floor) at most
BUSBW_SIZES = [1 << 20, 4 << 20, 16 << 20, 64 << 20]
LATENCY_TARGET, BUSBW_TARGET = 1.5, 1.0  # kernel latency / native at most; kernel busbw / native at least
GPU_SIZES = [64 << 20, 256 << 20, 1 << 30]
QUICK = {"latency": [8, 64, 512, 4096], "busbw": [1 << 20, 16 << 20], "gpu": [64 << 20, 256 << 20]}
COLLECTIVES = ["all_reduce", "reduce_scatter", "all_gather"]
COLUMNS = ["config", "metric", "ratio_of", "collective", "size_bytes", "num", "den", "ratio"]


def size_text(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def span(sizes: list[int]) -> str:
    return f"{size_text(min(sizes))}B-{size_text(max(sizes))}B"


def run(out: Path, n: int, backend: str, algos: list[str], collectives: list[str], sizes: list[int],
        args, device: str = "cpu") -> pd.DataFrame:
    """One commbench job; its rows (every one correct)."""
    cmd = [sys.executable, "-m", "commbench", "run", "-n", str(n), "--backend", backend, "--device", device,
           "-a", ",".join(algos), "-c", ",".join(collectives), "--sizes", ",".join(map(size_text, sizes)),
           "-d", "float32", "-o", "sum", "--out-of-place", "--out", str(out), "--quiet"]
    for flag, value in (("--min-time", args.min_time), ("--max-iters", args.max_iters)):
        if value is not None:  # (--every-size: run's own defaults unless given, as a user types it)
            cmd += [flag, str(value)]
    if args.channels:
        cmd += ["--channels", str(args.channels)]
    print("$", " ".join(cmd[1:]).replace("-m commbench", "commbench", 1), flush=True)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")  # mpirun
    subprocess.run(cmd, check=True, env=env)
    rows = pd.read_csv(out / "results.csv")
    assert (rows.wrong == 0).all(), rows[rows.wrong != 0]
    missing = set(algos) - set(rows.algorithm)
    assert not missing, f"no points of {', '.join(sorted(missing))} (skipped: see {out / 'run.json'})"
    return rows


def runs(out: Path, n: int, backend: str, algos: list[str], collectives: list[str], sizes: list[int],
         args, device: str = "cpu") -> pd.DataFrame:
    """--jobs jobs of one configuration, one after another; their rows together."""
    if args.jobs == 1:
        return run(out, n, backend, algos, collectives, sizes, args, device)
    return pd.concat([run(out / f"job{k + 1}", n, backend, algos, collectives, sizes, args, device)
                      for k in range(args.jobs)], ignore_index=True)


def per_job(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The metric per job, collective and size (rows), one column per algorithm."""
    return rows.pivot_table(index=["run_id", "collective", "size_bytes"], columns="algorithm", values=metric)


def median_ratio(job: pd.DataFrame, num: str, den: str, config: str, metric: str, ratio_of: str) -> pd.DataFrame:
    """Per collective and size: the median over jobs of each job's num / den (a job's algorithms are seconds
    apart, its jobs a minute, and this VM's cores change state for minutes: the ratio of the two sides'
    medians paired one job's native with another's kernels); num and den: each side's own median."""
    per = job.assign(ratio=job[num] / job[den]).groupby(["collective", "size_bytes"]).median()
    return pd.DataFrame({"config": config, "metric": metric, "ratio_of": ratio_of, "num": per[num], "den": per[den],
                         "ratio": per["ratio"]}).reset_index()[COLUMNS]


def ratios(rows: pd.DataFrame, metric: str, num: str, den: str, config: str) -> pd.DataFrame:
    """num's metric over den's, per collective and size (one row each; median_ratio over jobs)."""
    return median_ratio(per_job(rows, metric), num, den, config, metric, f"{num}/{den}")


class Verdicts:
    def __init__(self):
        self.lines: list[dict] = []

    def add(self, name: str, table: pd.DataFrame, bound: float, at_most: bool, moonshot: float | None = None):
        """Judged on the worst ratio: the largest for an upper bound, the smallest for a lower."""
        worst = table.ratio.max() if at_most else table.ratio.min()
        ok = (lambda r: r <= bound) if at_most else (lambda r: r >= bound)
        line = {"target": f"{name} {'<=' if at_most else '>='} {bound:g}", "points": len(table),
                "worst": worst, "median": table.ratio.median(), "verdict": "PASS" if ok(worst) else "FAIL"}
        if moonshot is not None:
            line["moonshot"] = f"<= {moonshot:g}: " + ("PASS" if worst <= moonshot else "FAIL")
        self.lines.append(line)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.lines).fillna("-")


def every_size(root: Path, args, verdicts: Verdicts, tables: list) -> None:
    """Issue 44's table: 2 and 4 ranks, all three collectives, 8 B - 64 MB, native and both kernels in one
    `commbench run` job (run's defaults), --jobs jobs; per point the better kernel's time / native, and the
    2-rank 8 B all-reduce against the exchange floor that run measured (its rows' latency_efficiency)."""
    for n in (2, 4):
        rows = runs(root / f"every-n{n}", n, args.backend, ["native", "ring_kernel", "tree_kernel"], COLLECTIVES,
                    EVERY_SIZES, args)
        job = per_job(rows, "time_us")
        job["kernel"] = job[["ring_kernel", "tree_kernel"]].min(axis=1)
        best = median_ratio(job, "kernel", "native", f"every size n={n}", "time_us", "best kernel/native")
        tables.append(best[COLUMNS])
        verdicts.add(f"best kernel time / native ({n} ranks, {span(EVERY_SIZES)})", best, EVERY_TARGET, at_most=True)
        verdicts.add(f"best kernel time / native ({n} ranks, >= 1MB)", best[best.size_bytes >= LARGE],
                     EVERY_LARGE_TARGET, at_most=True)
        if n == 2:
            point = rows[(rows.collective == "all_reduce") & (rows.size_bytes == 8) & rows.algorithm.str.endswith("_kernel")]
            if point.latency_efficiency.isna().all():
                print("no 8 B all-reduce against the floor: the run measured no floor (see its run.json's floors)")
                continue
            per = point.groupby("algorithm").agg(time=("time_us", "median"), eff=("latency_efficiency", "median"))
            floor = pd.DataFrame({"config": "every size n=2", "metric": "time_us", "ratio_of": per.index + "/floor",
                                  "collective": "all_reduce", "size_bytes": 8, "num": per.time,
                                  "den": per.time * per.eff, "ratio": 1 / per.eff})
            tables.append(floor[COLUMNS])
            verdicts.add("best kernel 8 B all-reduce / exchange floor (2 ranks)", floor.nsmallest(1, "ratio"),
                         FLOOR_TARGET, at_most=True)


def gpus() -> tuple[int, str]:
    """GPUs this machine has for the --device cuda configuration, and why not where none."""
    try:
        import torch
    except ImportError:
        return 0, "torch is not installed"
    if not torch.cuda.is_available():
        return 0, "no CUDA GPU (torch.cuda.is_available() is False)"
    return torch.cuda.device_count(), ""


def markdown(table: pd.DataFrame) -> str:
    cells = table.astype(object).where(table.notna(), "").map(lambda v: f"{v:.3g}" if isinstance(v, float) else str(v))
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in cells.values.tolist()])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="mpi", help="The CPU configurations' backend (native's library).")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="cuda: also ring_kernel vs NCCL.")
    ap.add_argument("--quick", action="store_true", help="Fewer sizes, 0.05 s a point.")
    ap.add_argument("--min-time", type=float, default=None, help="Seconds a point (default 1; --quick 0.05).")
    ap.add_argument("--max-iters", type=int, default=None, help="Default 200000 (--quick 20000).")
    ap.add_argument("--channels", type=int, default=None, help="Passed to commbench run (default: by size).")
    ap.add_argument("--jobs", type=int, default=1,
                    help="Jobs per configuration; each ratio is the median of the jobs' own ratios (this VM's "
                         "cross-core speed changes for seconds to minutes, so one job can catch a slow period).")
    ap.add_argument("--out", default=None, help="Keep the runs here, with the tables as CSV and markdown.")
    ap.add_argument("--every-size", action="store_true",
                    help="Only issue 44's table: 2 and 4 ranks, 8 B - 64 MB, the better kernel against native and the "
                         "floor, with commbench run's own defaults (use --jobs 3 for the median of three).")
    args = ap.parse_args()
    if args.jobs < 1:
        ap.error("--jobs must be at least 1")
    if args.every_size:
        if args.quick or args.device != "cpu":
            ap.error("--every-size measures the CPU table alone, at run's own sizes (no --quick, no --device cuda)")
        root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="kernels-"))
        verdicts, tables = Verdicts(), []
        every_size(root, args, verdicts, tables)
        report(root, args, verdicts, tables)
        return
    args.min_time = args.min_time or (0.05 if args.quick else 1.0)
    args.max_iters = args.max_iters or (20000 if args.quick else 200000)
    sizes = QUICK if args.quick else {"latency": LATENCY_SIZES, "busbw": BUSBW_SIZES, "gpu": GPU_SIZES}
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="kernels-"))
    verdicts, tables = Verdicts(), []
    count, why = gpus() if args.device == "cuda" else (0, "")
    if args.device == "cuda" and count < 2:
        why = f"ring_kernel vs NCCL needs at least 2 GPUs on one node ({why or f'this machine has {count}'})"
        print(f"GPU configuration skipped: {why}")

    lat = runs(root / "latency-n2", 2, args.backend, ["native", "ring_kernel", "tree_kernel", "ring"],
              ["all_reduce"], sizes["latency"], args)
    for algo in ("ring_kernel", "tree_kernel"):
        t = ratios(lat, "time_us", algo, "native", "latency n=2")
        tables.append(t)
        verdicts.add(f"{algo} latency / native (2 ranks, {span(sizes['latency'])})", t, LATENCY_TARGET, at_most=True, moonshot=1.0)
    python_ring = ratios(lat[lat.size_bytes == 8], "time_us", "ring", "ring_kernel", "latency n=2")
    tables.append(python_ring)
    verdicts.add("Python ring latency / ring_kernel (8 B)", python_ring, 10, at_most=False)

    for n in (2, 4):
        bw = runs(root / f"busbw-n{n}", n, args.backend, ["native", "ring_kernel"], COLLECTIVES, sizes["busbw"], args)
        t = ratios(bw, "busbw_gbps", "ring_kernel", "native", f"busbw n={n}")
        tables.append(t)
        verdicts.add(f"ring_kernel busbw / native ({n} ranks, {span(sizes['busbw'])})", t, BUSBW_TARGET, at_most=False)

    if count >= 2:
        gpu = runs(root / f"gpu-n{count}", count, "nccl", ["native", "ring_kernel"], COLLECTIVES, sizes["gpu"],
                  args, device="cuda")
        tables.append(ratios(gpu, "busbw_gbps", "ring_kernel", "native", f"gpu nccl n={count}"))

    report(root, args, verdicts, tables)
    if args.device == "cuda" and count < 2:
        print(f"GPU configuration skipped: {why}")


def report(root: Path, args, verdicts: Verdicts, tables: list) -> None:
    """The ratios per configuration, the verdicts, and with --out the tables as CSV and markdown."""
    table = pd.concat(tables, ignore_index=True)
    for (config, metric, ratio_of), t in table.groupby(["config", "metric", "ratio_of"], sort=False):
        num, den = ratio_of.split("/")
        print(f"\n{config}: {metric} {ratio_of}" + (f" (median of {args.jobs} jobs)" if args.jobs > 1 else ""))
        print(t.drop(columns=["config", "metric", "ratio_of"]).rename(columns={"num": num, "den": den})
              .round(3).to_string(index=False))
    summary = verdicts.table()
    print("\n" + summary.round(3).to_string(index=False))
    if args.out:
        table.to_csv(root / "kernels_vs_native.csv", index=False)
        summary.to_csv(root / "kernels_vs_native_targets.csv", index=False)
        text = f"## Targets\n\n{markdown(summary.round(3))}\n\n## Ratios\n\n{markdown(table)}\n"
        (root / "kernels_vs_native.md").write_text(text, encoding="utf-8")
        print(f"\ntables: {root / 'kernels_vs_native.csv'}, {root / 'kernels_vs_native.md'}")
    print(f"runs: {root}")


if __name__ == "__main__":
    main()
