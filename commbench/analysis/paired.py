"""Paired verdicts for `commbench ab`: is side B slower than side A, point by point, when both
were measured alternately?

The unit is the pair: a turn of A and a turn of B adjacent in time (or, where the sides could only
be launched one after the other, A's and B's launches of one round). Whatever state the machine is
in hits both halves of a pair, so their log-ratio d = log(B / A) (each half the median of its
samples) carries the difference between the sides and little of the machine's drift; a pair in
which the machine changed state between its halves is an outlier.

Estimate and interval: the median of the d's and the sign test's distribution-free interval for it
(order statistics; valid for any continuous distribution of d, heavy tails and asymmetry
included: a state flip moves one pair, never the interval's ends by more than one rank). Under
A/A the turn order alternates (ABBA), so d is symmetric about 0 and the sign test's level is exact.

Launches: where the sides run in separate jobs, each job's library places its own buffers (Open
MPI's reduce-scatter reduces through temporary buffers) where that launch's luck has it; two launches
of identical code differed by up to 18 % at some points on this project's VM, persistently, with
tight intervals. Pairing cannot cancel that, so such comparisons use several pairs of launches and
give each point's pairs in blocks, one per pair of launches: a verdict must hold in every block (an
intersection-union test, whose p-value is the largest of the blocks': valid, and a launch's luck
must repeat with the same sign in every block to fake a verdict), and the interval is the hull of
the blocks' intervals (a point that moves between launches shows it, and says so).

Sequential looks: verdicts are taken after rounds 1, 2, 4, ... and the last round allowed (`looks`;
from a first round later than 1 where every point must be measured that long), and a point decided
at a look is measured no more. The false-regression rate over the
whole comparison is held at ALPHA by splitting it over the looks (ALPHA / L at each of at most L
looks, a union bound: however the looks are used, their chances add up to ALPHA) and, within a
look, over the points by Holm's step-down (a point already called a regression counts as
rejected, one settled otherwise as not). Each point's interval is the one whose tails are ALPHA / L
each: a regression (Holm-rejected) always has its interval above 1 + threshold; the converse
alone (one point's interval, uncorrected for the others) is not enough.

  regression    the sign test of "median ratio <= 1 + threshold" is rejected, Holm over the points
  improvement   the same for "median ratio >= 1 - threshold"
  unchanged     the interval lies within 1 -/+ threshold; at the last look, its top at or below
                1 + threshold (no regression; "may be faster" when its bottom is below 1 - threshold)
  inconclusive  none of these by the last look (the budget ran out, or the ratio sits at the threshold)

A point is settled (measured no more) by a regression, an improvement or an interval within the band;
one that may be faster is measured on, so that it can become an improvement.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

ALPHA = 0.05  # the chance that any point of a comparison is called a regression it is not


def looks(max_rounds: int, first: int = 1) -> tuple[int, ...]:
    """The rounds after which verdicts are taken: first, twice that, ... and the last round allowed."""
    out, r = [], max(1, min(first, max_rounds))
    while r < max_rounds:
        out.append(r)
        r *= 2
    return tuple(out + [max_rounds])


def pair_logs(a: dict, b: dict) -> np.ndarray:
    """log(B / A) per pair, from each side's samples keyed by pair (each half: the median of its
    samples); pairs one side lacks are left out."""
    keys = sorted(set(a) & set(b))
    return np.array([math.log(float(np.median(b[k])) / float(np.median(a[k]))) for k in keys], dtype=float)


def lower_tail(n: int) -> list[int]:
    """2^n P(Binomial(n, 1/2) <= j) for j = 0 .. n, in integers: the sign test's tails, exactly."""
    return list(itertools.accumulate(math.comb(n, j) for j in range(n + 1)))


def p_above(d: np.ndarray, c: float) -> float:
    """One-sided sign test of H0 "median(d) <= c": P(Binomial(n, 1/2) >= the count of d above c)."""
    n, above = len(d), int(np.sum(d > c))
    # P(X >= above) = P(X <= n - above), the distribution being symmetric
    return float(Fraction(lower_tail(n)[n - above], 2**n))


def p_below(d: np.ndarray, c: float) -> float:
    """One-sided sign test of H0 "median(d) >= c"."""
    return p_above(-np.asarray(d), -c)


def interval(d: np.ndarray, tail: float) -> tuple[float, float]:
    """The sign test's interval for the median of d with `tail` at most on each side: order
    statistics d_(k) .. d_(n-k+1), k the largest with P(Binomial(n, 1/2) <= k - 1) <= tail
    (-inf .. inf when even k = 1 is too narrow: too few pairs)."""
    n = len(d)
    most = Fraction(tail) * 2**n
    k = sum(c <= most for c in lower_tail(n)[:n])  # the cdf rises: how many j < n have cdf(j) <= tail
    if k < 1:
        return -math.inf, math.inf
    s = np.sort(d)
    return float(s[k - 1]), float(s[n - k])


