"""Hostile and malformed inputs against every command (issue 20): does each one end in its contract?

    .venv/bin/python benchmarks/hostile_inputs.py                  # every input, one at a time (4-8 min, 2 cores)
    .venv/bin/python benchmarks/hostile_inputs.py --class 7        # one class of the issue
    .venv/bin/python benchmarks/hostile_inputs.py -k resume --json hostile.json
    .venv/bin/python benchmarks/hostile_inputs.py --list           # the inputs, nothing run

Each input is one record (`Input`, listed by class in class1() .. class9()): its argv, the files to
create first in a fresh scratch folder (copies of a few fixtures, then damaged), the exit codes
it may end with, the paths it may write, an optional signal and when to send it, and extra
checks. It runs as a real `python -m commbench ...` (this Python; cwd the scratch folder; PATH
with the venv's bin for mpirun; TMPDIR a folder of its own, where an internal error leaves its
traceback file), never two at a time. The contract, the same for every input:

* the exit code is in the record's set (2 for bad input or unusable data; 0 for valid but odd
  input; 128 + N for signal N: 130 SIGINT, 143 SIGTERM, 129 SIGHUP, 141 a closed stdout), and
  never 3 (an internal error); a child killed by a signal it does not handle counts as 128 + N;
* no Python traceback (nor "Exception ignored in") on stderr or stdout;
* exit 2 or 3: exactly one non-empty stderr line; a signal: the last stderr line says
  "interrupted" or "stopped" (a running sweep prints progress before it);
* no raw ESC, BEL, C1 CSI or bidirectional control character on stdout or stderr;
* nothing in the scratch folder changed outside the record's outputs (path, type, size,
  mtime_ns, link target, and sha256 of files up to 1 MB, before and after);
* before an exit 2: at most 5 s wall and 200 MB peak RSS; every input is killed at a hard cap
  (15 s for an input whose only accepted code is 2, 60 s otherwise) and reported as a timeout;
* no process of the command left running after it exits (looked up by an environment tag);
* the system's /dev/null, /dev/full and /dev/zero still device nodes afterwards (outputs that
  are devices are tested on private nodes made in the scratch folder; a replaced system node
  is put back at once and reported);
* the class extras: no marker file written by a program a result folder names (class 1);
  run.json's status matching its rows after a signal (class 7: "interrupted" when a planned
  point has no row, "completed" when every one has); compare's markdown with no unescaped
  link, image or HTML outside code spans, its JSON strict (no NaN/Infinity), its JUnit XML
  well-formed, HTML pages without the crafted markup verbatim (class 8).

Peak memory is the larger of two figures: ru_maxrss from os.wait4 on the command (the largest
single process among it and the descendants it waited for: mpirun and the ranks), and the sum of
RSS over the command's whole process tree sampled every 50 ms from /proc (several ranks at
once; short spikes between samples can be missed). As a guard for this shared machine a tree
beyond MAX_TREE_PROCS processes or MAX_TREE_MB of RSS is killed (a failure either way), and
every process runs under an address-space limit of ADDRESS_LIMIT_GB.

The moments of class 7's signals are rows written (deterministic) or seconds after the start
(timing-dependent: on a loaded machine 1 s can still be inside Python's imports). Nothing watches
/dev/shm or other folders outside the scratch folder (other work on the machine writes there too).

Prints a table per class (inputs tried, contracts met, the worst wall time and peak memory among
inputs that exited 2, and overall) and one line per failing input; exits 0 when every input met
its contract, 1 otherwise.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import random
import re
import resource
import shlex
import shutil
import signal
import stat
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = REPO / ".venv" / "bin" if (REPO / ".venv" / "bin").is_dir() else Path(sys.executable).parent
DATA = REPO / "tests" / "data"

LIMIT_S, LIMIT_MB = 5.0, 200.0  # before an exit 2 (issue 20)
CAP_BAD_S, CAP_S = 15.0, 60.0  # hard kill: an input accepted only with exit 2, any other
MAX_TREE_PROCS, MAX_TREE_MB = 48, 2500.0  # runaway guard for the shared machine
ADDRESS_LIMIT_GB = 8
SCAN_S = 0.05
HASH_LIMIT = 1 << 20
TAG_ENV = "COMMBENCH_HOSTILE_TAG"

CLASSES = {
    1: "a result folder can run code",
    2: "the gate accepts broken data",
    3: "crashes exit 1",
    4: "unwritable outputs",
    5: "damaged --resume folders",
    6: "unbounded work",
    7: "interrupts",
    8: "crafted strings",
    9: "nonsense accepted",
}
RAW_CONTROLS = re.compile("[\x07\x1b\x9b\u202a-\u202e\u2066-\u2069]")
SIGNAL_WORDS = re.compile(r"interrupted|stopped", re.IGNORECASE)


# --- the records --------------------------------------------------------------------------------

Step = Callable[[Path], None]  # prepares the scratch folder before the command runs
Check = Callable[[Path, "Outcome"], list]  # problems found after it ran


@dataclass(frozen=True)
class Sig:
    """A signal to send: after_s seconds after the start, or after the rows trigger when rows is set
    (results.csv at `csv` holds that many rows); to the process group (Ctrl-C) or the process."""
    signum: int
    after_s: float = 0.0
    rows: int | None = None
    csv: str = "X/results.csv"
    group: bool = False
    twice: bool = False  # a second one 0.1 s later (an impatient Ctrl-C Ctrl-C)


@dataclass
class Input:
    cls: int
    name: str
    argv: list[str]  # after `python -m commbench`; "{S}" is the scratch folder's absolute path
    setup: tuple[Step, ...] = ()
    expect: frozenset = frozenset({2})
    outputs: tuple[str, ...] = ()  # paths (relative to the scratch folder) the command may write
    sig: Sig | None = None
    head: int | None = None  # read this many stdout lines, then close stdout (`| head -N`)
    checks: tuple[Check, ...] = ()
    note: str = ""  # why the expected codes, where they are debatable


def I(cls: int, name: str, argv, *setup: Step, expect=(2,), outputs=(), sig=None, head=None, checks=(),
      note="") -> Input:
    """One input; argv as a shell-like string or a list (for strings with control characters)."""
    argv = shlex.split(argv) if isinstance(argv, str) else list(argv)
    return Input(cls, name, argv, tuple(setup), frozenset(expect), tuple(outputs), sig, head, tuple(checks), note)


# --- fixtures: built once per session, lazily, in FIX ---------------------------------------------

FIX: Path = Path()  # set by main
_built: dict[str, Path] = {}
NOTES: list[str] = []  # what the session had to fall back on

COLUMNS = ("run_id,label,point,job,collective,backend,algorithm,device,dtype,op,in_place,world_size,nodes,"
           "ranks_per_node,size_bytes,count,time_us,time_us_mean,time_us_min,time_us_p95,time_us_p99,time_us_max,"
           "time_us_stdev,samples,iterations,batch,warmup,timer,algbw_gbps,busbw_gbps,bus_factor,wrong,"
           "library_choice,power_w_avg,power_w_max,energy_j,energy_j_per_byte,placement,internode_bytes_measured,"
           "internode_bytes_expected,predicted,timestamp").split(",")
BASE_SPEC = {"algorithms": ["native"], "backends": ["mpi"], "batch": None, "channels": None,
             "collectives": ["all_reduce"], "device": "cpu", "done_points": [], "dtypes": ["float32"],
             "emulate": None, "graph": True, "in_place": [False, True], "iters": 20, "label": "",
             "launcher": "auto", "link_rate": "1gbit", "max_iters": 1000, "min_iters": 5, "min_time": 0.1,
             "nccl_tuning": False, "nprocs": 2, "ops": ["sum"], "out_dir": "BASE", "placement": "block",
             "power": False, "ranks_per_node": None, "ring_order": "rank", "run_id": "", "segment_bytes": 1048576,
             "sizes": [8, 1024], "timeout": None, "timer": "auto", "warmup": 2}
BASE_RUN = "run -n 2 --backend mpi -c all_reduce --sizes 8,1K --iters 20 --warmup 2 --out BASE"


def fixture(name: str) -> Path:
    if name not in _built:
        _built[name] = BUILDERS[name]()
    return _built[name]


def _commbench(argv: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "commbench", *shlex.split(argv)], cwd=cwd, env=child_env(FIX),
                          capture_output=True, text=True, timeout=timeout)


def _write_folder(path: Path, points: list[dict], jobs: int = 1, meta: dict | None = None, seed: int = 0,
                  nsamples: int = 20) -> Path:
    """A run folder written by hand (results.csv, samples.csv, run.json), as the one writer would:
    each point's samples lognormal around its time, each job a little apart."""
    rng = random.Random(seed)
    path.mkdir(parents=True)
    run_id = (meta or {}).get("run_id", f"20260101T000000Z-{seed:06x}")
    rows, samples = [], []
    for job in range(1, jobs + 1):
        shift = 1 + 0.01 * rng.uniform(-1, 1)
        for p, pt in enumerate(points):
            values = sorted(pt["time_us"] * shift * (1 + 0.03 * rng.gauss(0, 1)) for _ in range(nsamples))
            samples += [(run_id, p, i, v, job) for i, v in enumerate(values)]
            t = statistics.median(values)
            w, s = pt["world_size"], pt["size_bytes"]
            factor = 2 * (w - 1) / w if pt.get("collective", "all_reduce") == "all_reduce" else (w - 1) / w
            row = dict.fromkeys(COLUMNS, "")
            row.update(run_id=run_id, label=(meta or {}).get("label", ""), point=p, job=job, collective="all_reduce",
                       backend="mpi", device="cpu", dtype="float32", op="sum", in_place=0, nodes=1,
                       ranks_per_node=w, count=s // 4, time_us=t, time_us_mean=statistics.fmean(values),
                       time_us_min=values[0], time_us_p95=values[int(0.95 * (nsamples - 1))],
                       time_us_p99=values[-1], time_us_max=values[-1], time_us_stdev=statistics.pstdev(values),
                       samples=nsamples, iterations=nsamples, batch=1, warmup=2, timer="native",
                       algbw_gbps=s / t / 1e3, busbw_gbps=s / t / 1e3 * factor, bus_factor=factor, wrong=0,
                       timestamp="2026-01-01T00:00:00.000+00:00")
            row.update({k: v for k, v in pt.items() if k in COLUMNS and k != "time_us"})
            rows.append(row)
    with open(path / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    with open(path / "samples.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["run_id", "point", "iteration", "time_us", "job"])
        writer.writerows(samples)
    world = max(pt["world_size"] for pt in points)
    full = {"format_version": 2, "run_id": run_id, "label": "", "status": "completed", "error": None,
            "repeat": jobs, "world_size": world, "nodes": 1, "ranks_per_node": world, "launcher": "mpirun",
            "launcher_args": [], "versions": {"commbench": "0.1.0", "python": "3.11.7",
                                               "mpi_library": "Open MPI v5.0.11"},
            "ranks": [{"hostname": "node-a", "rank": r} for r in range(world)], "environment": {},
            "rank0_environment": {"OMPI_MCA_btl": "self,vader"}, "planned_points": len(points),
            "points_measured": len(points), "skipped": [], "samples_file": "samples.csv",
            "jobs": [{"job": k, "block": 1, "points": list(range(len(points))), "hosts": ["node-a"],
                      "background_cores": 0.0, "cpu_count": 2} for k in range(1, jobs + 1)]}
    full.update(meta or {})
    (path / "run.json").write_text(json.dumps(full, indent=2))
    return path


def _cost(algorithm: str, w: int, s: int) -> float:
    """A plausible time in µs: per-step latency plus bytes over 1.5 GB/s."""
    steps = {"native": 1, "ring": 2 * (w - 1), "tree": 2 * max(1, (w - 1).bit_length()), "rhd": 2 * (w - 1).bit_length(),
             "ring_topology": 2 * (w - 1), "hierarchical": 4}[algorithm]
    return 2.0 + 3.0 * steps + s * 2 * (w - 1) / w / 1.5e3


def build_syn() -> Path:
    """3 jobs a point (so compare gives real verdicts): native, ring, tree, rhd x 2 and 4 ranks x 4 sizes."""
    points = [{"algorithm": a, "world_size": w, "ranks_per_node": w, "size_bytes": s, "count": s // 4,
               "time_us": _cost(a, w, s)}
              for a in ("native", "ring", "tree", "rhd") for w in (2, 4) for s in (8, 1024, 65536, 1048576)]
    return _write_folder(FIX / "SYN", points, jobs=3, seed=1)


def build_topo() -> Path:
    """Two emulated nodes of 2 ranks: what topo-compare compares."""
    points = [{"algorithm": a, "world_size": 4, "nodes": 2, "ranks_per_node": 2, "size_bytes": s, "count": s // 4,
               "placement": "block", "time_us": _cost(a, 4, s), "internode_bytes_expected": s,
               "internode_bytes_measured": s * 1.003}
              for a in ("native", "ring", "ring_topology", "hierarchical") for s in (1024, 1048576)]
    return _write_folder(FIX / "TOPO", points, jobs=1, seed=2, meta={"nodes": 2, "ranks_per_node": 2})


def build_base() -> Path:
    """One real small run (resumable: it has a spec); written by hand if the run fails."""
    out = FIX / "BASE"
    try:
        done = _commbench(BASE_RUN, FIX)
        if done.returncode == 0 and (out / "run.json").is_file() and (out / "results.csv").is_file():
            return out
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
    except subprocess.TimeoutExpired:
        why = "timed out"
    NOTES.append(f"BASE: the real run failed ({why[:160]}); built by hand instead")
    shutil.rmtree(out, ignore_errors=True)
    points = [{"algorithm": "native", "world_size": 2, "ranks_per_node": 2, "size_bytes": s, "count": s // 4,
               "in_place": ip, "time_us": 0.3 + s / 3e3} for ip in (0, 1) for s in (8, 1024)]
    return _write_folder(out, points, meta={"spec": dict(BASE_SPEC), "launcher_args": [], "launcher": "mpirun",
                                            "samples_file": "samples.csv"})


def build_model() -> Path:
    """A model.json from `model fit SYN` (a stand-in if the fit fails: the damaged copies stay damaged)."""
    out = FIX / "model.json"
    syn = fixture("SYN")
    done = _commbench(f"model fit {syn} -o {out}", FIX)
    if done.returncode != 0 or not out.is_file():
        NOTES.append(f"model.json: `model fit` failed ({(done.stderr.strip().splitlines() or ['?'])[-1][:160]}); "
                     "a stand-in is used")
        out.write_text(json.dumps({"format": "commbench-model", "fits": [{"group": "mpi", "alpha_us": 5.0,
                                                                           "beta_us_per_byte": 0.001}]}))
    return out


def build_suite_million() -> Path:
    """A suite of 10^6 runs, written compactly (each run an empty mapping: label run<i>)."""
    out = FIX / "million.yaml"
    out.write_text("name: million\ndefaults: {backend: mpi, nprocs: 2, sizes: [8], iters: 5}\nruns: ["
                   + "{}," * 1_000_000 + "]\n")
    return out


def build_suite_50mb() -> Path:
    out = FIX / "fifty.yaml"
    with open(out, "w") as f:
        f.write("name: fifty\ndefaults: {backend: mpi, nprocs: 2, sizes: [8], iters: 5}\nruns:\n  - label: a\n")
        line = "# " + "x" * 1000 + "\n"
        f.write(line * (50 * 2**20 // len(line)))
        f.write("description: >\n  " + "y" * 1000 + "\n")
    return out


def build_runjson_huge() -> Path:
    """A 40 MB run.json: BASE's, interrupted, with a 40 MB string in it."""
    meta = json.loads((fixture("BASE") / "run.json").read_text())
    meta["status"] = "interrupted"
    out = FIX / "huge_run.json"
    out.write_text(json.dumps(meta)[:-1] + ', "padding": "' + "x" * (40 * 2**20) + '"}')
    return out


def build_osu_huge() -> Path:
    out = FIX / "osu_huge.txt"
    head = (DATA / "osu" / "osu_allreduce_4ranks.txt").read_text()
    out.write_text(head + "4    1.00\n" * (50 * 2**20 // 10))
    return out


BUILDERS: dict[str, Callable[[], Path]] = {
    "BASE": build_base, "SYN": build_syn, "TOPO": build_topo, "model.json": build_model,
    "million.yaml": build_suite_million, "fifty.yaml": build_suite_50mb, "huge_run.json": build_runjson_huge,
    "osu_huge.txt": build_osu_huge,
}


# --- setup steps (each returns a Step: a function of the scratch folder) ----------------------------

def copy(name: str, dst: str | None = None) -> Step:
    """A copy of a fixture (BASE, SYN, TOPO, model.json, ...) or a file of tests/data ("data:osu/x.txt")."""
    def step(s: Path):
        src = DATA / name[5:] if name.startswith("data:") else fixture(name)
        target = s / (dst or src.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copyfile)(src, target)
    return step


def write(rel: str, content) -> Step:
    """A file; content is text, bytes, or a function of the scratch folder giving either. "{S}" in
    text becomes the scratch folder's path."""
    def step(s: Path):
        data = content(s) if callable(content) else content
        if isinstance(data, str):
            data = data.replace("{S}", str(s)).encode("utf-8", "surrogateescape")
        p = s / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return step


def mkdir(rel: str) -> Step:
    return lambda s: (s / rel).mkdir(parents=True, exist_ok=True)


def remove(rel: str) -> Step:
    def step(s: Path):
        p = s / rel
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    return step


def device(rel: str, major: int, minor: int) -> Step:
    """A character device node in the scratch folder (a private /dev/null: 1,3; /dev/full: 1,7), so an
    output written over a device is tested without touching the system's (needs root)."""
    return lambda s: os.mknod(s / rel, 0o666 | stat.S_IFCHR, os.makedev(major, minor))


def symlink(rel: str, target: str) -> Step:
    return lambda s: (s / rel).symlink_to(target)


def edit_json(rel: str, fn: Callable) -> Step:
    """Load rel's JSON, let fn(doc, scratch) change it in place or return a replacement, write it
    back (NaN and Infinity written as the JSON extension Python reads)."""
    def step(s: Path):
        p = s / rel
        doc = json.loads(p.read_text())
        new = fn(doc, s)
        p.write_text(json.dumps(doc if new is None else new, allow_nan=True))
    return step


def meta(**changes) -> Step:
    """Set top-level fields of R/run.json ("{S}" in strings becomes the scratch path)."""
    return edit_json("R/run.json", lambda d, s: d.update(_subst(changes, s)))


def spec(**changes) -> Step:
    """Set fields of R/run.json's spec."""
    return edit_json("R/run.json", lambda d, s: d["spec"].update(_subst(changes, s)))


def _subst(value, s: Path):
    if isinstance(value, str):
        return value.replace("{S}", str(s))
    if isinstance(value, list):
        return [_subst(v, s) for v in value]
    if isinstance(value, dict):
        return {k: _subst(v, s) for k, v in value.items()}
    return value


def edit_csv(rel: str, column: str, value: str, rows: str = "all") -> Step:
    """Set a column of a CSV file (results.csv, samples.csv) to value in all / first / last rows."""
    def step(s: Path):
        p = s / rel
        with open(p, newline="") as f:
            table = list(csv.reader(f))
        col = table[0].index(column)
        chosen = {"all": range(1, len(table)), "first": [1], "last": [len(table) - 1]}[rows]
        for i in chosen:
            table[i][col] = value
        with open(p, "w", newline="") as f:
            csv.writer(f).writerows(table)
    return step


def drop_column(rel: str, column: str) -> Step:
    def step(s: Path):
        p = s / rel
        with open(p, newline="") as f:
            table = list(csv.reader(f))
        col = table[0].index(column)
        with open(p, "w", newline="") as f:
            csv.writer(f).writerows([r[:col] + r[col + 1:] for r in table])
    return step


def keep_lines(rel: str, n: int) -> Step:
    """Keep the first n lines of a file (n=1: the header only; n=0: empty)."""
    def step(s: Path):
        p = s / rel
        lines = p.read_bytes().splitlines(keepends=True)
        p.write_bytes(b"".join(lines[:n]))
    return step


def truncate(rel: str, fraction: float = 0.5, keep: int | None = None) -> Step:
    def step(s: Path):
        p = s / rel
        data = p.read_bytes()
        p.write_bytes(data[:keep if keep is not None else int(len(data) * fraction)])
    return step


def append(rel: str, data: bytes) -> Step:
    def step(s: Path):
        with open(s / rel, "ab") as f:
            f.write(data)
    return step


def resumable(dst: str = "R") -> tuple[Step, ...]:
    """A copy of BASE cut short: its last row gone, run.json "interrupted" (a resume would launch)."""
    def cut(s: Path):
        p = s / dst / "results.csv"
        lines = p.read_bytes().splitlines(keepends=True)
        p.write_bytes(b"".join(lines[:-1]))
    return (copy("BASE", dst), cut,
            edit_json(f"{dst}/run.json", lambda d, s: d.update(status="interrupted", end_time=None)))


EVIL_SCRIPT = "#!/bin/sh\necho \"$0 $*\" >> '{S}/PWNED'\nexit 1\n"
SITECUSTOMIZE = "open('{S}/PWNED', 'a').write('sitecustomize imported\\n')\n"


def evil() -> tuple[Step, ...]:
    """A script and a sitecustomize.py that write {S}/PWNED when run: what a crafted folder points to."""
    def step(s: Path):
        write("evil.sh", EVIL_SCRIPT)(s)
        os.chmod(s / "evil.sh", 0o755)
        write("evilpy/sitecustomize.py", SITECUSTOMIZE)(s)
        write("evilprefix/bin/prted", EVIL_SCRIPT)(s)
        os.chmod(s / "evilprefix/bin/prted", 0o755)
    return (step,)


def suite(rel: str, text: str) -> Step:
    return write(rel, text)


TINY_SUITE = ("name: tiny\ndefaults: {backend: mpi, nprocs: 2, collective: all_reduce, sizes: [8], iters: 5, "
              "warmup: 1, mode: in-place}\nruns:\n  - label: r1\n")


def sweep_folder(dst: str = "S", damage: tuple[Step, ...] = ()) -> tuple[Step, ...]:
    """A sweep of TINY_SUITE cut short: S/suite.yaml and S/r1, a copy of BASE (interrupted), then damage."""
    return (suite("tiny.yaml", TINY_SUITE), suite(f"{dst}/suite.yaml", TINY_SUITE), *resumable(f"{dst}/r1"), *damage)


# --- extra checks ---------------------------------------------------------------------------------

def no_marker(s: Path, out: "Outcome") -> list[str]:
    p = s / "PWNED"
    if p.exists():
        return [f"ran a program named by the folder: PWNED says {p.read_text(errors='replace').strip()[:100]!r}"]
    return []


def status_matches(folder: str = "X") -> Check:
    """run.json's status after a signal: completed when every planned point has a row (or was
    skipped), interrupted when one has none; never running."""
    def check(s: Path, out: "Outcome") -> list[str]:
        d = s / folder
        if not (d / "run.json").exists():
            return [f"{folder}/results.csv exists but no run.json"] if (d / "results.csv").exists() else []
        try:
            m = json.loads((d / "run.json").read_text())
        except ValueError as exc:
            return [f"{folder}/run.json is not JSON after the signal ({exc})"]
        rows = count_rows(d / "results.csv")
        planned = m.get("planned_points")
        done = planned is not None and rows + len(m.get("skipped") or []) >= planned
        status = m.get("status")
        if status == "running":
            return [f"run.json says running after exit ({rows} rows of {planned})"]
        if done and status != "completed":
            return [f"every point has a row ({rows} of {planned}) but run.json says {status!r}"]
        if not done and status != "interrupted":
            return [f"{rows} rows of {planned} planned but run.json says {status!r}"]
        return []
    return check


def still_device(rel: str) -> Check:
    def check(s: Path, out: "Outcome") -> list[str]:
        p = s / rel
        if not (p.exists() and stat.S_ISCHR(p.lstat().st_mode)):
            return [f"replaced the character device {rel} ({'a ' + _kind(p) if p.exists() else 'gone'})"]
        return []
    return check


def _kind(p: Path) -> str:
    return "folder" if p.is_dir() else "regular file" if p.is_file() else "special file"


def not_running(folder: str) -> Check:
    def check(s: Path, out: "Outcome") -> list[str]:
        p = s / folder / "run.json"
        try:
            status = json.loads(p.read_text()).get("status") if p.exists() else None
        except ValueError:
            return [f"{folder}/run.json is not JSON"]
        return [f"{folder}/run.json left {status!r}"] if status == "running" else []
    return check


def count_rows(path: Path) -> int:
    """Complete rows of a results.csv (a half-written last line does not count)."""
    if not path.is_file():
        return 0
    with open(path, newline="", errors="replace") as f:
        table = list(csv.reader(f))
    return sum(len(r) == len(table[0]) for r in table[1:]) if table else 0


_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_MD_ACTIVE = re.compile(r"\]\(|!\[|<[A-Za-z/!?]")


def _escaped(text: str, i: int) -> bool:
    """Is text[i] backslash-escaped (an odd number of backslashes before it)?"""
    n = 0
    while i - n - 1 >= 0 and text[i - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def markdown_safe(s: Path, out: "Outcome") -> list[str]:
    """No link, image or raw HTML can start outside code spans (commbench's own markdown has none):
    a `](`, `![` or `<tag` whose first character is not backslash-escaped."""
    if out.rc not in (0, 1):
        return []
    text = _CODE_SPAN.sub("", out.stdout.decode("utf-8", "replace"))
    for found in _MD_ACTIVE.finditer(text):
        if not _escaped(text, found.start()):
            return [f"markdown has an unescaped {found.group()!r}: "
                    f"...{text[max(0, found.start() - 30):found.end() + 30]!r}"]
    return []


def strict_json(s: Path, out: "Outcome") -> list[str]:
    if out.rc not in (0, 1):
        return []

    def bad(token):
        raise ValueError(f"bare {token}")
    try:
        json.loads(out.stdout.decode("utf-8"), parse_constant=bad)
    except ValueError as exc:
        return [f"--format json is not strict JSON ({str(exc)[:100]})"]
    return []


def json_lines(s: Path, out: "Outcome") -> list[str]:
    """--json rows: every stdout line one strict JSON object."""
    def bad(token):
        raise ValueError(f"bare {token}")
    for line in out.stdout.decode("utf-8", "replace").splitlines():
        if line.strip():
            try:
                json.loads(line, parse_constant=bad)
            except ValueError as exc:
                return [f"--json line is not strict JSON ({str(exc)[:80]}): {line[:80]!r}"]
    return []


def junit_xml(s: Path, out: "Outcome") -> list[str]:
    if out.rc not in (0, 1):
        return []
    try:
        ET.fromstring(out.stdout)
    except ET.ParseError as exc:
        return [f"--format junit is not well-formed XML ({exc})"]
    return []


def file_lacks(rel: str, *needles: str) -> Check:
    """An output file (an HTML page) does not hold the crafted markup verbatim."""
    def check(s: Path, out: "Outcome") -> list[str]:
        p = s / rel
        if not p.is_file():
            return []
        text = p.read_text(errors="replace")
        return [f"{rel} holds {n!r} verbatim" for n in needles if n in text]
    return check


# --- the inputs -----------------------------------------------------------------------------------

ANSI = "\x1b[31mEVIL-RED\x1b[0m"
OSC8 = "\x1b]8;;http://evil.example/\x07EVIL-LINK\x1b]8;;\x07"
OSC52 = "\x1b]52;c;ZXZpbA==\x07"
BIDI = "\u202eLIVE-EVIL"
MDLINK = "[EVIL](http://evil.example/)"
MDIMG = "![EVIL](http://evil.example/x.png)"
HTML = "<img src=x onerror=alert(1)>"
SCRIPT = "</script><script>alert(1)</script>"
ALL = f"{ANSI} {OSC8} {OSC52} {BIDI} {MDLINK} {MDIMG} {HTML} {SCRIPT}"

PREDICT = "model predict --nodes 2 --ranks-per-node 2 --intra 450,2 --inter 50,5 -b 8 -e 1M"
RUN_SMALL = "run -n 2 --backend mpi -c all_reduce --sizes 8 --iters 5 --warmup 1 --in-place"
# class 7: the run (ends early: every signal lands before its 16M and 64M points finish)
RUN7 = "run -n 2 --backend mpi -c all_reduce --sizes 8,16M,64M --iters 100 --out X"
# ... and a lighter one that is let run to its last point (3 points, a few seconds)
RUN7_SHORT = "run -n 2 --backend mpi -c all_reduce --sizes 8,64K,1M --iters 50 --in-place --out X"
OSU = "data:osu/osu_allreduce_4ranks.txt"
NCCL_TXT = "data:nccl_tests_all_reduce_16xH100.txt"
NCCL_JSON = "data:nccl_tests_all_gather.json"


def _nccl_json_set(path: tuple, value):
    """Edit the first result of the nccl-tests JSON report (path into results[0])."""
    def fn(doc, s):
        node = doc["results"][0]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return edit_json("nccl.json", fn)


def _osu_with(line: str) -> Step:
    """The OSU all-reduce output with its first data line replaced."""
    def content(s: Path):
        lines = (DATA / "osu" / "osu_allreduce_4ranks.txt").read_text().splitlines(keepends=True)
        first = next(i for i, x in enumerate(lines) if x[:1].isdigit())
        lines[first] = line + "\n"
        return "".join(lines)
    return write("osu.txt", content)


def _nccl_text_with(old: str, new: str, count: int = 1) -> Step:
    return write("nccl.txt", lambda s: (DATA / "nccl_tests_all_reduce_16xH100.txt").read_text().replace(old, new, count))


NCCL_ROW8 = "           8             2     float     sum      -1    135.8    0.00    0.00      0    123.5    0.00    0.00      0"


def _nccl_row8(time_oop: str = "135.8", busbw: str = "0.00", size: str = "8", wrong: str = "0") -> Step:
    row = (f"{size:>12} {'2':>13} {'float':>9} {'sum':>7} {'-1':>7} {time_oop:>8} {'0.00':>7} {busbw:>7} "
           f"{wrong:>6} {'123.5':>8} {'0.00':>7} {'0.00':>7} {'0':>6}")
    return _nccl_text_with(NCCL_ROW8, row)


def _evil_context(value: str) -> tuple[Step, ...]:
    """B: SYN with the crafted string in every fact compare shows (versions, hosts, environment,
    launcher arguments, label)."""
    def fn(d, s):
        d["versions"]["mpi_library"] = value
        d["label"] = value
        d["launcher_args"] = [value]
        d["ranks"] = [{"hostname": value, "rank": 0}, {"hostname": value + "2", "rank": 1}]
        d["rank0_environment"] = {"OMPI_MCA_evil": value, "NCCL_EVIL": value}
        for job in d.get("jobs", []):
            job["hosts"] = [value]
    return copy("SYN", "B"), edit_json("B/run.json", fn), edit_csv("B/results.csv", "label", value)


def _hosts(value: str) -> tuple[Step, ...]:
    def fn(d, s):
        d["ranks"] = [{"hostname": value, "rank": 0}]
        for job in d.get("jobs", []):
            job["hosts"] = [value]
    return copy("SYN", "B"), edit_json("B/run.json", fn)


def class1() -> list[Input]:
    """A result folder given to --resume must not run anything it names, nor pass a tampered spec."""
    R = "run --resume R"
    mk = lambda name, *steps, expect=(2,), note="", argv=R, outputs=(): I(
        1, name, argv, *resumable(), *evil(), *steps, expect=expect, checks=(no_marker,), note=note,
        outputs=outputs)
    return [
        mk("resume-control-clean", expect=(0,), outputs=("R",),
           note="control: an interrupted folder with no launcher arguments resumes"),
        mk("launcher-args-mpmd-evil-rank", meta(launcher_args=["--oversubscribe", "{S}/evil.sh", ":", "-n", "1"])),
        mk("launcher-args-plm-rsh-agent", meta(launcher_args=["--mca", "plm_rsh_agent", "{S}/evil.sh",
                                                             "--host", "evilhost:2"])),
        mk("launcher-args-launch-agent", meta(launcher_args=["--launch-agent", "{S}/evil.sh", "--host", "evilhost:2"])),
        mk("launcher-args-x-pythonpath", meta(launcher_args=["-x", "PYTHONPATH={S}/evilpy"])),
        mk("launcher-args-mca-env", meta(launcher_args=["--mca", "mca_base_env_list", "PYTHONPATH={S}/evilpy"])),
        mk("launcher-args-benign-recorded", meta(launcher_args=["--bind-to", "none"]),
           note="recorded arguments are shown and must be confirmed with --launcher-args: 2 until given again"),
        mk("launcher-args-confirmed", meta(launcher_args=["--bind-to", "none"]), expect=(0,), outputs=("R",),
           argv="run --resume R --launcher-args '--bind-to none'",
           note="control: the same arguments given on the command line resume"),
        mk("launcher-args-string", meta(launcher_args="--oversubscribe {S}/evil.sh : -n 1")),
        mk("launcher-args-numbers", meta(launcher_args=[1, 2.5, None, {"x": 1}])),
        mk("launcher-args-null", meta(launcher_args=None), expect=(0, 2), outputs=("R",),
           note="null may read as no arguments (0) or as a damaged record (2)"),
        mk("spec-launcher-torchrun-no-python", spec(launcher="torchrun", backends=["gloo"]),
           meta(launcher_args=["--no-python", "{S}/evil.sh"])),
        mk("spec-launcher-shell", spec(launcher="/bin/sh")),
        mk("recorded-launch-argv-ignored", meta(launch_argv=["/bin/sh", "-c", "echo >> {S}/PWNED"]),
           expect=(0, 2), outputs=("R",), note="launch_argv is a record, not an input: resuming is fine, running it is not"),
        mk("recorded-environment-ignored", meta(environment={"PYTHONPATH": "{S}/evilpy", "LD_PRELOAD": "{S}/evil.so"},
                                                rank0_environment={"PYTHONPATH": "{S}/evilpy"}),
           expect=(0, 2), outputs=("R",), note="the recorded environment is a record, never applied"),
        mk("spec-nprocs-string", spec(nprocs="2; touch PWNED")),
        mk("spec-nprocs-float", spec(nprocs=2.5)),
        mk("spec-nprocs-huge", spec(nprocs=10**9)),
        mk("spec-sizes-strings", spec(sizes=["8", "$(touch PWNED)"])),
        mk("spec-sizes-negative", spec(sizes=[-8, 1024])),
        mk("spec-backends-string", spec(backends="mpi")),
        mk("spec-iters-huge", spec(iters=10**18)),
        mk("spec-min-time-nan", spec(iters=None, min_time=float("nan"))),
        mk("spec-done-points-text", spec(done_points="all")),
        mk("spec-unknown-field", spec(evil_field="{S}/evil.sh"), expect=(0, 2), outputs=("R",),
           note="an unknown field may be refused (2) or ignored (0); either way never used"),
        mk("spec-missing", edit_json("R/run.json", lambda d, s: d.pop("spec"))),
        mk("spec-is-list", edit_json("R/run.json", lambda d, s: d.update(spec=[1, 2, 3]))),
        mk("spec-out-dir-elsewhere", spec(out_dir="{S}/elsewhere"), expect=(0, 2), outputs=("R",),
           note="the folder given is where rows go, whatever the record says: nothing under elsewhere/"),
        mk("format-version-future", meta(format_version=99)),
        mk("run-json-list", write("R/run.json", "[1, 2, 3]")),
        mk("run-json-huge-40mb", copy("huge_run.json", "R/run.json"),
           note="a valid record padded to 40 MB: refused by size (2), bounded"),
        mk("run-json-nested-100k", write("R/run.json", "[" * 100_000 + "]" * 100_000)),
        I(1, "sweep-resume-crafted-run-json", "sweep tiny.yaml --out S --resume",
          *sweep_folder(damage=evil() + (edit_json("S/r1/run.json", lambda d, s: d.update(
              launcher_args=["-x", f"PYTHONPATH={s}/evilpy"])),)),
          expect=(0, 2), outputs=("S",), checks=(no_marker,),
          note="the suite's own launcher arguments apply (0), or the recorded ones must be confirmed (2)"),
    ]


def class2() -> list[Input]:
    """Broken numbers reach the gate, the report, the model and the importers: all exit 2."""
    out: list[Input] = []
    for bad in ("nan", "inf", "0", "-5", "abc", ""):
        tag = bad or "empty"
        out.append(I(2, f"compare-cand-time-{tag}", "compare SYN C", copy("SYN"), copy("SYN", "C"),
                     edit_csv("C/results.csv", "time_us", bad), edit_csv("C/samples.csv", "time_us", bad)))
    out += [
        I(2, "compare-cand-samples-only-nan", "compare SYN C", copy("SYN"), copy("SYN", "C"),
          edit_csv("C/samples.csv", "time_us", "nan")),
        I(2, "compare-cand-results-only-negative", "compare SYN C", copy("SYN"), copy("SYN", "C"),
          edit_csv("C/results.csv", "time_us", "-5"), note="the rows are validated even where samples are used"),
        I(2, "compare-baseline-time-zero", "compare B SYN", copy("SYN"), copy("SYN", "B"),
          edit_csv("B/results.csv", "time_us", "0"), edit_csv("B/samples.csv", "time_us", "0")),
        I(2, "compare-one-sample-nan", "compare SYN C", copy("SYN"), copy("SYN", "C"),
          edit_csv("C/samples.csv", "time_us", "nan", rows="last")),
        I(2, "compare-json-cand-nan", "compare SYN C --format json", copy("SYN"), copy("SYN", "C"),
          edit_csv("C/results.csv", "time_us", "nan"), edit_csv("C/samples.csv", "time_us", "nan"),
          checks=(strict_json,)),
        I(2, "compare-json-baseline-zero", "compare B SYN --format json", copy("SYN"), copy("SYN", "B"),
          edit_csv("B/results.csv", "time_us", "0"), edit_csv("B/samples.csv", "time_us", "0"), checks=(strict_json,)),
        I(2, "compare-junit-cand-negative", "compare SYN C --format junit", copy("SYN"), copy("SYN", "C"),
          edit_csv("C/results.csv", "time_us", "-1"), edit_csv("C/samples.csv", "time_us", "-1")),
        I(2, "compare-wrong-negative", "compare SYN C", copy("SYN"), copy("SYN", "C"),
          edit_csv("C/results.csv", "wrong", "-1")),
        I(2, "compare-job-zero", "compare SYN C", copy("SYN"), copy("SYN", "C"),
          edit_csv("C/results.csv", "job", "0"), edit_csv("C/samples.csv", "job", "0")),
        I(2, "report-time-nan", "report C -o r.html", copy("SYN", "C"), edit_csv("C/results.csv", "time_us", "nan")),
        I(2, "report-time-text", "report C -o r.html", copy("SYN", "C"), edit_csv("C/results.csv", "time_us", "fast")),
        I(2, "model-fit-time-nan", "model fit C -o m.json", copy("SYN", "C"), edit_csv("C/results.csv", "time_us", "nan")),
        I(2, "model-fit-time-negative", "model fit C -o m.json", copy("SYN", "C"),
          edit_csv("C/results.csv", "time_us", "-7")),
        I(2, "model-validate-time-inf", "model validate C", copy("SYN", "C"), edit_csv("C/results.csv", "time_us", "inf")),
        I(2, "topo-compare-time-nan", "topo-compare C", copy("TOPO", "C"), edit_csv("C/results.csv", "time_us", "nan")),
        I(2, "model-predict-model-nan", f"{PREDICT} --model m.json", copy("model.json", "m.json"),
          edit_json("m.json", lambda d, s: _all_numbers(d, float("nan")))),
        I(2, "import-osu-time-nan", "import osu osu.txt -n 4 --out O", _osu_with("8      nan")),
        I(2, "import-osu-time-zero", "import osu osu.txt -n 4 --out O", _osu_with("8      0.00")),
        I(2, "import-osu-time-negative", "import osu osu.txt -n 4 --out O", _osu_with("8      -13.37")),
        I(2, "import-nccl-text-time-nan", "import nccl-tests nccl.txt --out O", _nccl_row8(time_oop="nan")),
        I(2, "import-nccl-text-time-zero", "import nccl-tests nccl.txt --out O", _nccl_row8(time_oop="0")),
        I(2, "import-nccl-text-time-negative", "import nccl-tests nccl.txt --out O", _nccl_row8(time_oop="-135.8")),
        I(2, "import-nccl-json-time-nan", "import nccl-tests nccl.json --out O", copy(NCCL_JSON, "nccl.json"),
          _nccl_json_set(("out_of_place", "time"), float("nan"))),
        I(2, "import-nccl-json-time-negative", "import nccl-tests nccl.json --out O", copy(NCCL_JSON, "nccl.json"),
          _nccl_json_set(("in_place", "time"), -10.2)),
        I(2, "import-nccl-json-sample-infinity", "import nccl-tests nccl.json --out O", copy(NCCL_JSON, "nccl.json"),
          _nccl_json_set(("out_of_place_per_iter", "times_us"), [10.5, float("inf"), 10.3])),
        I(2, "import-nccl-json-size-text", "import nccl-tests nccl.json --out O", copy(NCCL_JSON, "nccl.json"),
          _nccl_json_set(("size",), "1K; rm -rf /")),
    ]
    return out


def _all_numbers(doc, value):
    """Every float in a JSON document replaced by value (a model file with NaN or negative parameters)."""
    if isinstance(doc, dict):
        return {k: _all_numbers(v, value) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_all_numbers(v, value) for v in doc]
    return value if isinstance(doc, float) else doc


def class3() -> list[Input]:
    """Anything that went wrong that is not a regression: 2 (bad input) or 3 (a bug), never 1."""
    return [
        I(3, "compare-o-proc", "compare SYN SYN -o /proc/nope.txt", copy("SYN")),
        I(3, "compare-missing-candidate", "compare SYN nope", copy("SYN")),
        I(3, "compare-file-as-folder", "compare SYN file.txt", copy("SYN"), write("file.txt", "hello\n")),
        I(3, "compare-empty-folder", "compare SYN empty", copy("SYN"), mkdir("empty")),
        I(3, "compare-threshold-nan", "compare SYN SYN --threshold nan", copy("SYN")),
        I(3, "compare-threshold-negative", "compare SYN SYN --threshold -5%", copy("SYN")),
        I(3, "compare-format-unknown", "compare SYN SYN --format xml", copy("SYN")),
        I(3, "compare-no-common-points", "compare SYN TOPO", copy("SYN"), copy("TOPO"), expect=(0, 2),
          note="nothing in common: no regression (0) or unusable (2); never 1"),
        I(3, "report-missing", "report nope -o r.html"),
        I(3, "model-fit-native-only", "model fit BASE -o m.json", copy("BASE"),
          note="no points the model fits: unusable data"),
        I(3, "model-validate-native-only", "model validate BASE", copy("BASE"),
          note="debatable: nothing it can validate; 2 (unusable data) as `model fit` on the same folder"),
        I(3, "model-predict-no-shape", "model predict --intra 450,2 --inter 50,5"),
        I(3, "model-predict-model-binary", "model predict --nodes 2 --ranks-per-node 2 --model m.json",
          write("m.json", bytes(range(256)) * 8)),
        I(3, "model-predict-model-truncated", "model predict --nodes 2 --ranks-per-node 2 --model m.json",
          copy("model.json", "m.json"), truncate("m.json", 0.5)),
        I(3, "topo-compare-single-node", "topo-compare BASE", copy("BASE")),
        I(3, "import-nccl-dev-null", "import nccl-tests /dev/null --out O"),
        I(3, "import-osu-binary", "import osu b.txt -n 4 --out O", write("b.txt", os.urandom(4096))),
        I(3, "unknown-command", "frobnicate"),
    ]


def class4() -> list[Input]:
    """Every writer, pointed at a place it cannot write: exit 2, and its own inputs untouched."""
    long_name = "x" * 300
    return [
        I(4, "run-out-proc", "run -n 2 --backend mpi --sizes 8 --out /proc/nope"),
        I(4, "run-out-existing-run", "run -n 2 --backend mpi --sizes 8 --out BASE", copy("BASE")),
        I(4, "run-out-name-too-long", f"run -n 2 --backend mpi --sizes 8 --out {long_name}"),
        I(4, "sweep-out-proc", "sweep tiny.yaml --out /proc/nope", suite("tiny.yaml", TINY_SUITE)),
        I(4, "import-osu-out-proc", "import osu osu.txt -n 4 --out /proc/nope", copy(OSU, "osu.txt")),
        I(4, "import-osu-out-existing-run", "import osu osu.txt -n 4 --out BASE", copy(OSU, "osu.txt"), copy("BASE")),
        I(4, "import-osu-out-missing-parents", "import osu osu.txt -n 4 --out missing/deep/O", copy(OSU, "osu.txt"),
          expect=(0,), outputs=("missing",), note="valid: a new results folder, parents created"),
        I(4, "predict-out-proc", f"{PREDICT} --out /proc/nope"),
        I(4, "predict-out-existing-run", f"{PREDICT} --out BASE", copy("BASE")),
        I(4, "report-o-proc", "report SYN -o /proc/nope.html", copy("SYN")),
        I(4, "report-o-full-device", "report SYN -o full", copy("SYN"), device("full", 1, 7),
          checks=(still_device("full"),), note="a private /dev/full: ENOSPC on write; the node must stay"),
        I(4, "report-o-own-results-csv", "report SYN -o SYN/results.csv", copy("SYN")),
        I(4, "report-o-directory", "report SYN -o d", copy("SYN"), mkdir("d")),
        I(4, "report-o-missing-folder", "report SYN -o missing/r.html", copy("SYN"), expect=(0, 2),
          outputs=("missing",), note="create the folder (0) or refuse (2)"),
        I(4, "compare-o-directory", "compare SYN SYN -o d", copy("SYN"), mkdir("d")),
        I(4, "compare-o-own-results-csv", "compare SYN SYN -o SYN/results.csv", copy("SYN")),
        I(4, "compare-o-null-device", "compare SYN SYN -o null", copy("SYN"), device("null", 1, 3), expect=(0,),
          checks=(still_device("null"),), note="valid: a private /dev/null takes anything, and stays a device"),
        I(4, "model-fit-o-proc", "model fit SYN -o /proc/nope.json", copy("SYN")),
        I(4, "model-fit-o-own-results-csv", "model fit SYN -o SYN/results.csv", copy("SYN")),
        I(4, "model-fit-o-full-device", "model fit SYN -o full", copy("SYN"), device("full", 1, 7),
          checks=(still_device("full"),)),
        I(4, "model-validate-csv-proc", "model validate SYN --csv /proc/nope.csv", copy("SYN")),
        I(4, "model-validate-csv-own-results", "model validate SYN --csv SYN/results.csv", copy("SYN")),
        I(4, "topo-compare-csv-proc", "topo-compare TOPO --csv /proc/nope.csv", copy("TOPO")),
        I(4, "topo-compare-csv-own-results", "topo-compare TOPO --csv TOPO/results.csv", copy("TOPO")),
    ]


def class5() -> list[Input]:
    """Damaged folders given to --resume: exit 2 with the folder exactly as it was (no repair first)."""
    R = "run --resume R"
    mk = lambda name, *steps, expect=(2,), outputs=(), note="": I(5, name, R, *resumable(), *steps, expect=expect,
                                                                 outputs=outputs, note=note)
    return [
        I(5, "resume-file-not-folder", R, write("R", "not a folder\n")),
        I(5, "resume-missing-folder", R),
        I(5, "resume-empty-folder", R, mkdir("R")),
        mk("run-json-missing", remove("R/run.json")),
        mk("run-json-empty", write("R/run.json", "")),
        mk("run-json-truncated", truncate("R/run.json", 0.5)),
        mk("run-json-directory", remove("R/run.json"), mkdir("R/run.json")),
        mk("results-point-nan", edit_csv("R/results.csv", "point", "nan", rows="last")),
        mk("results-point-text", edit_csv("R/results.csv", "point", "two", rows="first")),
        mk("results-point-out-of-plan", edit_csv("R/results.csv", "point", "999", rows="last")),
        mk("results-time-nan", edit_csv("R/results.csv", "time_us", "nan", rows="first")),
        mk("results-missing-point-column", drop_column("R/results.csv", "point")),
        mk("results-binary", write("R/results.csv", os.urandom(4096))),
        mk("results-binary-no-newline", write("R/results.csv", b"\x00\xff" * 500),
           note="a partial-line repair must not truncate a file it has not validated"),
        mk("results-empty", write("R/results.csv", ""), expect=(0, 2), outputs=("R",),
           note="what a crash leaves between the first samples and the header (samples are written first): "
                "resumable (0), its orphan samples dropped"),
        mk("results-header-only", keep_lines("R/results.csv", 1), expect=(0, 2), outputs=("R",),
           note="a header and no rows is a run cut short before its first point: resumable (0) or refused (2)"),
        mk("results-directory", remove("R/results.csv"), mkdir("R/results.csv")),
        mk("results-symlink-outside", write("victim.txt", "victim, no trailing newline"), remove("R/results.csv"),
           symlink("R/results.csv", "../victim.txt"), note="victim.txt, outside R, must stay as it was"),
        mk("results-other-run-id", edit_csv("R/results.csv", "run_id", "someone-else", rows="first"),
           note="debatable: a row of another run in the folder; 2 (a folder is one run)"),
        mk("samples-parquet-garbage", write("R/samples.parquet", os.urandom(1024)), expect=(0, 2), outputs=("R",),
           note="debatable: resume may not read the samples (0 appends), or refuse a damaged folder (2)"),
        mk("results-half-line-repairable", append("R/results.csv", b"20261123T000000Z-abcdef,,3,1,all_red"),
           expect=(0,), outputs=("R",), note="valid: a half-written last line is repaired, then resumed"),
        I(5, "sweep-resume-run-json-truncated", "sweep tiny.yaml --out S --resume",
          *sweep_folder(damage=(truncate("S/r1/run.json", 0.5),))),
        I(5, "sweep-resume-run-is-file", "sweep tiny.yaml --out S --resume",
          *sweep_folder(damage=(remove("S/r1"), write("S/r1", "a file\n")))),
        I(5, "sweep-resume-results-binary", "sweep tiny.yaml --out S --resume",
          *sweep_folder(damage=(write("S/r1/results.csv", os.urandom(2048)),))),
        I(5, "sweep-resume-out-is-file", "sweep tiny.yaml --out S --resume", suite("tiny.yaml", TINY_SUITE),
          write("S", "a file\n")),
    ]


def _alias_bomb() -> str:
    """The billion-laughs document (~430 bytes) inside a suite's description."""
    lines = ["name: bomb", "description:", '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, cur in zip("abcdefgh", "bcdefghi"):
        lines.append(f"  {cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    lines += ["defaults: {backend: mpi, nprocs: 2, sizes: [8]}", "runs: [{label: a}]"]
    return "\n".join(lines) + "\n"


def class6() -> list[Input]:
    """Work bounded before any error: each refused in <= 5 s and <= 200 MB."""
    sizes_10k = ",".join(str(8 * (i + 1)) for i in range(10_000))
    return [
        I(6, "yaml-alias-bomb-description", "sweep bomb.yaml --out S", write("bomb.yaml", _alias_bomb())),
        I(6, "yaml-alias-bomb-defaults", "sweep bomb.yaml --out S",
          write("bomb.yaml", _alias_bomb().replace("description:", "defaults:").replace(
              "defaults: {backend: mpi, nprocs: 2, sizes: [8]}\n", ""))),
        I(6, "yaml-merge-key-alias", "sweep m.yaml --out S",
          write("m.yaml", "name: m\nbase: &b {backend: mpi}\nruns:\n  - <<: *b\n    label: a\n"),
          note="aliases refused (and an unknown top-level field)"),
        I(6, "suite-million-runs", "sweep million.yaml --out S", copy("million.yaml")),
        I(6, "suite-50mb", "sweep fifty.yaml --out S", copy("fifty.yaml")),
        I(6, "yaml-nested-100k-lists", "sweep deep.yaml --out S",
          write("deep.yaml", "name: deep\ndescription: " + "[" * 100_000 + "]" * 100_000 + "\nruns: [{label: a}]\n")),
        I(6, "yaml-nested-20k-mappings", "sweep deep.yaml --out S",
          write("deep.yaml", "name: deep\ndefaults: " + "{a: " * 20_000 + "1" + "}" * 20_000 + "\nruns: [{label: a}]\n")),
        I(6, "suite-100k-sizes", "sweep s.yaml --out S",
          write("s.yaml", "name: s\ndefaults: {backend: mpi, nprocs: 2}\nruns:\n  - label: a\n    sizes: ["
                + ",".join(str(i + 1) for i in range(100_000)) + "]\n")),
        I(6, "suite-repeat-1e9", "sweep s.yaml --out S",
          write("s.yaml", "name: s\ndefaults: {backend: mpi, nprocs: 2, sizes: [8], repeat: 1000000000}\n"
                          "runs: [{label: a}]\n")),
        I(6, "run-n-10000", "run -n 10000 --backend mpi --sizes 8 --out R",
          note="more ranks than cores beyond a factor needs --oversubscribe"),
        I(6, "run-n-64-on-2-cores", "run -n 64 --backend mpi --sizes 8 --out R",
          note="32 ranks per core: beyond any oversubscription factor"),
        I(6, "predict-1e8-nodes-1e6-ranks", "model predict --nodes 100000000 --ranks-per-node 1000000 "
                                            "--intra 450,2 --inter 50,5"),
        I(6, "predict-1e8-sizes", "model predict --nodes 2 --ranks-per-node 2 --intra 450,2 --inter 50,5 "
                                  "-b 8 -e 8G -f 1.0000001"),
        I(6, "run-10000-sizes", ["run", "-n", "2", "--backend", "mpi", "-c", "all_reduce", "--in-place", "--iters", "1",
                                 "--warmup", "0", "--sizes", sizes_10k, "--out", "R"],
          expect=(0, 2, 130), outputs=("R",), sig=Sig(signal.SIGINT, after_s=20.0, group=True),
          checks=(not_running("R"),), note="a limit on sizes per run refuses it (2); if accepted it must run "
                                          "(the spec by file, not argv): done (0), or Ctrl-C at 20 s (130)"),
        I(6, "run-label-100kb", [*shlex.split(RUN_SMALL), "--label", "L" * 100_000, "--out", "R"], expect=(0, 2),
          outputs=("R",), checks=(not_running("R"),), note="runs (the spec by file, not argv) or a label limit (2)"),
        I(6, "import-osu-50mb", "import osu osu.txt -n 4 --out O", copy("osu_huge.txt", "osu.txt")),
        I(6, "import-nccl-json-1e6-samples", "import nccl-tests nccl.json --out O", copy(NCCL_JSON, "nccl.json"),
          _nccl_json_set(("out_of_place_per_iter", "times_us"), [10.5] * 1_000_000)),
    ]


def class7() -> list[Input]:
    """Signals at different moments of a small real run: one line, 128 + N, run.json's status true."""
    st = (status_matches("X"),)
    return [
        I(7, "sigint-at-startup", RUN7, expect=(130,), outputs=("X",), checks=st,
          sig=Sig(signal.SIGINT, after_s=0.15, group=True), note="during Python's imports"),
        I(7, "sigint-while-launching", RUN7, expect=(130,), outputs=("X",), checks=st,
          sig=Sig(signal.SIGINT, after_s=2.5, group=True)),
        I(7, "sigint-after-first-row", RUN7, expect=(130,), outputs=("X",), checks=st,
          sig=Sig(signal.SIGINT, rows=1, group=True)),
        I(7, "sigint-twice-after-first-row", RUN7, expect=(130,), outputs=("X",), checks=st,
          sig=Sig(signal.SIGINT, rows=1, group=True, twice=True)),
        I(7, "sigterm-while-launching", RUN7, expect=(143,), outputs=("X",), checks=st,
          sig=Sig(signal.SIGTERM, after_s=2.5)),
        I(7, "sigterm-after-first-row", RUN7, expect=(143,), outputs=("X",), checks=st,
          sig=Sig(signal.SIGTERM, rows=1)),
        I(7, "sighup-after-second-row", RUN7, expect=(129,), outputs=("X",), checks=st,
          sig=Sig(signal.SIGHUP, rows=2)),
        I(7, "sigint-after-last-row", RUN7_SHORT, expect=(0, 130), outputs=("X",), checks=st,
          sig=Sig(signal.SIGINT, rows=3, group=True), note="0 if it ended first; status must be completed"),
        I(7, "sigterm-after-last-row-plus-0.3s", RUN7_SHORT, expect=(0, 143), outputs=("X",), checks=st,
          sig=Sig(signal.SIGTERM, rows=3, after_s=0.3), note="during the final load and summary"),
        I(7, "json-stdout-closed-after-one-line", f"{RUN7} --json", expect=(141,), outputs=("X",), head=1,
          checks=st + (json_lines,), note="`run --json | head -1`"),
        I(7, "sweep-sigint-after-first-row", "sweep s7.yaml --out S",
          write("s7.yaml", "name: s7\ndefaults: {backend: mpi, nprocs: 2, collective: all_reduce, "
                           "sizes: [8, 16M, 64M], iters: 100}\nruns:\n  - label: r1\n  - label: r2\n"),
          expect=(130,), outputs=("S",), sig=Sig(signal.SIGINT, rows=1, csv="S/r1/results.csv", group=True), checks=(status_matches("S/r1"),)),
        I(7, "report-sigint-midway", "report SYN -o r.html", copy("SYN"), expect=(0, 130), outputs=("r.html",),
          sig=Sig(signal.SIGINT, after_s=1.0, group=True),
          note="timing: lands while the report is built on an idle machine; 0 if it was written first"),
        I(7, "compare-stdout-closed", "compare SYN SYN", copy("SYN"), expect=(0, 141), head=1,
          note="`compare | head -1`: 0 if the whole verdict fit the pipe first"),
    ]


def class8() -> list[Input]:
    """Crafted strings from files and options: escaped for terminals, markdown, JSON, XML and HTML."""
    md, js = (markdown_safe,), (strict_json,)
    evil_dir = f"B{ANSI}{MDLINK}{BIDI}"
    return [
        I(8, "compare-text-context-ansi", "compare B SYN", copy("SYN"), *_evil_context(ANSI), expect=(0,)),
        I(8, "compare-text-context-all", "compare B SYN", copy("SYN"), *_evil_context(ALL), expect=(0,)),
        I(8, "compare-text-hosts-all", "compare B SYN", copy("SYN"), *_hosts(ALL), expect=(0,)),
        I(8, "compare-text-folder-name", ["compare", evil_dir, "SYN"], copy("SYN"), copy("SYN", evil_dir), expect=(0,)),
        I(8, "compare-text-algorithm-column", "compare B SYN", copy("SYN"), copy("SYN", "B"),
          edit_csv("B/results.csv", "algorithm", ALL, rows="first"), expect=(0, 2),
          note="an unknown algorithm name may be refused (2) or shown escaped (0)"),
        I(8, "compare-markdown-context-all", "compare B SYN --format markdown", copy("SYN"), *_evil_context(ALL),
          expect=(0,), checks=md),
        I(8, "compare-markdown-context-link", "compare B SYN --format markdown", copy("SYN"), *_evil_context(MDLINK),
          expect=(0,), checks=md),
        I(8, "compare-markdown-context-html", "compare B SYN --format markdown", copy("SYN"), *_evil_context(HTML),
          expect=(0,), checks=md),
        I(8, "compare-markdown-folder-name", ["compare", evil_dir, "SYN", "--format", "markdown"], copy("SYN"),
          copy("SYN", evil_dir), expect=(0,), checks=md),
        I(8, "compare-markdown-algorithm-column", "compare B SYN --format markdown", copy("SYN"), copy("SYN", "B"),
          edit_csv("B/results.csv", "algorithm", f"ring{MDLINK}{HTML}", rows="first"), expect=(0, 2), checks=md),
        I(8, "compare-json-context-all", "compare B SYN --format json", copy("SYN"), *_evil_context(ALL),
          expect=(0,), checks=js),
        I(8, "compare-json-algorithm-column", "compare B SYN --format json", copy("SYN"), copy("SYN", "B"),
          edit_csv("B/results.csv", "algorithm", ALL, rows="first"), expect=(0, 2), checks=js),
        I(8, "compare-junit-context-all", "compare B SYN --format junit", copy("SYN"), *_evil_context(ALL),
          expect=(0,), checks=(junit_xml,)),
        I(8, "compare-html-page-all", "compare B SYN --html t.html", copy("SYN"), *_evil_context(ALL), expect=(0,),
          outputs=("t.html",), checks=(file_lacks("t.html", HTML, SCRIPT),)),
        I(8, "report-all", "report B -o r.html", *_evil_context(ALL), expect=(0,), outputs=("r.html",),
          checks=(file_lacks("r.html", HTML, SCRIPT),)),
        I(8, "topo-compare-label-all", "topo-compare B", copy("TOPO", "B"), edit_csv("B/results.csv", "label", ALL),
          expect=(0,)),
        I(8, "model-fit-context-all", "model fit B -o m.json", *_evil_context(ALL), expect=(0,), outputs=("m.json",)),
        I(8, "run-console-label", [*shlex.split(RUN_SMALL), "--label", ALL, "--out", "R"], expect=(0, 2),
          outputs=("R",), note="a label with control characters may be refused (2) or shown escaped (0)"),
        I(8, "run-json-rows-label", [*shlex.split(RUN_SMALL), "--json", "--label", ALL, "--out", "R"], expect=(0, 2),
          outputs=("R",), checks=(json_lines,)),
        I(8, "import-osu-label", ["import", "osu", "osu.txt", "-n", "4", "--out", "O", "--label", ALL], copy(OSU, "osu.txt"),
          expect=(0, 2), outputs=("O",)),
        I(8, "import-nccl-text-hostname", "import nccl-tests nccl.txt --out O",
          _nccl_text_with("on ztan-mig-235z", f"on {ALL}", 8), expect=(0, 2), outputs=("O",)),
        I(8, "import-nccl-json-hostname", "import nccl-tests nccl.json --out O", copy(NCCL_JSON, "nccl.json"),
          edit_json("nccl.json", lambda d, s: [dev.update(hostname=ALL) for dev in d["config"]["devices"]]),
          expect=(0, 2), outputs=("O",)),
        I(8, "import-osu-title", "import osu osu.txt -n 4 --out O",
          write("osu.txt", lambda s: (DATA / "osu" / "osu_allreduce_4ranks.txt").read_text().replace(
              "Allreduce", f"Allreduce{ANSI}{OSC52}")), expect=(0, 2), outputs=("O",)),
        I(8, "error-echo-path", ["compare", f"nope{ALL}", "SYN"], copy("SYN")),
        I(8, "error-echo-backend", ["run", "--backend", OSC52 + ANSI, "--out", "R"]),
        I(8, "sweep-suite-name", "sweep s.yaml --out S",
          write("s.yaml", "name: \"" + ALL.encode("unicode_escape").decode()
                + "\"\ndefaults: {backend: mpi, nprocs: 2, collective: all_reduce, sizes: [8], iters: 5, warmup: 1, "
                  "mode: in-place}\nruns: [{label: a}]\n"), expect=(0, 2), outputs=("S",)),
    ]


def class9() -> list[Input]:
    """Nonsense refused up front with exit 2, not accepted, ignored, or launched to fail."""
    P = "model predict --nodes 2 --ranks-per-node 2"
    IN = "--intra 450,2 --inter 50,5"
    R = "run -n 2 --backend mpi --sizes 8 --out R"
    resume = lambda name, extra: I(9, name, f"run --resume R {extra}", *resumable(),
                                   note="an option --resume would ignore is refused")
    return [
        I(9, "predict-links-per-node-negative", f"{P} {IN} --links-per-node -3"),
        I(9, "predict-reduce-bw-negative", f"{P} {IN} --reduce-bw -1"),
        I(9, "predict-reduce-bw-nan", f"{P} {IN} --reduce-bw nan"),
        I(9, "predict-intra-negative", f"{P} --intra -450,2 --inter 50,5"),
        I(9, "predict-inter-latency-negative", f"{P} --intra 450,2 --inter 50,-5"),
        I(9, "predict-nodes-zero", f"model predict --nodes 0 --ranks-per-node 2 {IN}"),
        I(9, "predict-step-factor-one", f"{P} {IN} -f 1"),
        I(9, "predict-segment-zero", f"{P} {IN} --segment-bytes 0"),
        I(9, "model-fit-links-negative", "model fit SYN -o m.json --links-per-node -1", copy("SYN")),
        I(9, "model-validate-links-zero", "model validate SYN --links-per-node 0", copy("SYN")),
        I(9, "import-osu-n-1e20", "import osu osu.txt -n 1e20 --out O", copy(OSU, "osu.txt")),
        I(9, "import-osu-n-zero", "import osu osu.txt -n 0 --out O", copy(OSU, "osu.txt")),
        I(9, "import-nccl-collective-unknown", "import nccl-tests nccl.txt --collective broadcastish --out O",
          copy(NCCL_TXT, "nccl.txt")),
        resume("resume-with-n", "-n 4"),
        resume("resume-with-sizes", "--sizes 1M"),
        resume("resume-with-backend", "--backend gloo"),
        resume("resume-with-label", "--label other"),
        resume("resume-with-iters", "--iters 7"),
        resume("resume-with-out", "--out elsewhere"),
        I(9, "run-n-zero", "run -n 0 --backend mpi --sizes 8 --out R"),
        I(9, "run-iters-huge", f"{R} --iters 1000000000000000"),
        I(9, "run-warmup-huge", f"{R} --warmup 1000000000000000"),
        I(9, "run-sizes-1t", "run -n 2 --backend mpi --sizes 1T --out R", note="a buffer no machine here can hold"),
        I(9, "run-sizes-empty", ["run", "-n", "2", "--backend", "mpi", "--sizes", ",", "--out", "R"]),
        I(9, "run-min-time-nan", f"{R} --min-time nan"),
        I(9, "sweep-out-into-run-folder", "sweep tiny.yaml --out BASE", suite("tiny.yaml", TINY_SUITE), copy("BASE"),
          note="a sweep inside a run folder would hide it from compare and report"),
        I(9, "sweep-out-inside-run-folder", "sweep tiny.yaml --out BASE/sub", suite("tiny.yaml", TINY_SUITE),
          copy("BASE")),
        I(9, "run-out-inside-run-folder", "run -n 2 --backend mpi --sizes 8 --out BASE/sub", copy("BASE"),
          note="debatable: a run inside a run folder hides it the same way"),
    ]


def all_inputs() -> list[Input]:
    inputs = class1() + class2() + class3() + class4() + class5() + class6() + class7() + class8() + class9()
    names = [f"{i.cls}/{i.name}" for i in inputs]
    assert len(names) == len(set(names)), "input names must be unique"
    return inputs


# --- the runner -----------------------------------------------------------------------------------

@dataclass
class Outcome:
    rc: int | None = None  # shell-style: 128 + N when killed by signal N
    died_of: int | None = None  # the signal that killed it (no handler)
    wall_s: float = 0.0
    maxrss_mb: float = 0.0  # wait4: the largest process (and waited-for descendants)
    tree_mb: float = 0.0  # sampled: the whole tree's RSS at once
    cpu_s: float = 0.0
    stdout: bytes = b""
    stderr: bytes = b""
    killed: str | None = None  # why the runner killed it (timeout, runaway)
    sent: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    crash: str | None = None  # the traceback file of an internal error
    changed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def peak_mb(self) -> float:
        return max(self.maxrss_mb, self.tree_mb)


def child_env(tmp: Path, tag: str = "") -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["TMPDIR"] = str(tmp)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env[TAG_ENV] = tag
    for var in ("FORCE_COLOR", "CLICOLOR_FORCE", "PYTHONINSPECT"):
        env.pop(var, None)
    return env


def _limits() -> None:  # in the child, before exec
    limit = ADDRESS_LIMIT_GB << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _procs() -> dict[int, tuple[int, int, int, str]]:
    """Every process: pid -> (ppid, session, rss bytes, name)."""
    out, page = {}, os.sysconf("SC_PAGE_SIZE")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        close = data.rfind(b")")
        fields = data[close + 2:].split()
        out[int(entry.name)] = (int(fields[1]), int(fields[3]), int(fields[21]) * page,
                                data[data.find(b"(") + 1:close].decode(errors="replace"))
    return out


def _tree(root: int) -> dict[int, tuple[int, str]]:
    """The command's processes: its session (it leads one) and every descendant; pid -> (rss, name)."""
    procs = _procs()
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_rest) in procs.items():
        children.setdefault(ppid, []).append(pid)
    members = {pid for pid, (_p, sid, _r, _n) in procs.items() if sid == root}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in procs:
            members.add(pid)
        todo += children.get(pid, [])
    return {pid: (procs[pid][2], procs[pid][3]) for pid in members if pid in procs}


def _tagged(tag: str) -> dict[int, str]:
    """Processes whose environment carries this input's tag (they may have left the session)."""
    found = {}
    needle = f"{TAG_ENV}={tag}".encode()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        with open(f"/proc/{entry.name}/comm") as c:
                            found[int(entry.name)] = c.read().strip()
            except OSError:
                continue
    return found


def _kill_all(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def snapshot(root: Path) -> dict[str, tuple]:
    """path -> (kind, size, mtime_ns, sha256 or link target) for everything under root."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            elif not stat.S_ISREG(st.st_mode):  # a device node, fifo or socket: never read
                out[rel] = ("special", stat.S_IFMT(st.st_mode), st.st_rdev)
            else:
                digest = None
                if st.st_size <= HASH_LIMIT:
                    with open(p, "rb") as f:
                        digest = hashlib.sha256(f.read()).hexdigest()
                out[rel] = ("file", st.st_size, st.st_mtime_ns, digest)
    return out


def _changes(before: dict, after: dict, outputs: tuple[str, ...]) -> list[str]:
    allowed = lambda rel: any(rel == o or rel.startswith(o.rstrip("/") + "/") for o in outputs)
    out = []
    for rel in sorted(set(before) | set(after)):
        if before.get(rel) != after.get(rel) and not allowed(rel):
            what = "created" if rel not in before else "removed" if rel not in after else "modified"
            out.append(f"{ascii(rel)[1:-1]} {what}")
    return out


def execute(inp: Input, scratch: Path, logs: Path) -> Outcome:
    """Run one input's command in scratch and watch it: signals, a closed stdout, caps, memory."""
    out = Outcome()
    tmp = logs / "tmp"
    tmp.mkdir(parents=True)
    tag = uuid.uuid4().hex
    argv = [a.replace("{S}", str(scratch)) for a in inp.argv]
    cap = CAP_BAD_S if inp.expect == {2} else CAP_S
    with open(logs / "stdout", "wb") as out_f, open(logs / "stderr", "wb") as err_f:
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "commbench", *argv], cwd=scratch, env=child_env(tmp, tag),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if inp.head else out_f,
                                stderr=err_f, start_new_session=True, preexec_fn=_limits)
        pid, head_buf, next_scan = proc.pid, b"", 0.0
        if inp.head:
            os.set_blocking(proc.stdout.fileno(), False)
        trigger_at = None if inp.sig is None else (inp.sig.after_s if inp.sig.rows is None else None)
        sends = 0
        while True:
            wpid, status, usage = os.wait4(pid, os.WNOHANG)
            now = time.monotonic() - start
            if wpid == pid:
                break
            if inp.head and not proc.stdout.closed:
                try:
                    head_buf += proc.stdout.read() or b""
                except BlockingIOError:
                    pass
                if head_buf.count(b"\n") >= inp.head:
                    head_buf = b"".join(head_buf.splitlines(keepends=True)[:inp.head])
                    proc.stdout.close()
                    out.sent.append(f"stdout closed at {now:.2f} s")
            if inp.sig is not None:
                if trigger_at is None and count_rows(scratch / inp.sig.csv) >= (inp.sig.rows or 0):
                    trigger_at = now + inp.sig.after_s
                if trigger_at is not None and now >= trigger_at and sends < (2 if inp.sig.twice else 1):
                    try:
                        (os.killpg if inp.sig.group else os.kill)(pid, inp.sig.signum)
                        out.sent.append(f"{signal.Signals(inp.sig.signum).name} at {now:.2f} s")
                    except ProcessLookupError:
                        pass
                    sends += 1
                    trigger_at = now + 0.1
            if now >= next_scan:
                tree = _tree(pid)
                rss = sum(r for r, _ in tree.values()) / 2**20
                out.tree_mb = max(out.tree_mb, rss)
                if len(tree) > MAX_TREE_PROCS or rss > MAX_TREE_MB:
                    out.killed = f"runaway: {len(tree)} processes, {rss:.0f} MB at {now:.1f} s"
                elif now > cap:
                    out.killed = f"timeout: killed after {cap:.0f} s"
                if out.killed:
                    _kill_all(tree)
                next_scan = now + SCAN_S
            time.sleep(0.01)
        out.wall_s = time.monotonic() - start
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code  # reaped here (wait4), so Popen does not wait again
        out.rc, out.died_of = (128 - code, -code) if code < 0 else (code, None)
        out.maxrss_mb = usage.ru_maxrss / 1024
        out.cpu_s = usage.ru_utime + usage.ru_stime
        if inp.head:
            if not proc.stdout.closed:
                try:
                    head_buf += proc.stdout.read() or b""
                except BlockingIOError:
                    pass
                proc.stdout.close()
            out.stdout = head_buf
    deadline = time.monotonic() + 3.0
    while (left := _tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left:
        out.leftovers = [f"{name}({pid})" for pid, name in sorted(left.items())]
        _kill_all(left)
        time.sleep(0.2)
    if not inp.head:
        out.stdout = (logs / "stdout").read_bytes()
    out.stderr = (logs / "stderr").read_bytes()
    crashes = sorted(tmp.glob("commbench-crash-*"))
    if crashes:
        lines = crashes[0].read_text(errors="replace").strip().splitlines()
        out.crash = lines[-1] if lines else str(crashes[0])
    return out


def _lines(data: bytes) -> list[str]:
    return [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]


def judge(inp: Input, out: Outcome, scratch: Path) -> list[str]:
    """Every way the outcome breaks the contract (empty: met)."""
    problems = []
    if out.killed:
        problems.append(out.killed)
    if out.rc == 3:
        problems.append("internal error (exit 3)" + (f": {out.crash[:120]}" if out.crash else ""))
    elif out.rc not in inp.expect:
        died = f" (killed by {signal.Signals(out.died_of).name}, no handler)" if out.died_of else ""
        problems.append(f"exit {out.rc}{died}, expected {'/'.join(map(str, sorted(inp.expect)))}")
    if inp.sig and not out.sent and 0 not in inp.expect:  # with 0 accepted, ending first is allowed
        problems.append("the signal was never sent: the command ended first")
    for stream, data in (("stderr", out.stderr), ("stdout", out.stdout)):
        text = data.decode("utf-8", "replace")
        if "Traceback (most recent call last)" in text or "Exception ignored in" in text:
            problems.append(f"a Python traceback on {stream}")
        raw = RAW_CONTROLS.search(text)
        if raw:
            problems.append(f"a raw control character {raw.group()!r} on {stream}")
    err = _lines(out.stderr)
    if out.rc in (2, 3) and len(err) != 1:
        problems.append(f"{len(err)} stderr lines, expected 1")
    if out.rc is not None and out.rc >= 128 and not (err and SIGNAL_WORDS.search(err[-1])):
        problems.append("no last stderr line saying interrupted/stopped" if err else "nothing on stderr after a signal")
    if out.changed:
        more = f" (+{len(out.changed) - 3} more)" if len(out.changed) > 3 else ""
        problems.append("changed outside the output: " + ", ".join(out.changed[:3]) + more)
    if out.rc == 2 and out.wall_s > LIMIT_S:
        problems.append(f"{out.wall_s:.1f} s before exit 2 (limit {LIMIT_S:.0f} s)")
    if out.rc == 2 and out.peak_mb > LIMIT_MB:
        problems.append(f"{out.peak_mb:.0f} MB before exit 2 (limit {LIMIT_MB:.0f} MB)")
    if out.leftovers:
        problems.append("left processes running: " + ", ".join(out.leftovers[:4]))
    for check in inp.checks:
        problems += check(scratch, out)
    return problems


def run_input(index: int, inp: Input, root: Path) -> Outcome:
    scratch = root / f"{index:03d}"
    logs = root / f"{index:03d}.logs"
    scratch.mkdir()
    logs.mkdir()
    try:
        for step in inp.setup:
            step(scratch)
    except Exception as exc:  # noqa: BLE001 - the instrument's own failure, reported as such
        out = Outcome(problems=[f"SETUP FAILED (the instrument, not commbench): {type(exc).__name__}: {exc}"])
        return out
    before = snapshot(scratch)
    out = execute(inp, scratch, logs)
    out.changed = _changes(before, snapshot(scratch), inp.outputs)
    out.problems = judge(inp, out, scratch) + guard_system_devices()
    return out


SYSTEM_DEVICES = {"/dev/null": (1, 3), "/dev/full": (1, 7), "/dev/zero": (1, 5)}


def guard_system_devices() -> list[str]:
    """No input should reach the system's device nodes, but an output written by rename over one
    would replace it for the whole machine: put it back at once (root) and say so."""
    problems = []
    for path, (major, minor) in SYSTEM_DEVICES.items():
        try:
            if stat.S_ISCHR(os.lstat(path).st_mode):
                continue
            os.unlink(path)
        except FileNotFoundError:
            pass
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        os.chmod(path, 0o666)
        problems.append(f"replaced the system's {path} (restored)")
    return problems


# --- the reporter ---------------------------------------------------------------------------------

def first_line(data: bytes) -> str:
    lines = _lines(data)
    if not lines:
        return "(empty)"
    line = lines[0]
    if line.startswith("Traceback") and len(lines) > 1:
        line = f"Traceback ... {lines[-1]}"
    return ascii(line[:150])[1:-1]


def report(results: list[tuple[Input, Outcome]]) -> bool:
    print()
    print(f"{'class':<34} {'tried':>5} {'met':>4} {'failed':>6}   {'worst exit-2 wall':<34} {'worst exit-2 peak':<34}")
    for cls, title in CLASSES.items():
        mine = [(i, o) for i, o in results if i.cls == cls]
        if not mine:
            continue
        met = sum(not o.problems for _, o in mine)
        twos = [(i, o) for i, o in mine if o.rc == 2]
        wall = max(twos, key=lambda p: p[1].wall_s, default=None)
        peak = max(twos, key=lambda p: p[1].peak_mb, default=None)
        w = f"{wall[1].wall_s:5.2f} s  {wall[0].name[:24]}" if wall else "-"
        m = f"{peak[1].peak_mb:5.0f} MB {peak[0].name[:24]}" if peak else "-"
        print(f"{cls} {title:<32} {len(mine):>5} {met:>4} {len(mine) - met:>6}   {w:<34} {m:<34}")
    total = len(results)
    failed = [(i, o) for i, o in results if o.problems]
    slowest = max(results, key=lambda p: p[1].wall_s)
    biggest = max(results, key=lambda p: p[1].peak_mb)
    print(f"{'all':<34} {total:>5} {total - len(failed):>4} {len(failed):>6}   "
          f"overall slowest {slowest[1].wall_s:.1f} s ({slowest[0].name}), largest {biggest[1].peak_mb:.0f} MB "
          f"({biggest[0].name})")
    if failed:
        print(f"\nfailing inputs ({len(failed)}):")
        for i, o in failed:
            print(f"  {i.cls} {i.name:<40} exit {o.rc!s:>4}  {o.wall_s:5.1f} s {o.peak_mb:5.0f} MB  "
                  f"stderr: {first_line(o.stderr)}")
            print(f"      why: {'; '.join(o.problems)}")
    for note in NOTES:
        print(f"note: {note}")
    return not failed


def as_json(inp: Input, out: Outcome) -> dict:
    return {"class": inp.cls, "name": inp.name, "argv": inp.argv, "expect": sorted(inp.expect),
            "outputs": list(inp.outputs), "note": inp.note, "rc": out.rc, "died_of": out.died_of,
            "wall_s": round(out.wall_s, 3), "maxrss_mb": round(out.maxrss_mb, 1), "tree_mb": round(out.tree_mb, 1),
            "peak_mb": round(out.peak_mb, 1), "cpu_s": round(out.cpu_s, 3), "signals": out.sent,
            "killed": out.killed, "leftovers": out.leftovers, "crash": out.crash, "changed": out.changed,
            "met": not out.problems, "problems": out.problems,
            "stderr_first": first_line(out.stderr), "stderr_last": ascii((_lines(out.stderr) or [""])[-1][:200])[1:-1]}


def main() -> int:
    global FIX
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--class", dest="cls", type=int, choices=sorted(CLASSES), help="run one class only")
    ap.add_argument("-k", dest="substring", help="only inputs whose name (or argv) holds this")
    ap.add_argument("--list", action="store_true", help="list the inputs and exit")
    ap.add_argument("--json", dest="json_file", help="write every input's result to this file")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folders (their path is printed)")
    args = ap.parse_args()

    inputs = [i for i in all_inputs() if (args.cls is None or i.cls == args.cls)
              and (args.substring is None or args.substring in i.name or args.substring in " ".join(i.argv))]
    if args.list:
        for i in inputs:
            argv = " ".join(shlex.quote(a) if len(a) < 60 else shlex.quote(a[:40]) + "...(" + str(len(a)) + ")"
                            for a in i.argv)
            print(f"{i.cls} {i.name:<40} expect {'/'.join(map(str, sorted(i.expect))):<7} {ascii(argv)[1:-1]}")
        counts = {c: sum(i.cls == c for i in inputs) for c in CLASSES}
        print(f"{len(inputs)} inputs: " + ", ".join(f"class {c}: {n}" for c, n in counts.items() if n))
        return 0
    if not inputs:
        print("no input matches", file=sys.stderr)
        return 2

    root = Path(tempfile.mkdtemp(prefix="hostile-inputs-"))
    FIX = root / "fixtures"
    FIX.mkdir()
    results = []
    started = time.monotonic()
    try:
        for n, inp in enumerate(inputs, 1):
            out = run_input(n, inp, root)
            results.append((inp, out))
            mark = "ok  " if not out.problems else "FAIL"
            print(f"[{n:3d}/{len(inputs)}] {mark} {inp.cls} {inp.name:<42} exit {out.rc!s:>4} "
                  f"{out.wall_s:5.1f} s {out.peak_mb:5.0f} MB", flush=True)
    finally:
        if args.keep:
            print(f"scratch folders kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    ok = report(results)
    print(f"\n{len(results)} inputs in {time.monotonic() - started:.0f} s")
    if args.json_file:
        Path(args.json_file).write_text(json.dumps([as_json(i, o) for i, o in results], indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
