"""Which rank or host is slow: the per-rank samples of runs (ranks.csv), each rank judged against the
same run's other ranks, never against an absolute floor (fabrics differ).

Per point and rank, over the point's samples:
  time     the rank's own µs per call (median), its CV (standard deviation / mean, as nccl-tests'
           analyze_perf_json.py) and its spread: its median over the fastest rank's, minus 1;
  late     µs per call the rank spent outside the calls before entering them (median; a benchmark
           loop spends nothing there, so a late rank is a compute straggler or an injected one);
  spikes   samples above SPIKE x the rank's own median; a spike is shared when at least half the
           ranks spiked in the same sample (a cause common to all: the machine, the fabric), else alone;
  first    the first sample's time over the median of the others (max over ranks): the warm-up left.

A rank's verdict at a point (at least MIN_SAMPLES samples):
  slow   late: in at least CONSISTENT of the samples it is later than the ranks' median lateness of that
         sample, and the median of that excess is above LATE_SHARE of the point's median time; or
         (collectives whose ranks share one role: not the rooted ones, whose root and leaves differ)
         its own time is above the ranks' median of the sample in CONSISTENT of them, by more than
         SLOW_SHARE at the median;
  noisy  its spikes alone are at least NOISY_SHARE of its samples, and more than twice the ranks' median;
  ok     otherwise.
Over a run, a rank is what it is at more than half of the points judged (slow before noisy), and a host
is slow (noisy) when more than half of its ranks are. The rule's false-alarm rate, measured: the note
of issue 63 and benchmarks/stragglers_detect.py.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from commbench.folder import limits
from commbench.folder.frames import checked
from commbench.folder.load import load_runs
from commbench.folder.files import read_bytes, read_file
from commbench.collectives import COLLECTIVES
from commbench.errors import InputError
from commbench.folder.schema import RANK_KINDS, RANKS_CSV

SPIKE = 1.5  # a sample above this x the rank's median is a spike (nccl-tests' --threshold default)
MIN_SAMPLES = 10  # a point with fewer samples is not judged
CONSISTENT = 0.75  # share of the samples a rank must be late (or slower) in
LATE_SHARE = 0.05  # median lateness excess, as a share of the point's median time, that makes a rank slow
SLOW_SHARE = 0.10  # median own-time excess over the ranks' median that makes a rank slow
NOISY_SHARE = 0.05  # share of samples with a spike of the rank alone that makes it noisy
VERDICTS = ("ok", "noisy", "slow")  # in rising order of concern
FORMATS = ("text", "markdown", "json")


@dataclass
class RankPoint:
    """One rank at one point."""
    rank: int
    median_us: float
    cv_pct: float
    spread_pct: float  # its median over the fastest rank's, minus 1, in %
    late_us: float | None  # median µs per call outside the calls (None: not recorded)
    spikes: int
    shared_spikes: int
    verdict: str
    why: str
    excess: float | None = None  # what decided a verdict other than ok: the share measured
    bar: float | None = None  # and the bar it crossed


@dataclass
class PointReport:
    run: str
    point: int
    title: str
    samples: int
    median_us: float
    first_effect: float  # sample 0 over the median of the rest (max over ranks)
    ranks: list[RankPoint]


@dataclass
class Subject:
    """A rank or a host over a run: its verdict and why."""
    what: str  # "rank" or "node"
    run: str
    ranks: list[int]
    hosts: list[str]
    nodes: list[int]
    verdict: str
    why: str
    measured: float | None = None  # the excess that decided it (share of the call's time), where flagged
    expected: float | None = None  # the bar it crossed
    points: int = 0  # points judged
    cells: dict = field(default_factory=dict)  # medians over points: time_us, cv_pct, spread_pct, late_us, spikes


def judge_point(run: str, point: int, title: str, own: np.ndarray, late: np.ndarray | None,
                same_role: bool) -> PointReport | None:
    """A point's report from its ranks x samples own times (µs) and late times (µs, or None); None when
    it has fewer than MIN_SAMPLES samples or one rank."""
    ranks, samples = own.shape
    if samples < MIN_SAMPLES or ranks < 2:
        return None
    medians = np.median(own, axis=1)
    fastest = medians.min()
    point_median = float(np.median(own.max(axis=0)))
    spikes = own > SPIKE * medians[:, None]
    together = spikes.sum(axis=0) >= max(2, ranks / 2)  # samples where at least half the ranks spiked
    alone = spikes & ~together[None, :]
    alone_share = alone.mean(axis=1)
    typical_alone = float(np.median(alone_share))
    rest = np.median(own[:, 1:], axis=1) if samples > 1 else medians
    first_effect = float(np.max(own[:, 0] / rest)) if samples > 1 else 1.0
    sample_median = np.median(own, axis=0)
    late_median = None if late is None else np.median(late, axis=0)
    out = []
    for r in range(ranks):
        mean = own[r].mean()
        cv = float(own[r].std() / mean * 100) if mean > 0 else 0.0
        verdict, why, measured, bar = "ok", "", None, None
        if late is not None:
            excess = late[r] - late_median
            share = float(np.median(excess)) / point_median if point_median > 0 else 0.0
            if (excess > 0).mean() >= CONSISTENT and share > LATE_SHARE:
                verdict, measured, bar = "slow", share, LATE_SHARE
                why = (f"arrives late: {share:.0%} of a call's time after the ranks' median (bar {LATE_SHARE:.0%}), "
                       f"in {(excess > 0).mean():.0%} of the samples")
        if verdict == "ok" and same_role:
            ratio = own[r] / sample_median
            share = float(np.median(ratio)) - 1
            if (ratio > 1).mean() >= CONSISTENT and share > SLOW_SHARE:
                verdict, measured, bar = "slow", share, SLOW_SHARE
                why = (f"its calls take {share:.0%} longer than the ranks' median (bar {SLOW_SHARE:.0%}), in "
                       f"{(ratio > 1).mean():.0%} of the samples")
        if verdict == "ok" and alone_share[r] >= NOISY_SHARE and alone_share[r] > 2 * typical_alone:
            verdict, measured, bar = "noisy", float(alone_share[r]), NOISY_SHARE
            why = (f"spikes alone (> {SPIKE:g}x its median) in {alone_share[r]:.0%} of the samples (bar "
                   f"{NOISY_SHARE:.0%}; the ranks' median {typical_alone:.0%})")
        out.append(RankPoint(r, float(medians[r]), cv, float((medians[r] / fastest - 1) * 100) if fastest > 0 else 0.0,
                             None if late is None else float(np.median(late[r])), int(spikes[r].sum()),
                             int((spikes[r] & together).sum()), verdict, why, measured, bar))
    return PointReport(run, point, title, samples, point_median, first_effect, out)


def summarize_run(run: str, reports: list[PointReport], hosts: dict[int, str], nodes: dict[int, int]) -> list[Subject]:
    """Each rank's and each host's verdict over the run's judged points."""
    if not reports:
        return []
    subjects = []
    by_rank: dict[int, list[RankPoint]] = {}
    for rep in reports:
        for rp in rep.ranks:
            by_rank.setdefault(rp.rank, []).append(rp)
    rank_verdict = {}
    for rank, cells in sorted(by_rank.items()):
        n = len(cells)
        verdict, why, worst = "ok", "", None
        for v in ("slow", "noisy"):
            flagged = [c for c in cells if c.verdict == v]
            if len(flagged) * 2 > n:
                worst = max(flagged, key=lambda c: c.excess / c.bar)
                verdict, why = v, f"{worst.why} (at {len(flagged)} of {n} points)"
                break
        rank_verdict[rank] = verdict
        lates = [c.late_us for c in cells if c.late_us is not None]
        subject = Subject("rank", run, [rank], [hosts.get(rank, "?")], [nodes.get(rank, 0)], verdict, why,
                          worst.excess if worst else None, worst.bar if worst else None, n,
                          {"time_us": float(np.median([c.median_us for c in cells])),
                           "cv_pct": float(np.median([c.cv_pct for c in cells])),
                           "spread_pct": float(np.median([c.spread_pct for c in cells])),
                           "late_us": float(np.median(lates)) if lates else None,
                           "spikes": sum(c.spikes for c in cells), "shared_spikes": sum(c.shared_spikes for c in cells)})
        subjects.append(subject)
    by_node: dict[int, list[int]] = {}
    for rank in by_rank:
        by_node.setdefault(nodes.get(rank, 0), []).append(rank)
    if len(by_node) > 1:
        for node, ranks in sorted(by_node.items()):
            verdict, why = "ok", ""
            for v in ("slow", "noisy"):
                hit = [r for r in ranks if rank_verdict[r] == v]
                if len(hit) * 2 > len(ranks):
                    verdict, why = v, f"{len(hit)} of its {len(ranks)} ranks are {v} ({', '.join(map(str, hit))})"
                    break
            mine = [s for s in subjects if s.ranks[0] in ranks]
            subjects.append(Subject("node", run, sorted(ranks), sorted({hosts.get(r, "?") for r in ranks}), [node],
                                    verdict, why, None, None, min(s.points for s in mine),
                                    {k: float(np.median([s.cells[k] for s in mine]))
                                     for k in ("time_us", "cv_pct", "spread_pct")}))
    return subjects


