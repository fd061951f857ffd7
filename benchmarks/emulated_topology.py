"""Topology-aware variants on an emulated cluster (needs root): flat ring vs ring in topology
order vs hierarchical (Python and kernels) vs the library's own all-reduce (with MPI: Open MPI's flat
coll/tuned as native and its hierarchical coll/han as native_han), across 1 Gbit/s links.

    sudo python benchmarks/emulated_topology.py                     # gloo: 2x2 and 4x2, both placements
    sudo python benchmarks/emulated_topology.py --backend mpi       # MPI: mpirun across the namespaces
    sudo python benchmarks/emulated_topology.py --layouts 2x2 --sizes 16M,64M --out results/emu

One `commbench run --emulate LAYOUT --placement P` job per layout and placement (all-reduce,
float32 sum, in place), then the topology comparison of all of them, and the three figures the
topology issue asks for: hierarchical over the flat ring (block placement), the topology-ordered
ring over the rank-ordered ring (round-robin placement), and measured over expected inter-node bytes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from commbench.folder.load import load_runs
from commbench.analysis.topology_comparison import VARIANTS, topology_comparison
from commbench.library_calls import HAN


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", default="2x2,4x2")
    parser.add_argument("--sizes", default="16M,64M")
    parser.add_argument("--link-rate", default="1gbit")
    parser.add_argument("--backend", default="gloo", choices=("gloo", "mpi"))
    parser.add_argument("--out", default=None, help="default: results/emulated-topology-BACKEND")
    args = parser.parse_args()
    runs, root = [], Path(args.out or f"results/emulated-topology-{args.backend}")
    # MPI: native is Open MPI's flat coll/tuned (coll/han's priority 0), native_han its coll/han (rank/han.py)
    variants = [v for v in VARIANTS if args.backend == "mpi" or v != HAN]
    env = dict(os.environ, OMPI_MCA_coll_han_priority="0") if args.backend == "mpi" else None
    for layout in args.layouts.split(","):
        for placement in ("block", "round-robin"):
            out = root / f"{layout}-{placement}"
            if not (out / "results.csv").exists():
                subprocess.run([sys.executable, "-m", "commbench", "run", "--backend", args.backend, "--emulate", layout,
                                "--link-rate", args.link_rate, "--placement", placement, "-c", "all_reduce",
                                "-a", ",".join(variants), "--sizes", args.sizes,
                                "--in-place", "-w", "1", "--out", str(out), "--quiet",
                                "--label", f"{layout} {placement}"], check=True, env=env)
            runs.append(str(out))
    rows, _ = load_runs(runs)
    table = topology_comparison(rows)
    pd.set_option("display.width", 250)
    print(table[["label", "size_bytes", *(f"time_us:{v}" for v in variants)]].round(0).to_string(index=False))
    print("\nhierarchical variants over flat ring, block placement (target >= 1.4, theory 1.5 on 2x2):")
    block = table[table.placement == "block"]
    shown = [f"speedup:{v}" for v in ("hierarchical", "hierarchical_kernel", "native", HAN) if f"speedup:{v}" in block]
    print(block[["label", "size_bytes", *shown]].round(3).to_string(index=False))
    print("\nring_topology over ring, round-robin placement (target >= 1.8, theory G):")
    robin = table[table.placement == "round-robin"]
    print(robin[["label", "size_bytes", "speedup:ring_topology"]].round(3).to_string(index=False))
    measured = rows.internode_bytes_measured / rows.internode_bytes_expected
    print(f"\nmeasured / expected inter-node bytes over {measured.notna().sum()} points: "
          f"min {measured.min():.4f}, max {measured.max():.4f}")


if __name__ == "__main__":
    main()
