"""Does `commbench check` name a slow node, and only it (issue 63)?

    sudo python benchmarks/check_detect.py             # 20 runs with a slow node and 20 without, at 8x1 and 4x2
    sudo python benchmarks/check_detect.py --runs 3    # quicker

Each run is `commbench check --emulate LAYOUT --link-rate 1gbit --json` as a user types it, with
`--node-link-rate K=600mbit` for a node K drawn at random in half of them. Targets: K named (and nothing
else) in >= 19 of 20 runs; without a slow node, nothing flagged in any of 20; one run <= 3 minutes.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def check(layout: str, slow: int | None, out: Path) -> tuple[list, float, dict]:
    args = [sys.executable, "-m", "commbench", "check", "--emulate", layout, "--link-rate", "1gbit", "--json",
            "--out", str(out)] + (["--node-link-rate", f"{slow}=600mbit"] if slow is not None else [])
    start = time.monotonic()
    ran = subprocess.run(args, capture_output=True, text=True)
    took = time.monotonic() - start
    if ran.returncode not in (0, 1):
        sys.exit(f"check failed ({ran.returncode}): {ran.stderr.strip()[-400:]}")
    found = json.loads(ran.stdout)
    return [(f["what"], f["nodes"]) for f in found["flagged"]], took, found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20, help="runs of each kind, per layout")
    parser.add_argument("--layouts", default="8x1,4x2")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="check-"))
    try:
        for layout in args.layouts.split(","):
            nodes = int(layout.split("x")[0])
            named = clean = 0
            times = []
            for i in range(args.runs):
                k = rng.randrange(nodes)
                flagged, took, found = check(layout, k, work / f"{layout}-{2 * i}")
                times.append(took)
                hit = flagged == [("node", [k])]
                named += hit
                print(f"{layout} node {k} at 600mbit: flagged {flagged} ({'named' if hit else 'MISSED'}; "
                      f"{found['repetitions']} repetitions, {took:.0f} s)", flush=True)
                flagged, took, found = check(layout, None, work / f"{layout}-{2 * i + 1}")
                times.append(took)
                clean += not flagged
                print(f"{layout} no slow node: flagged {flagged} ({'ok' if not flagged else 'FALSE ALARM'}; "
                      f"{found['repetitions']} repetitions, {took:.0f} s)", flush=True)
            print(f"\n{layout}: slow node named alone in {named} of {args.runs} runs (target >= 95 %); "
                  f"nothing flagged without one in {clean} of {args.runs} (target all); one run: median "
                  f"{sorted(times)[len(times) // 2]:.0f} s, longest {max(times):.0f} s (target <= 180 s)\n", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
