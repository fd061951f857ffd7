"""What a router's imbalance costs one training step (issue 65): the bundled MoE workload measured here
with its experts' all-to-all even (all_to_all), then uneven (all_to_allv at nccl-tests' spreads), the
variants interleaved in every repetition, each a `commbench workload` as a user types it:

    commbench workload moe_ep8 -n 4 --scale S --backend mpi -a native [--spread F] --out DIR

Per variant, the expert traffic's measured ms per step (workload.json's totals, kind ep) and its
share of the step's measured communication, medians over repetitions; the ratio is to the even
all-to-all of the same repetition.

    python benchmarks/moe_imbalance.py                     # spreads 0, 0.5, 1; scale 1/1000; 3 repetitions
    python benchmarks/moe_imbalance.py --spreads 0,0.5 --reps 5 --scale 0.004

Expected: spread 0 within 10 % of the even all_to_all (the same bytes, split evenly); a larger
spread costs more where the links are uneven, and on one machine's shared memory little."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def step(args, spread: str | None, out: Path) -> tuple[float, float]:
    """(ep ms per step, ep's share of the measured step) of one workload run."""
    cmd = [sys.executable, "-m", "commbench", "workload", args.workload, "-n", str(args.ranks), "--scale",
           str(args.scale), "--backend", args.backend, "-a", "native", "--oversubscribe", "--quiet", "--out", str(out)]
    subprocess.run(cmd + ([] if spread is None else ["--spread", spread]), check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    totals = json.loads((out / "workload.json").read_text())["totals"]
    by_kind = {t["kind"]: t for t in totals}
    assert json.loads((out / "workload.json").read_text())["measured"]["wrong"] == 0
    ep, every = by_kind["ep"]["measured_ms"], by_kind["all"]["measured_ms"]
    return ep, ep / every


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="moe_ep8")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--scale", type=float, default=0.001)
    parser.add_argument("--backend", default="mpi")
    parser.add_argument("--spreads", default="0,0.5,1")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    variants = [None, *args.spreads.split(",")]
    got: dict[str | None, list[tuple[float, float, float]]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            even = None
            for v in variants:
                ep, share = step(args, v, Path(tmp) / f"{rep}-{v}")
                even = ep if v is None else even
                got[v].append((ep, share, ep / even))
                print(f"rep {rep}: {'all_to_all (even)' if v is None else f'all_to_allv spread {v}':28} "
                      f"ep {ep:.4g} ms/step, {100 * share:.1f} % of the step")
    for v in variants:
        a = np.array(got[v])
        print(f"{'all_to_all (even)' if v is None else f'all_to_allv spread {v}':28} ep median {np.median(a[:, 0]):.4g} "
              f"ms/step, {100 * np.median(a[:, 1]):.1f} % of the step; / even: median {np.median(a[:, 2]):.3f} "
              f"(range {a[:, 2].min():.3f}-{a[:, 2].max():.3f})")


if __name__ == "__main__":
    main()
