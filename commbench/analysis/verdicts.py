"""Verdicts for one point: is the candidate slower than the baseline, beyond the threshold?

The unit is the job (one launch of the ranks; `commbench run --repeat N` makes N of them): every
iteration of a job shares its placement, caches and neighbours, so per-iteration samples are not
independent and a test on them calls two jobs that merely landed differently a change (p-values
of 1e-47 between two runs of the same code). Each job is summarised by the median of its samples
(its own noise stays inside that median); each side's figure is the geometric mean of its jobs'
medians; the ratio candidate / baseline, its 95 % confidence interval and the p-value come from
Welch's t on the logarithms of the job medians, i.e. from the spread between jobs.

Why not a hierarchical bootstrap (resample jobs, then samples within them): with 3 jobs a side
its percentile interval held the true ratio in 87-89 % of simulated pairs instead of 95 %
(job spread 3 %, 100 heavy-tailed samples a job); Welch's interval held it in 95-97 %.

  regression    the interval lies above 1 + threshold
  improvement   the interval lies below 1 - threshold
  unchanged     the interval's top is at or below 1 + threshold (no slowdown beyond it)
  inconclusive  fewer than MIN_JOBS jobs on a side, or the interval straddles 1 + threshold, or
                the slower side ran beside more of other processes' work than the other side
                (DISTURBED of the host's cores more): the data cannot decide
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtr, stdtrit  # Student's t: cdf, its inverse (scipy.stats costs 1 s of import)

from commbench.errors import InputError
from commbench.options import MAX_REPEAT, MIN_JOBS  # the most jobs a settle estimate may ask for; the fewest judged
CONFIDENCE = 0.95
DISTURBED = 0.10  # share of the host's cores that other work took more on the slower side


@dataclass
class Judgement:
    verdict: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    jobs: tuple[int, int]
    repeat_needed: int | None = None  # inconclusive: jobs a side that would likely settle it
    note: str = ""


def job_medians(jobs: list[np.ndarray]) -> np.ndarray:
    return np.array([float(np.median(j)) for j in jobs])


def _logs(medians) -> np.ndarray:
    """The logarithms of a side's job medians: one or more finite times > 0 (a result folder's
    times are checked when it is loaded; this guards the functions' own callers)."""
    values = np.asarray(medians, dtype=float).ravel()
    if values.size == 0 or not np.all(np.isfinite(values) & (values > 0)):
        raise InputError(f"job medians must be one or more finite times > 0, not {values.tolist()[:5]}")
    return np.log(values)


def _exp(x: float) -> float:
    """exp without an overflow warning: a ratio past float range (times 1e-300 against 1e300) is inf."""
    return math.exp(x) if x < 709 else math.inf


def level(medians: np.ndarray) -> tuple[float, float | None, float | None]:
    """A side's figure (geometric mean of its job medians) and its 95 % interval (two or more jobs)."""
    logs = _logs(medians)
    mid = float(np.exp(logs.mean()))
    if len(logs) < 2:
        return mid, None, None
    half = stdtrit(len(logs) - 1, 0.5 + CONFIDENCE / 2) * logs.std(ddof=1) / math.sqrt(len(logs))
    return mid, _exp(logs.mean() - half), _exp(logs.mean() + half)


def _welch(lb: np.ndarray, lc: np.ndarray) -> tuple[float, float, float]:
    """Difference of mean logs (candidate - baseline): its interval's half-width and the two-sided p."""
    d = float(lc.mean() - lb.mean())
    vb, vc = float(lb.var(ddof=1)) / len(lb), float(lc.var(ddof=1)) / len(lc)
    se = math.sqrt(vb + vc)  # > 0: judge leaves sides without spread inconclusive
    den = vb ** 2 / (len(lb) - 1) + vc ** 2 / (len(lc) - 1)
    df = (vb + vc) ** 2 / den if den > 0 else len(lb) + len(lc) - 2  # spreads so small their squares vanish
    return d, float(stdtrit(df, 0.5 + CONFIDENCE / 2) * se), float(2 * stdtr(df, -abs(d) / se))