# --- reading runs ---------------------------------------------------------------------------------

def read_ranks(d: Path) -> pd.DataFrame | None:
    """A folder's ranks.csv, within the limits and checked; None where the folder has none."""
    if not (d / RANKS_CSV).exists():
        return None
    data = read_bytes(d, RANKS_CSV)
    limits.SAMPLES.check(f"{d}: {RANKS_CSV}", max(data.count(b"\n") - 1, 0))
    frame = read_file(d, RANKS_CSV, lambda: pd.read_csv(io.BytesIO(data), dtype={"run_id": str}, keep_default_na=False,
                                                        na_values=[""]))
    return checked(d, RANKS_CSV, frame, RANK_KINDS, ("run_id", "point", "iteration", "rank", "time_us"))


def _hosts(meta: dict) -> tuple[dict[int, str], dict[int, int]]:
    """rank -> host name, rank -> node index, from run.json (a run's `ranks`, an import's `rank_hosts`)."""
    names = meta.get("rank_hosts")
    if isinstance(names, list):
        hosts = {r: str(h) for r, h in enumerate(names)}
    else:
        hosts = {int(e["rank"]): str(e.get("hostname", "?")) for e in meta.get("ranks") or []
                 if isinstance(e, dict) and isinstance(e.get("rank"), int)}
    order = list(dict.fromkeys(hosts[r] for r in sorted(hosts)))
    of_rank = meta.get("node_of_rank")
    if isinstance(of_rank, list) and all(isinstance(n, int) for n in of_rank):
        nodes = dict(enumerate(of_rank))
    else:
        nodes = {r: order.index(h) for r, h in hosts.items()}
    return hosts, nodes


