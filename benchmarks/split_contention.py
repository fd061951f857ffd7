"""Groups that share a link slow each other; groups that do not, do not (issue 65, --split). On an emulated
cluster (root: network namespaces, each node's uplink shaped by tc to --link-rate), one collective of
SIZE per group, timed three ways in one go:

  alone     --emulate 2x1                  one group: two ranks, one a node
  shared    --emulate 2x2 --split mod:2    two groups {0,2} {1,3}: both cross the one link between the nodes
  apart     --emulate 4x1 --split div:2    two groups {0,1} {2,3}: each on links of its own

Each group's busbw (the rows' group_busbw_gbps) over the alone run's busbw, median over repetitions.
Broadcast from rank 0 sends one way, so one group alone fills its link (MPI over TCP in both directions
at once does not: an exchange's two directions cross one after the other, docs/how-to/emulated-cluster.md).

    python benchmarks/split_contention.py                        # broadcast, 4M, 1gbit, 3 repetitions
    python benchmarks/split_contention.py -c all_gather --reps 5

Targets: shared <= 0.6 of alone (each group gets about half the link); apart >= 0.9."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from commbench.folder.load import load_run  # noqa: E402

LAYOUTS = {"alone": ["--emulate", "2x1"], "shared": ["--emulate", "2x2", "--split", "mod:2"],
           "apart": ["--emulate", "4x1", "--split", "div:2"]}


def busbw(args, layout: str, folder: Path) -> list[float]:
    mode = "--in-place" if args.collective == "broadcast" else "--out-of-place"  # (MPI's Bcast: one buffer)
    subprocess.run([sys.executable, "-m", "commbench", "run", "--backend", args.backend, "-c", args.collective,
                    "--sizes", args.size, mode, "--iters", "10", "--link-rate", args.link_rate, "--oversubscribe",
                    "--quiet", "--out", str(folder), *LAYOUTS[layout]], check=True, cwd=ROOT)
    rows, _ = load_run(folder)
    assert (rows.wrong == 0).all() and len(rows) == 1
    row = rows.iloc[0]
    if layout == "alone":
        return [float(row.busbw_gbps)]
    return [float(b) for b in str(row.group_busbw_gbps).split(";")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--collective", default="broadcast")
    parser.add_argument("--backend", default="mpi")
    parser.add_argument("--size", default="4M")
    parser.add_argument("--link-rate", default="1gbit")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("the emulated cluster needs root")
    ratios: dict[str, list[float]] = {"shared": [], "apart": []}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            got = {layout: busbw(args, layout, Path(tmp) / f"{layout}{rep}") for layout in LAYOUTS}
            alone = got["alone"][0]
            for layout in ("shared", "apart"):
                ratios[layout] += [b / alone for b in got[layout]]
            print(f"rep {rep}: alone {alone:.4f} GB/s; shared {got['shared']}; apart {got['apart']}")
    for layout, target in (("shared", "<= 0.6"), ("apart", ">= 0.9")):
        r = np.array(ratios[layout])
        print(f"{layout}: each group's busbw / alone: median {np.median(r):.3f} (range {r.min():.3f}-{r.max():.3f}), "
              f"target {target}")


if __name__ == "__main__":
    main()