def repeat_to_settle(lb: np.ndarray, lc: np.ndarray, threshold: float) -> int | None:
    """Jobs a side (both sides alike) after which the interval would likely clear 1 + threshold,
    if the observed ratio and between-job spreads hold; None when that is more than MAX_REPEAT
    (a ratio close to the threshold, or a wide spread) or a side has one job (no spread known)."""
    if min(len(lb), len(lc)) < 2:
        return None
    margin = abs(float(lc.mean() - lb.mean()) - math.log1p(threshold))
    vb, vc = float(lb.var(ddof=1)), float(lc.var(ddof=1))
    more = max(len(lb), len(lc)) + 1  # at least one job more than now
    for n in range(MIN_JOBS, MAX_REPEAT + 1):
        if vb + vc == 0:
            return max(n, more) if max(n, more) <= MAX_REPEAT else None
        squares = vb ** 2 + vc ** 2
        df = (vb + vc) ** 2 / (squares / (n - 1)) if squares > 0 else 2 * n - 2
        if stdtrit(df, 0.5 + CONFIDENCE / 2) * math.sqrt((vb + vc) / n) < margin:
            return max(n, more) if max(n, more) <= MAX_REPEAT else None
    return None


def judge(base: np.ndarray, cand: np.ndarray, threshold: float,
          background: tuple[float | None, float | None] = (None, None)) -> Judgement:
    """The verdict for one point from each side's job medians. background: each side's mean
    share of the host's cores that other processes took while its jobs ran (None: unknown)."""
    lb, lc = _logs(base), _logs(cand)
    ratio = _exp(float(lc.mean() - lb.mean()))
    jobs = (len(lb), len(lc))
    if min(jobs) < 2:
        return Judgement("inconclusive", ratio, None, None, None, jobs, None,
                         f"{min(jobs)} job on a side: run both with --repeat {MIN_JOBS} or more")
    if min(float(lb.var()), float(lc.var())) == 0:  # measured jobs never agree to the last digit: copies
        return Judgement("inconclusive", ratio, None, None, None, jobs, None,
                         "a side's jobs have identical medians (copies?): no spread to build an interval on")
    d, half, p = _welch(lb, lc)
    low, high = _exp(d - half), _exp(d + half)
    if min(jobs) < MIN_JOBS:
        need = max(MIN_JOBS, repeat_to_settle(lb, lc, threshold) or MIN_JOBS)
        return Judgement("inconclusive", ratio, low, high, p, jobs, need,
                         f"{min(jobs)} jobs on a side: run both with --repeat {need} or more")
    up, down = 1 + threshold, 1 - threshold
    if low > up:
        verdict, slower = "regression", 1
    elif high < down:
        verdict, slower = "improvement", 0
    elif high <= up:
        return Judgement("unchanged", ratio, low, high, p, jobs, note="may be faster" if low < down else "")
    else:
        need = repeat_to_settle(lb, lc, threshold)
        return Judgement("inconclusive", ratio, low, high, p, jobs, need,
                         f"interval straddles {up:.2f}: " + (f"--repeat {need} would likely settle it" if need else
                                                              f"not even --repeat {MAX_REPEAT} would likely settle it"))
    busy = background[slower], background[1 - slower]
    if busy[0] is not None and (busy[0] - (busy[1] or 0.0)) > DISTURBED:
        side = ("baseline", "candidate")[slower]
        return Judgement("inconclusive", ratio, low, high, p, jobs, None,
                         f"the {side} ran beside other work ({busy[0]:.0%} of the host's cores, "
                         f"the other side {busy[1] or 0:.0%}): measure again on a quieter machine")
    return Judgement(verdict, ratio, low, high, p, jobs)
