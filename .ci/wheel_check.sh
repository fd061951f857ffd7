#!/usr/bin/env bash
# The wheel check (issue 62): build commbench's wheel, install it with MPI into a clean virtual environment
# outside the clone, and from a folder that holds nothing of the clone run a short job of every algorithm
# family (the library's own, the ring and tree kernels built from the cuda/ sources the wheel carries, the
# hierarchical kernel): it must end OK with every algorithm measured and exact.
# Usage: .ci/wheel_check.sh [python]   (make wheel-check)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${1:-python3}
work=$(mktemp -d /tmp/commbench-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip
"$work/venv/bin/python" -m pip wheel -q --no-deps . -w "$work/dist"
wheel=$(ls "$work"/dist/commbench-*.whl)
"$work/venv/bin/python" -m pip install -q -c constraints.txt "$wheel[mpi]"
mkdir "$work/empty"
cd "$work/empty"
export PATH="$work/venv/bin:$PATH"
# the kernels run the ranks of one node; hierarchical_kernel runs them inside each of two nodes
commbench run -n 2 --backend mpi -a native,ring_kernel,tree_kernel -c all_reduce,all_gather,reduce_scatter \
  --sizes 1K,256K --iters 4 -w 1 --quiet --out "$work/flat"
commbench run -n 4 --ranks-per-node 2 --backend mpi -a hierarchical_kernel -c all_reduce \
  --sizes 1K,256K --iters 4 -w 1 --quiet --out "$work/hierarchical"
"$work/venv/bin/python" - "$work/flat" "$work/hierarchical" <<'PY'
import sys

import pandas as pd

rows = pd.concat([pd.read_csv(f"{folder}/results.csv") for folder in sys.argv[1:]])
want = {"native", "ring_kernel", "tree_kernel", "hierarchical_kernel"}
measured = set(rows.algorithm)
assert want <= measured, f"not measured from the wheel: {sorted(want - measured)}"
assert (rows.wrong == 0).all(), rows[rows.wrong != 0][["algorithm", "collective", "size_bytes", "wrong"]]
print(f"wheel check: {len(rows)} points of {', '.join(sorted(measured))} measured from the installed wheel, all exact")
PY