def holm(p: list[float], alpha: float) -> tuple[list[bool], list[float]]:
    """Holm's step-down at level alpha: which hypotheses are rejected, and their adjusted p-values."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    rejected, adjusted = [False] * m, [1.0] * m
    running, stop = 0.0, False
    for j, i in enumerate(order):
        running = max(running, min(1.0, (m - j) * p[i]))
        adjusted[i] = running
        if not stop and p[i] <= alpha / (m - j):
            rejected[i] = True
        else:
            stop = True
    return rejected, adjusted


@dataclass
class PointVerdict:
    verdict: str  # regression, improvement, unchanged, inconclusive (undecided before the last look)
    ratio: float  # B / A: exp of the median pair log-ratio
    low: float | None  # the interval (ratio units); None: too few pairs for one
    high: float | None
    p_value: float | None  # the regression test's p, adjusted for the points (Holm) and the looks
    pairs: int
    look: int  # the look (1..L) that decided it, or the last taken
    note: str = ""

    @property
    def settled(self) -> bool:
        return self.verdict != "inconclusive"

    def resolution(self) -> float | None:
        """The interval's half-width (on the log scale, as a factor less one): about the smallest
        difference these pairs could tell from none."""
        return resolution(self.low, self.high)

    def detectable(self, threshold: float) -> float | None:
        """The smallest slowdown these pairs would have called a regression: a true ratio R puts
        the interval's low at R x low / ratio, above 1 + threshold once R > (1 + threshold) x ratio / low."""
        if self.low is None or self.low <= 0:
            return None
        return (1 + threshold) * self.ratio / self.low - 1


def resolution(low: float | None, high: float | None) -> float | None:
    """An interval's half-width on the log scale as a factor less one: sqrt(high / low) - 1."""
    if low is None or high is None or not 0 < low <= high or not math.isfinite(high):
        return None
    return math.sqrt(high / low) - 1


def _exp(x: float) -> float | None:
    return None if not math.isfinite(x) else math.exp(min(x, 700.0))


class Gate:
    """The sequential verdicts of one comparison: `look` after each round in `looks`; a point
    settled at a look keeps its verdict."""

    def __init__(self, points: int, threshold: float, max_rounds: int, alpha: float = ALPHA, first: int = 1):
        if not 0 < threshold < 1:
            raise ValueError(f"threshold {threshold} is not a fraction between 0 and 1")
        self.threshold, self.alpha = threshold, alpha
        self.looks = looks(max_rounds, first)
        self.tail = alpha / len(self.looks)  # each look's share of alpha
        self.verdicts: list[PointVerdict | None] = [None] * points
        self.taken = 0  # looks taken

    @property
    def open(self) -> list[int]:
        """The points not settled yet."""
        return [i for i, v in enumerate(self.verdicts) if v is None or not v.settled]

    def look(self, blocks: list[list[np.ndarray]], last: bool = False) -> list[PointVerdict]:
        """Verdicts from each point's pair log-ratios so far, in blocks: one per pair of launches that
        measured them (a settled point's are not looked at again). A verdict must hold in every
        block (an intersection-union test: its p-value is the largest of the blocks'); the interval
        shown is the hull of the blocks' intervals. At most len(self.looks) looks: their alpha shares
        must add up to alpha. last: no more pairs will come (a point that may be faster is then
        unchanged)."""
        if self.taken >= len(self.looks):
            raise RuntimeError(f"a comparison takes at most {len(self.looks)} looks")
        self.taken += 1
        up, down = math.log1p(self.threshold), math.log1p(-self.threshold)
        fresh = set(self.open)
        blocks = [[np.asarray(b, dtype=float) for b in point] for point in blocks]
        family = {"regression": [], "improvement": []}
        for i, v in enumerate(self.verdicts):
            for kind, test, c in (("regression", p_above, up), ("improvement", p_below, down)):
                p = max((test(b, c) for b in blocks[i]), default=1.0)
                if i not in fresh:
                    p = 0.0 if v.verdict == kind else 1.0  # rejected before; settled otherwise: never rejected later
                family[kind].append(p)
        reject = {kind: holm(p, self.tail) for kind, p in family.items()}
        for i in sorted(fresh):
            d = np.concatenate(blocks[i]) if blocks[i] else np.array([])
            ends = [interval(b, self.tail) if len(b) else (-math.inf, math.inf) for b in blocks[i]] or [(-math.inf, math.inf)]
            lo, hi = min(e[0] for e in ends), max(e[1] for e in ends)
            ratio = _exp(float(np.median(d))) if len(d) else None
            p_reg = min(1.0, reject["regression"][1][i] * len(self.looks))
            args = dict(ratio=ratio if ratio is not None else math.nan, low=_exp(lo), high=_exp(hi),
                        p_value=p_reg, pairs=len(d), look=self.taken)
            apart = len(ends) > 1 and max(e[0] for e in ends) > min(e[1] for e in ends)  # blocks' intervals disjoint
            if reject["regression"][0][i]:
                self.verdicts[i] = PointVerdict("regression", **args)
            elif reject["improvement"][0][i]:
                self.verdicts[i] = PointVerdict("improvement", **args)
            elif hi <= up and (lo >= down or last):
                self.verdicts[i] = PointVerdict("unchanged", **args, note="may be faster" if lo < down else "")
            else:
                note = ("too few pairs for an interval" if not math.isfinite(lo) else
                        "the launches disagree (each pair of launches finds another ratio: where the library's own "
                        "buffers lie differs between launches)" if apart else
                        f"interval straddles {1 + self.threshold:.2f}" if lo <= up < hi else
                        f"interval straddles {1 - self.threshold:.2f}" if hi <= up else
                        f"above {1 + self.threshold:.2f} alone, not after correcting for {len(blocks)} points")
                self.verdicts[i] = PointVerdict("inconclusive", **args, note=note)
        return list(self.verdicts)