@dataclass
class Analysis:
    points: list[PointReport]
    subjects: list[Subject]
    without: list[str]  # runs with no per-rank samples

    @property
    def flagged(self) -> list[Subject]:
        return [s for s in self.subjects if s.verdict != "ok"]


def analyze(paths) -> Analysis:
    """Every run under paths (run folders, sweeps, imports): its points' and ranks' reports."""
    rows, runs = load_runs(paths)
    points, subjects, without = [], [], []
    for folder, meta in runs:
        d = Path(folder)
        mine = rows[rows.folder == folder]
        name = str(mine.run.iloc[0])
        ranks = read_ranks(d)
        if ranks is None or ranks.empty:
            without.append(name)
            continue
        hosts, nodes = _hosts(meta)
        reports = []
        for key, group in ranks.groupby(["point", "job"] if "job" in ranks else ["point"], sort=True):
            point = int(key[0] if isinstance(key, tuple) else key)
            row = mine[mine.point == point]
            if row.empty:
                continue
            row = row.iloc[0]
            wide = group.pivot_table(index="rank", columns="iteration", values="time_us", aggfunc="first")
            if wide.isna().any().any():
                raise InputError(f"{d}: {RANKS_CSV} point {point}: the ranks hold different samples")
            late = None
            if "late_us" in group and group.late_us.notna().all():
                late = group.pivot_table(index="rank", columns="iteration", values="late_us",
                                         aggfunc="first").to_numpy(float)
            title = (f"{row.collective} {row.backend}/{row.algorithm} {row['dtype']} "
                     f"{'in place' if int(row.in_place) else 'out of place'} {int(row.size_bytes)} B")
            collective = COLLECTIVES.get(str(row.collective))
            rep = judge_point(name, point, title, wide.to_numpy(float), late,
                              same_role=not (collective and collective.rooted))
            if rep is not None:
                reports.append(rep)
        points += reports
        subjects += summarize_run(name, reports, hosts, nodes)
    if not points and without:
        raise InputError(f"no per-rank samples ({RANKS_CSV}) in {', '.join(without[:3])}: runs of commbench "
                         "before per-rank times, and imports without per-process times (nccl-tests -I 1 -J), have none")
    return Analysis(points, subjects, without)


