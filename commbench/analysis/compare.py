"""Regression verdicts between a baseline and one or more candidates (in time order: nightly
runs), from the jobs that measured each point (commbench.analysis.verdicts owns the statistics).

Points are matched on KEY. A side is a run folder or a sweep; every job of every run under it
that measured a point is one measurement of it: a folder of `run --repeat N` holds N jobs, and
the per-job folders of older sweeps (<label>.1 .. <label>.N) count as one job each. The verdicts
and the exit code are the last candidate's; with several candidates each point also has its
history (every candidate against the baseline). What differs between the sides' run.json
(versions, hosts, world size, launcher, NCCL_*/OMPI_* environment) is listed above the verdicts.

Exit codes (commbench compare): 0 no regression, 1 a regression (or, with --strict, an
inconclusive point), 2 unusable input.

The outputs are commbench.analysis.compare_formats'. Every string in them may come from someone
else's result folder (names, versions, hosts, environment, folder names): text and JUnit show it
escaped on one line (`terminal.inline`), markdown with every ASCII punctuation character
backslash-escaped (`_md`: it lands in CI job summaries, where a link, image, HTML or emphasis must
not be injected), JSON strictly valid (null for a number that is not finite); the HTML page escapes
its own (commbench.analysis.report).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from commbench.analysis import conditions, verdicts
from commbench.folder.load import load_run, refuse_repeats
from commbench.folder.files import run_dirs
from commbench.analysis.verdicts import MIN_JOBS
from commbench.errors import FAILED, NO_VERDICT, OK, InputError

KEY = ["collective", "backend", "algorithm", "dtype", "op", "size_bytes", "world_size", "in_place"]
FEW_SAMPLES = 5  # a job with fewer samples is summarised by them all the same; the note says so


@dataclass
class Side:
    """One result set: per point, its jobs' samples and the share of the host's cores that other
    processes took while each job ran (None: not recorded)."""
    path: str
    points: dict[tuple, list[tuple[np.ndarray, float | None]]]
    metas: list[dict]


def _plain(v):
    v = v.item() if hasattr(v, "item") else v
    return None if isinstance(v, float) and v != v else v  # NaN (an importer's empty field): None, which matches


def _background(meta: dict) -> dict[tuple[int, int], float]:
    """(point, job) -> share of the host's cores others took during that job (run.json `jobs`);
    an entry that does not say it (or not as numbers) is left out: unknown."""
    out = {}
    jobs = meta.get("jobs")
    for launch in jobs if isinstance(jobs, list) else []:
        try:
            share = float(launch["background_cores"]) / float(launch["cpu_count"])
            job, points = int(launch["job"]), [int(p) for p in launch.get("points") or []]
        except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError):
            continue
        if math.isfinite(share) and share >= 0:
            out.update({(point, job): share for point in points})
    return out


def load_side(path: str | Path) -> Side:
    """Every job of every run under path. A run found twice (the same run id in two folders: a copy)
    is refused: its jobs would count as independent measurements (three copies of one run gave
    intervals of zero width and p = 0)."""
    points: dict[tuple, dict[tuple, list]] = {}
    metas, busy, found = [], {}, []
    for d in run_dirs(path):
        rows, meta = load_run(d, samples=True)
        found += [(run_id, d) for run_id in sorted(set(rows.run_id.astype(str)))]
        if meta.get("kind") == "ab":
            raise InputError(f"{str(d)!r} holds a `commbench ab` comparison (its verdicts: ab.json), not a run to "
                             "compare: compare takes the folders of commbench run or sweep")
        timers = sorted(set(rows["timer"].dropna().astype(str))) if "timer" in rows else []
        metas.append(dict(meta, timers=timers))  # the loops that timed it: a change of loop is a context change
        background = _background(meta)
        for r in rows[KEY + ["point", "job", "sample_values"]].itertuples(index=False):
            key = tuple(_plain(getattr(r, k)) for k in KEY)
            job = (str(d), int(r.job))
            points.setdefault(key, {}).setdefault(job, []).append(np.asarray(r.sample_values, float))
            busy[key, job] = background.get((int(r.point), int(r.job)))
    refuse_repeats(found, f"a copy under {str(path)!r} would count as more jobs")
    return Side(str(path), {key: [(np.concatenate(parts), busy[key, job]) for job, parts in jobs.items()]
                            for key, jobs in points.items()}, metas)


@dataclass
class Verdict:
    key: dict
    verdict: str
    baseline_us: float  # geometric mean of the baseline's job medians
    candidate_us: float
    ratio: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    jobs: tuple[int, int]
    samples: tuple[int, int]
    repeat_needed: int | None = None
    note: str = ""
    history: list[dict] = field(default_factory=list)  # every candidate in time order (this one last)
    baseline_level: tuple | None = None  # the baseline's figure and its 95 % interval (verdicts.level)
    title: str = ""  # the point's name where the key alone does not say it (commbench ab: what differs)

    def name(self) -> str:
        return self.title or point_name(self.key)


def point_name(k: dict) -> str:
    mode = "in-place" if k["in_place"] else "out-of-place"
    op = "" if k["op"] in ("none", None) else f" {k['op']}"
    return (f"{k['collective']} {k['algorithm']} {k['backend']} {k['dtype']}{op} {mode} "
            f"{k['size_bytes']} B x{k['world_size']}")


@dataclass
class Comparison:
    UNIT = "jobs"  # what a point's counts are: a side's jobs (here), or the A/B pairs (commbench ab)
    INTERVAL = "95% CI"
    TITLE = "commbench compare"

    baseline: str
    candidate: str  # the last candidate: the verdicts are its
    threshold: float
    verdicts: list[Verdict] = field(default_factory=list)
    missing: list[dict] = field(default_factory=list)  # in the baseline, not in the candidate
    new: list[dict] = field(default_factory=list)  # in the candidate only
    candidates: list[str] = field(default_factory=list)  # all, in time order
    context: list[list[conditions.Change]] = field(default_factory=list)  # per candidate: what differs
    strict: bool = False
    allow_missing: bool = False  # points of the baseline the candidate lacks do not fail the gate

    def count(self, verdict: str) -> int:
        return sum(v.verdict == verdict for v in self.verdicts)

    @property
    def regressed(self) -> bool:
        return self.count("regression") > 0

    @property
    def missing_fails(self) -> bool:
        return bool(self.missing) and not self.allow_missing

    @property
    def no_verdict(self) -> bool:
        """No point could be judged: every one inconclusive (or none compared). A gate must not pass on it."""
        return all(v.verdict == "inconclusive" for v in self.verdicts)

    @property
    def exit_code(self) -> int:
        """1 on a regression, a missing point (without --allow-missing) or, with --strict, an inconclusive one;
        else 2 when no point could be judged ("no verdict"); 0 otherwise."""
        if self.regressed or (self.strict and self.count("inconclusive") > 0) or self.missing_fails:
            return FAILED
        return NO_VERDICT if self.no_verdict else OK

    def jobs_text(self) -> str:
        def span(values):
            lo, hi = min(values), max(values)
            return str(lo) if lo == hi else f"{lo}-{hi}"
        return (f"jobs per point: baseline {span([v.jobs[0] for v in self.verdicts])}, "
                f"candidate {span([v.jobs[1] for v in self.verdicts])}")

    def counts_text(self) -> str:
        def many(kind):
            n = self.count(kind)
            return f"{n} {kind}{'' if n == 1 else 's'}"
        return (f"{many('regression')}, {many('improvement')}, "
                f"{self.count('unchanged')} unchanged, {self.count('inconclusive')} inconclusive")

    def threshold_text(self) -> str:
        """The threshold as given, to 3 figures: 5%, 0.05%, 12.5% (not 0% for 0.05%)."""
        return f"{self.threshold * 100:.3g}%"

    def summary(self) -> str:
        return (f"{self.counts_text()}, {len(self.missing)} missing, {len(self.new)} new "
                f"(threshold {self.threshold_text()}; {self.jobs_text()})")

    def advice(self) -> list[str]:
        """What would settle the inconclusive points."""
        out = []
        open_ = [v for v in self.verdicts if v.verdict == "inconclusive"]
        few = [v for v in open_ if min(v.jobs) < MIN_JOBS]
        if few:
            need = max(v.repeat_needed or MIN_JOBS for v in few)
            out.append(f"{len(few)} inconclusive with fewer than {MIN_JOBS} jobs on a side: measure both sides with "
                       f"--repeat {need} or more (suites: repeat: {need})")
        wide = [v for v in open_ if min(v.jobs) >= MIN_JOBS and "other work" not in v.note]
        settle = [v.repeat_needed for v in wide if v.repeat_needed]
        if wide:
            text = f"{len(wide)} inconclusive with an interval straddling {1 + self.threshold:.6g}"
            if settle:
                text += f": --repeat {max(settle)} on both sides would likely settle {len(settle)} of them"
            if len(settle) < len(wide):
                text += (f"{';' if settle else ':'} {len(wide) - len(settle)} would need more than --repeat "
                         f"{verdicts.MAX_REPEAT} (a ratio close to the threshold, or jobs that vary too much)")
            out.append(text)
        busy = [v for v in open_ if "other work" in v.note]
        if busy:
            out.append(f"{len(busy)} inconclusive because the slower side ran beside other processes' work: "
                       "measure again on a quieter machine")
        reach = self.detectable()
        if reach:
            out.append(f"with these jobs' spread only a slowdown of about {np.median(reach) - 1:.0%} or more can be "
                       f"called a regression (median over {len(reach)} points; {min(reach) - 1:.0%} at the steadiest "
                       "point): smaller ones go unseen")
        if self.strict and open_:
            out.append("--strict: inconclusive points fail the comparison")
        if self.missing_fails:
            out.append(f"{len(self.missing)} point(s) of the baseline missing in the candidate fail the comparison "
                       "(a point that was not measured is no point that did not regress): measure them, or "
                       "--allow-missing")
        return out + self.no_verdict_advice()

    def no_verdict_advice(self) -> list[str]:
        """The line that says why the exit is 2, when no point could be judged."""
        if self.exit_code != NO_VERDICT:
            return []
        return [f"no verdict: none of the {len(self.verdicts)} point(s) could be judged, so the comparison neither "
                "passes nor fails (exit 2)"]

    def detectable(self) -> list[float]:
        """Per point with an interval: the smallest candidate / baseline ratio that the same jobs'
        spread would call a regression, (1 + threshold) x the interval's upper half-width."""
        return [(1 + self.threshold) * v.ci_high / v.ratio for v in self.verdicts
                if v.ci_high is not None and v.ratio > 0 and math.isfinite(v.ci_high / v.ratio)]


