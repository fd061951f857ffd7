"""Does `commbench stragglers` name a rank made late, and only it (issue 63)?

    python benchmarks/stragglers_detect.py            # 20 runs with a rank made late, 20 without
    python benchmarks/stragglers_detect.py --runs 3   # quicker

Each run is `commbench run` as a user types it (4 ranks, MPI, all-reduce, all-gather and reduce-scatter,
1 KB - 1 MB by x8, out-of-place), with `--inject-delay R=0.3` for a rank R drawn at random in half of
them, then `commbench stragglers --format json` on its folder. Targets: R named (and nothing else) in
>= 19 of 20 runs; without a delay, nothing flagged in any of 20. Each run's wall time is printed.
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

RUN = ["run", "-n", "4", "-c", "all_reduce,all_gather,reduce_scatter", "-b", "1K", "-e", "1M", "-f", "8",
       "--out-of-place", "--oversubscribe", "--quiet"]


def commbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "commbench", *args], capture_output=True, text=True)


def one(delayed: int | None, work: Path, i: int) -> tuple[list, float]:
    out = work / f"run{i}"
    start = time.monotonic()
    ran = commbench(*RUN, *(["--inject-delay", f"{delayed}=0.3"] if delayed is not None else []), "--out", str(out))
    took = time.monotonic() - start
    if ran.returncode:
        sys.exit(f"run failed ({ran.returncode}): {ran.stderr.strip()[-400:]}")
    judged = commbench("stragglers", str(out), "--format", "json")
    if judged.returncode not in (0, 1):
        sys.exit(f"stragglers failed ({judged.returncode}): {judged.stderr.strip()[-400:]}")
    flagged = json.loads(judged.stdout)["flagged"]
    return [(f["what"], f["ranks"], f["verdict"]) for f in flagged], took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20, help="runs of each kind")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="stragglers-"))
    try:
        named = clean = 0
        times = []
        for i in range(args.runs):
            r = rng.randrange(4)
            flagged, took = one(r, work, 2 * i)
            times.append(took)
            hit = flagged == [("rank", [r], "slow")]
            named += hit
            print(f"delay on rank {r}: flagged {flagged} ({'named' if hit else 'MISSED'}; {took:.0f} s)", flush=True)
            flagged, took = one(None, work, 2 * i + 1)
            times.append(took)
            clean += not flagged
            print(f"no delay: flagged {flagged} ({'ok' if not flagged else 'FALSE ALARM'}; {took:.0f} s)", flush=True)
        print(f"\nrank made late named alone: {named} of {args.runs} runs (target >= 95 %)")
        print(f"no delay, nothing flagged: {clean} of {args.runs} runs (target all)")
        print(f"one run: median {sorted(times)[len(times) // 2]:.0f} s, longest {max(times):.0f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
