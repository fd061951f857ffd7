"""How often `commbench compare` cries wolf, and whether it catches a real slowdown (issue 21).

    python benchmarks/compare_false_positives.py                       # the full measurement, ~1 hour
    python benchmarks/compare_false_positives.py --pairs 1 --single-pairs 1 --suite tiny.yaml   # a smoke run

On one machine, with the `ci` suite (its `repeat: 3`: three jobs a point, one folder a run):

1. PAIRS pairs of identical back-to-back sweeps A, B; in every second pair a noisy neighbour (a
   CPU-bound process) starts NEIGHBOUR_DELAY s into sweep B and runs until B ends. compare(A, B):
   every point called a regression is a false positive (target: none; inconclusive is allowed).
2. Real slowdowns: for each quiet pair, B's samples multiplied by 1.10 and by 1.25 (a slowdown
   of the timed call that scales every sample), compared against A and, the other way round,
   A slowed against B: the share of points flagged, and of comparisons that exit 1
   (targets: >= 90 % at 10 %, 100 % at 25 %).
3. SINGLE_PAIRS pairs of one-job sweeps (the suite with repeat: 1): regressions claimed
   (target: none; all inconclusive).

Prints one line per comparison and the totals; writes every verdict to OUT/verdicts.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import neighbour
import numpy as np
import pandas as pd
import yaml

from commbench.analysis.compare import compare
from commbench.folder.load import read_samples
from commbench.folder.files import run_dirs
from commbench.folder.schema import RESULTS_CSV, SAMPLES_CSV, SAMPLES_PARQUET
from commbench.run.suites import find_suite

FACTORS = (1.10, 1.25)


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


def sweep(suite: Path, out: Path, neighbour_delay: float | None = None) -> Path:
    """One `commbench sweep` into out; with neighbour_delay, a CPU-bound process starts that many
    seconds in and is stopped when the sweep ends."""
    code, stderr = neighbour.run([sys.executable, "-m", "commbench", "sweep", str(suite), "--out", str(out), "--quiet"],
                                 neighbour_delay)
    if code != 0:
        raise SystemExit(f"sweep into {out} failed (exit {code}): {stderr.strip().splitlines()[-1:]}")
    return out


def suite_with_repeat(suite: Path, repeat: int, out: Path) -> Path:
    doc = yaml.safe_load(suite.read_text())
    doc.setdefault("defaults", {})["repeat"] = repeat
    for run in doc["runs"]:
        run.pop("repeat", None)
    out.write_text(yaml.safe_dump(doc))
    return out


def judge(name: str, base: Path, cand: Path, threshold: float, log: list) -> Counter:
    c = compare(base, cand, threshold)
    counts = Counter(v.verdict for v in c.verdicts)
    reach = c.detectable()
    points = [{"point": v.name(), "verdict": v.verdict, "ratio": v.ratio, "ci": [v.ci_low, v.ci_high],
               "jobs": list(v.jobs), "note": v.note} for v in c.verdicts]
    log.append({"comparison": name, "baseline": str(base), "candidate": str(cand), "exit_code": c.exit_code,
                "summary": c.summary(), "detectable": float(np.median(reach)) if reach else None, "points": points})
    print(f"{name}: {c.summary()}", flush=True)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=20,
                    help="pairs of identical sweeps (every second one with a neighbour)")
    ap.add_argument("--single-pairs", type=int, default=10, help="pairs of one-job sweeps")
    ap.add_argument("--suite", default="ci", help="a bundled suite's name or a suite file (default ci)")
    ap.add_argument("--threshold", type=float, default=0.05)
    ap.add_argument("--neighbour-delay", type=float, default=5.0, help="seconds into sweep B the neighbour starts")
    ap.add_argument("--out", help="folder for the sweeps (default: a new temporary folder)")
    args = ap.parse_args()
    suite = find_suite(args.suite)
    root = Path(args.out or tempfile.mkdtemp(prefix="compare-fp-"))
    root.mkdir(parents=True, exist_ok=True)
    log: list[dict] = []
    started = time.monotonic()

    quiet, noisy, slowed = Counter(), Counter(), {f: Counter() for f in FACTORS}
    exits = {f: [] for f in FACTORS}
    for i in range(args.pairs):
        with_neighbour = i % 2 == 1
        a = sweep(suite, root / f"pair{i}-a")
        b = sweep(suite, root / f"pair{i}-b", args.neighbour_delay if with_neighbour else None)
        counts = judge(f"pair {i + 1}{' (neighbour during B)' if with_neighbour else ''}", a, b, args.threshold, log)
        (noisy if with_neighbour else quiet).update(counts)
        if with_neighbour:
            continue
        for f in FACTORS:
            for base, cand, tag in ((a, b, "b"), (b, a, "a")):
                slow = inject_slowdown(cand, root / f"pair{i}-{tag}-x{f:.2f}", f)
                c = judge(f"pair {i + 1}, {tag.upper()} slowed {f:.2f}x", base, slow, args.threshold, log)
                slowed[f].update(c)
                exits[f].append(log[-1]["exit_code"])
                shutil.rmtree(slow)

    single = Counter()
    one_job = suite_with_repeat(suite, 1, root / "one-job-suite.yaml")
    for i in range(args.single_pairs):
        a = sweep(one_job, root / f"single{i}-a")
        b = sweep(one_job, root / f"single{i}-b")
        single.update(judge(f"one-job pair {i + 1}", a, b, args.threshold, log))

    (root / "verdicts.json").write_text(json.dumps(log, indent=2))

    def line(counts: Counter) -> str:
        total = sum(counts.values())
        return (f"{counts['regression']} regression, {counts['inconclusive']} inconclusive, "
                f"{counts['unchanged']} unchanged, {counts['improvement']} improvement (of {total} point comparisons)")

    print(f"\nsuite {suite}, threshold {args.threshold:.0%}, {time.monotonic() - started:.0f} s; results in {root}")
    print(f"identical pairs, quiet ({(args.pairs + 1) // 2}):           {line(quiet)}")
    print(f"identical pairs, neighbour during B ({args.pairs // 2}): {line(noisy)}")
    for f in FACTORS:
        total = sum(slowed[f].values())
        share = slowed[f]["regression"] / total if total else float("nan")
        print(f"{f - 1:.0%} slowdown ({len(exits[f])} comparisons): {share:.0%} of points flagged, "
              f"{sum(e == 1 for e in exits[f])} of {len(exits[f])} comparisons exit 1; {line(slowed[f])}")
    print(f"one-job pairs ({args.single_pairs}):                   {line(single)}")
    reach = [e["detectable"] for e in log if e["detectable"] is not None]
    if reach:
        print(f"smallest slowdown the jobs' spread lets compare call a regression (median over points, per comparison): "
              f"median {np.median(reach) - 1:.0%}, {min(reach) - 1:.0%} .. {max(reach) - 1:.0%}")


if __name__ == "__main__":
    main()