def _side_jobs(jobs) -> tuple[np.ndarray, float | None, int, bool]:
    """Job medians, mean background share (None if any job's is unknown), samples, few samples."""
    medians = verdicts.job_medians([s for s, _ in jobs])
    shares = [b for _, b in jobs]
    background = None if any(b is None for b in shares) else float(np.mean(shares))
    return medians, background, sum(len(s) for s, _ in jobs), min(len(s) for s, _ in jobs) < FEW_SAMPLES


def unique_jobs(jobs) -> list:
    """The jobs less those whose samples (two or more) are an earlier job's, value for value: copies,
    which the interval would count as independent measurements (narrowing it to nothing)."""
    seen, out = set(), []
    for job in jobs:
        digest = np.asarray(job[0], float).tobytes()
        if len(job[0]) >= 2 and digest in seen:
            continue
        seen.add(digest)
        out.append(job)
    return out


def _judge(key: tuple, base_jobs, cand_jobs, threshold: float) -> Verdict:
    copies = [f"{len(jobs) - len(unique_jobs(jobs))} job(s) of the {side} duplicated (identical samples): counted once"
              for side, jobs in (("baseline", base_jobs), ("candidate", cand_jobs)) if len(unique_jobs(jobs)) < len(jobs)]
    base_jobs, cand_jobs = unique_jobs(base_jobs), unique_jobs(cand_jobs)
    bm, bb, bs, bfew = _side_jobs(base_jobs)
    cm, cb, cs, cfew = _side_jobs(cand_jobs)
    j = verdicts.judge(bm, cm, threshold, (bb, cb))
    note = "; ".join(n for n in (j.note, "few samples per job" if bfew or cfew else "", *copies) if n)
    return Verdict({k: _plain(v) for k, v in zip(KEY, key, strict=True)}, j.verdict, verdicts.level(bm)[0],
                   verdicts.level(cm)[0], j.ratio, j.ci_low, j.ci_high, j.p_value, j.jobs, (bs, cs),
                   j.repeat_needed, note)


