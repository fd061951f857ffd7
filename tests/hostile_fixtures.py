"""The files the hostile-input acceptance suite (tests/acceptance, issue 20) starts its cases from:
result folders, suites and imports built once per session, lazily (`fixture`), and the setup steps
that copy and damage them in a case's scratch folder (each step a function of that folder).

BASE is one real small run (so it is resumable: it has a spec), written by hand if the run fails;
a case that copies it may start ranks (`starts_ranks`: such a case asks for conftest's `job`), as
may every `commbench run` or `sweep` that is not refused before launching. SYN, TOPO and the rest
are written by hand, as the one writer would; a file only one case uses (a 50 MB suite, a 40 MB
run.json) is written by a step of its class's test file."""

from __future__ import annotations

import atexit
import csv
import dataclasses
import json
import os
import random
import shlex
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Callable

import pytest

from conftest import DATA, LAUNCHING
from hostile_contract import Case, Outcome, Step, child_env
from commbench.errors import FAILED, OK
from commbench.folder.schema import COLUMNS, RESULTS_CSV, RUN_JSON, SAMPLE_COLUMNS, SAMPLES_CSV
from commbench.spec import SweepSpec

BASE_RUN = "run -n 2 --backend mpi -c all_reduce --sizes 8,1K --iters 20 --warmup 2 --out BASE"
BASE_SPEC = dataclasses.asdict(SweepSpec(  # BASE_RUN's spec, for BASE written by hand
    collectives=["all_reduce"], backends=["mpi"], algorithms=["native"], sizes=[8, 1024], dtypes=["float32"],
    ops=["sum"], in_place=[False, True], nprocs=2, iters=20, warmup=2, out_dir="BASE"))
LAUNCHED_BY = {"BASE"}  # fixtures built by a real run
DEPENDS = {"model.json": "SYN"}  # fixtures built from another
_built: dict[str, Path] = {}
NOTES: list[str] = []  # what the session had to fall back on (each also a warning in pytest's summary)
_root: list[Path] = []


def root() -> Path:
    """The session's fixture folder (removed when the session ends)."""
    if not _root:
        _root.append(Path(tempfile.mkdtemp(prefix="commbench-hostile-")))
        atexit.register(shutil.rmtree, _root[0], True)
    return _root[0]


def fixture(name: str) -> Path:
    if name not in _built:
        _built[name] = BUILDERS[name]()
    return _built[name]


def _note(text: str) -> None:
    NOTES.append(text)
    warnings.warn(text, stacklevel=2)


def _uses(c: Case) -> set[str]:
    names = {n for step in c.setup for n in getattr(step, "uses", ())}
    return names | {DEPENDS[n] for n in names if n in DEPENDS}


def starts_ranks(c: Case) -> bool:
    """May the case start ranks: a command that launches, or a copy of a fixture a real run made?"""
    return c.argv[0] in LAUNCHING or bool(_uses(c) & LAUNCHED_BY)


def params(cases: list[Case], launching: bool) -> list:
    """pytest parameters of the cases that may start ranks (launching) or of those that cannot."""
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), "case names must be unique"
    return [pytest.param(c, id=c.name) for c in cases if starts_ranks(c) == launching]


def _commbench(argv: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "commbench", *shlex.split(argv)], cwd=cwd, env=child_env(root()),
                          capture_output=True, text=True, timeout=timeout)