# --- writing ---------------------------------------------------------------------------------------

def to_json(a: Analysis) -> dict:
    """The script's object: verdict ok | flagged, the flagged ranks and nodes, and every subject."""
    def entry(s: Subject) -> dict:
        return {"what": s.what, "run": s.run, "nodes": s.nodes, "ranks": s.ranks, "hosts": s.hosts,
                "verdict": s.verdict, "measured": s.measured, "expected": s.expected, "why": s.why,
                "points": s.points, **s.cells}
    return {"verdict": "flagged" if a.flagged else "ok", "flagged": [entry(s) for s in a.flagged],
            "subjects": [entry(s) for s in a.subjects], "runs_without_rank_samples": a.without,
            "points": [{"run": p.run, "point": p.point, "title": p.title, "samples": p.samples,
                        "median_us": p.median_us, "first_effect": p.first_effect,
                        "ranks": [vars(r) for r in p.ranks]} for p in a.points]}


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render(a: Analysis, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(to_json(a), indent=2)
    md = fmt == "markdown"
    head = ("what", "run", "rank(s)", "host", "points", "time us", "CV %", "spread %", "late us", "spikes (shared)",
            "verdict", "why")
    lines = []
    table = []
    for s in a.subjects:
        c = s.cells
        table.append((s.what, s.run, ",".join(map(str, s.ranks)) if len(s.ranks) < 9 else f"{len(s.ranks)} ranks",
                      ",".join(s.hosts), str(s.points), _fmt(c.get("time_us"), ".2f"), _fmt(c.get("cv_pct"), ".1f"),
                      _fmt(c.get("spread_pct"), ".1f"), _fmt(c.get("late_us"), ".2f"),
                      f"{c['spikes']} ({c['shared_spikes']})" if "spikes" in c else "-", s.verdict.upper()
                      if s.verdict != "ok" else "ok", s.why))
    if md:
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table]
    else:
        widths = [max(len(h), *(len(r[i]) for r in table)) if table else len(h) for i, h in enumerate(head[:-1])]
        lines.append("  ".join(h.ljust(w) for h, w in zip(head[:-1], widths)) + "  why")
        lines += ["  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths)) + "  " + row[-1] for row in table]
    firsts = [p for p in a.points if p.first_effect > SPIKE]
    lines.append("")
    lines.append(f"{len(a.points)} point(s) judged; first sample above {SPIKE:g}x the rest at {len(firsts)} of them"
                 + (f" (worst {max(p.first_effect for p in firsts):.1f}x: {firsts[0].title})" if firsts else ""))
    if a.without:
        lines.append(f"no per-rank samples: {', '.join(a.without)}")
    flagged = a.flagged
    lines.append(("FLAGGED: " + "; ".join(f"{s.what} {','.join(map(str, s.ranks if s.what == 'rank' else s.nodes))} "
                                          f"({','.join(s.hosts)}) {s.verdict}" for s in flagged))
                 if flagged else "OK: no rank or node flagged")
    return "\n".join(lines)