def compare(baseline: str | Path, candidates: str | Path | list, threshold: float = 0.05,
            strict: bool = False, allow_missing: bool = False) -> Comparison:
    """Verdicts of the last candidate against the baseline, with each point's history over every
    candidate (in the order given). allow_missing: baseline points the last candidate lacks do not
    fail it (they are listed either way)."""
    if not 0 < threshold < 1:
        raise InputError(f"invalid threshold {threshold}: give a fraction between 0 and 1 (e.g. 5%)")
    candidates = [candidates] if isinstance(candidates, (str, Path)) else list(candidates)
    if not candidates:
        raise InputError("give a candidate result folder after the baseline")
    base = load_side(baseline)
    same = [c for c in candidates if os.path.realpath(c) == os.path.realpath(baseline)]
    if same:
        raise InputError(f"the candidate {str(same[0])!r} is the baseline itself: compare two different result folders")
    sides = [load_side(c) for c in candidates]
    last = sides[-1]
    result = Comparison(str(baseline), last.path, threshold, candidates=[s.path for s in sides],
                        context=[conditions.changes(base.metas, s.metas) for s in sides], strict=strict,
                        allow_missing=allow_missing)
    for key, base_jobs in base.points.items():
        if key not in last.points:
            result.missing.append({k: _plain(v) for k, v in zip(KEY, key, strict=True)})
            continue
        history = [_judge(key, base_jobs, side.points[key], threshold) if key in side.points else None
                   for side in sides]
        v = history[-1]
        v.history = [{"candidate": side.path, **({} if h is None else {
            "verdict": h.verdict, "ratio": h.ratio, "ci_low": h.ci_low, "ci_high": h.ci_high, "jobs": list(h.jobs),
            "level": verdicts.level(verdicts.job_medians([s for s, _ in side.points[key]]))})}
                     for side, h in zip(sides, history, strict=True)]
        v.baseline_level = verdicts.level(verdicts.job_medians([s for s, _ in base_jobs]))
        result.verdicts.append(v)
    result.new = [{k: _plain(v) for k, v in zip(KEY, key, strict=True)}
                  for key in last.points if key not in base.points]
    if not result.verdicts:
        raise InputError("no point of the baseline matches a point of the candidate")
    return result