def write_folder(path: Path, points: list[dict], jobs: int = 1, meta: dict | None = None, seed: int = 0,
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
    with open(path / RESULTS_CSV, "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    with open(path / SAMPLES_CSV, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(SAMPLE_COLUMNS)
        writer.writerows(samples)
    world = max(pt["world_size"] for pt in points)
    full = {"format_version": 2, "run_id": run_id, "label": "", "status": "completed", "error": None,
            "repeat": jobs, "world_size": world, "nodes": 1, "ranks_per_node": world, "launcher": "mpirun",
            "launcher_args": [], "versions": {"commbench": "0.1.0", "python": "3.11.7",
                                               "mpi_library": "Open MPI v5.0.11"},
            "ranks": [{"hostname": "node-a", "rank": r} for r in range(world)], "environment": {},
            "rank0_environment": {"OMPI_MCA_btl": "self,vader"}, "planned_points": len(points),
            "points_measured": len(points), "skipped": [], "samples_file": SAMPLES_CSV,
            "jobs": [{"job": k, "block": 1, "points": list(range(len(points))), "hosts": ["node-a"],
                      "background_cores": 0.0, "cpu_count": 2} for k in range(1, jobs + 1)]}
    full.update(meta or {})
    (path / RUN_JSON).write_text(json.dumps(full, indent=2))
    return path


def _cost(algorithm: str, w: int, s: int) -> float:
    """A plausible time in µs: per-step latency plus bytes over 1.5 GB/s."""
    steps = {"native": 1, "ring": 2 * (w - 1), "tree": 2 * max(1, (w - 1).bit_length()),
             "rhd": 2 * (w - 1).bit_length(), "ring_topology": 2 * (w - 1), "hierarchical": 4}[algorithm]
    return 2.0 + 3.0 * steps + s * 2 * (w - 1) / w / 1.5e3


def build_syn() -> Path:
    """3 jobs a point (so compare gives real verdicts): native, ring, tree, rhd x 2 and 4 ranks x 4 sizes."""
    points = [{"algorithm": a, "world_size": w, "ranks_per_node": w, "size_bytes": s, "count": s // 4,
               "time_us": _cost(a, w, s)}
              for a in ("native", "ring", "tree", "rhd") for w in (2, 4) for s in (8, 1024, 65536, 1048576)]
    return write_folder(root() / "SYN", points, jobs=3, seed=1)


def build_topo() -> Path:
    """Two emulated nodes of 2 ranks: what topo-compare compares."""
    points = [{"algorithm": a, "world_size": 4, "nodes": 2, "ranks_per_node": 2, "size_bytes": s, "count": s // 4,
               "placement": "block", "time_us": _cost(a, 4, s), "internode_bytes_expected": s,
               "internode_bytes_measured": s * 1.003}
              for a in ("native", "ring", "ring_topology", "hierarchical") for s in (1024, 1048576)]
    return write_folder(root() / "TOPO", points, jobs=1, seed=2, meta={"nodes": 2, "ranks_per_node": 2})


def build_base() -> Path:
    """One real small run (resumable: it has a spec); written by hand if the run fails."""
    out = root() / "BASE"
    try:
        done = _commbench(BASE_RUN, root())
        if done.returncode == OK and (out / RUN_JSON).is_file() and (out / RESULTS_CSV).is_file():
            return out
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
    except subprocess.TimeoutExpired:
        why = "timed out"
    _note(f"BASE: the real run failed ({why[:160]}); built by hand instead")
    shutil.rmtree(out, ignore_errors=True)
    points = [{"algorithm": "native", "world_size": 2, "ranks_per_node": 2, "size_bytes": s, "count": s // 4,
               "in_place": ip, "time_us": 0.3 + s / 3e3} for ip in (0, 1) for s in (8, 1024)]
    return write_folder(out, points, meta={"spec": dict(BASE_SPEC), "launcher_args": [], "launcher": "mpirun",
                                           "samples_file": SAMPLES_CSV})


def build_model() -> Path:
    """A model.json from `model fit SYN` (a stand-in if the fit fails: the damaged copies stay damaged)."""
    out = root() / "model.json"
    done = _commbench(f"model fit {fixture('SYN')} -o {out}", root())
    if done.returncode != OK or not out.is_file():
        _note(f"model.json: `model fit` failed ({(done.stderr.strip().splitlines() or ['?'])[-1][:160]}); "
                     "a stand-in is used")
        out.write_text(json.dumps({"format": "commbench-model", "fits": [{"group": "mpi", "alpha_us": 5.0,
                                                                           "beta_us_per_byte": 0.001}]}))
    return out


BUILDERS: dict[str, Callable[[], Path]] = {"BASE": build_base, "SYN": build_syn, "TOPO": build_topo,
                                            "model.json": build_model}


# --- setup steps (each returns a Step: a function of the scratch folder) ----------------------------

def copy(name: str, dst: str | None = None) -> Step:
    """A copy of a fixture (BASE, SYN, TOPO, model.json, ...) or a file of tests/data ("data:osu/x.txt")."""
    def step(s: Path):
        src = DATA / name[5:] if name.startswith("data:") else fixture(name)
        target = s / (dst or src.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copyfile)(src, target)
    step.uses = () if name.startswith("data:") else (name,)
    return step


def twin(name: str) -> tuple[Step, Step]:
    """A fixture and an identical copy of it named TWIN (compare refuses a folder compared with itself)."""
    return copy(name), copy(name, "TWIN")


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


def _subst(value, s: Path):
    if isinstance(value, str):
        return value.replace("{S}", str(s))
    if isinstance(value, list):
        return [_subst(v, s) for v in value]
    if isinstance(value, dict):
        return {k: _subst(v, s) for k, v in value.items()}
    return value


def meta(**changes) -> Step:
    """Set top-level fields of R/run.json ("{S}" in strings becomes the scratch path)."""
    return edit_json(f"R/{RUN_JSON}", lambda d, s: d.update(_subst(changes, s)))


def spec(**changes) -> Step:
    """Set fields of R/run.json's spec."""
    return edit_json(f"R/{RUN_JSON}", lambda d, s: d["spec"].update(_subst(changes, s)))


def _table(p: Path, change: Callable[[list], list]) -> None:
    with open(p, newline="") as f:
        table = list(csv.reader(f))
    with open(p, "w", newline="") as f:
        csv.writer(f).writerows(change(table))


def edit_csv(rel: str, column: str, value: str, rows: str = "all") -> Step:
    """Set a column of a CSV file (results.csv, samples.csv) to value in all / first / last rows."""
    def change(table):
        col = table[0].index(column)
        for i in {"all": range(1, len(table)), "first": [1], "last": [len(table) - 1]}[rows]:
            table[i][col] = value
        return table
    return lambda s: _table(s / rel, change)


def drop_column(rel: str, column: str) -> Step:
    def change(table):
        col = table[0].index(column)
        return [r[:col] + r[col + 1:] for r in table]
    return lambda s: _table(s / rel, change)


def keep_lines(rel: str, n: int) -> Step:
    """Keep the first n lines of a file (n=1: the header only; n=0: empty)."""
    def step(s: Path):
        p = s / rel
        p.write_bytes(b"".join(p.read_bytes().splitlines(keepends=True)[:n]))
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
    return (copy("BASE", dst), keep_lines(f"{dst}/{RESULTS_CSV}", -1),
            edit_json(f"{dst}/{RUN_JSON}", lambda d, s: d.update(status="interrupted", end_time=None)))


TINY_SUITE = ("name: tiny\ndefaults: {backend: mpi, nprocs: 2, collective: all_reduce, sizes: [8], iters: 5, "
              "warmup: 1, mode: in-place}\nruns:\n  - label: r1\n")


def sweep_folder(dst: str = "S", damage: tuple[Step, ...] = ()) -> tuple[Step, ...]:
    """A sweep of TINY_SUITE cut short: S/suite.yaml and S/r1, a copy of BASE (interrupted), then damage."""
    return (write("tiny.yaml", TINY_SUITE), write(f"{dst}/suite.yaml", TINY_SUITE), *resumable(f"{dst}/r1"), *damage)


# --- inputs and checks several classes share ------------------------------------------------------

PREDICT = "model predict --nodes 2 --ranks-per-node 2 --intra 450,2 --inter 50,5 -b 8 -e 1M"
RUN_SMALL = "run -n 2 --backend mpi -c all_reduce --sizes 8 --iters 5 --warmup 1 --in-place"
OSU = "data:osu/osu_allreduce_4ranks.txt"
NCCL_TXT = "data:nccl_tests_all_reduce_16xH100.txt"
NCCL_JSON = "data:nccl_tests_all_gather.json"


def nccl_json_set(path: tuple, value):
    """Edit the first result of the nccl-tests JSON report nccl.json (path into results[0])."""
    def fn(doc, s):
        node = doc["results"][0]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return edit_json("nccl.json", fn)


def nccl_text_with(old: str, new: str, count: int = 1) -> Step:
    """nccl.txt: the nccl-tests all-reduce output with old replaced by new (count times)."""
    return write("nccl.txt", lambda s: (DATA / NCCL_TXT[5:]).read_text().replace(old, new, count))


def _bad_token(token):
    raise ValueError(f"bare {token}")


def strict_json(s: Path, out: Outcome) -> list[str]:
    """--format json: strict JSON (no NaN/Infinity), where there was an answer (OK or FAILED)."""
    if out.rc not in (OK, FAILED):
        return []
    try:
        json.loads(out.stdout.decode("utf-8"), parse_constant=_bad_token)
    except ValueError as exc:
        return [f"--format json is not strict JSON ({str(exc)[:100]})"]
    return []


def json_lines(s: Path, out: Outcome) -> list[str]:
    """--json rows: every stdout line one strict JSON object."""
    for line in out.stdout.decode("utf-8", "replace").splitlines():
        if line.strip():
            try:
                json.loads(line, parse_constant=_bad_token)
            except ValueError as exc:
                return [f"--json line is not strict JSON ({str(exc)[:80]}): {line[:80]!r}"]
    return []


def no_marker(s: Path, out: Outcome) -> list[str]:
    """A check: no program a case planted ran (each writes {S}/PWNED when run, loaded or imported)."""
    p = s / "PWNED"
    if p.exists():
        return [f"ran a planted program: PWNED says {p.read_text(errors='replace').strip()[:100]!r}"]
    return []
