"""commbench.analysis.paired: the sign test's interval and p-values, Holm, the looks, and the
sequential gate's error rates on simulated pairs (heavy-tailed, with state flips)."""

import math

import numpy as np
import pytest
from scipy import stats

from commbench.analysis import paired


def test_looks_double_from_the_first_round_and_end_at_the_last():
    assert paired.looks(32) == (1, 2, 4, 8, 16, 32)
    assert paired.looks(5) == (1, 2, 4, 5)
    assert paired.looks(1) == (1,)
    assert paired.looks(8, first=8) == (8,)
    assert paired.looks(32, first=3) == (3, 6, 12, 24, 32)


def test_sign_p_values_are_the_binomial_tails():
    d = np.array([0.1, 0.2, 0.3, 0.4])
    assert paired.p_above(d, 0.0) == pytest.approx(0.5 ** 4)
    assert paired.p_above(d, 0.25) == pytest.approx(stats.binom.sf(1, 4, 0.5))  # 2 of 4 above
    assert paired.p_below(d, 0.5) == pytest.approx(0.5 ** 4)
    assert paired.p_above(np.array([]), 0.0) == 1.0


@pytest.mark.parametrize("n", [0, 1, 7, 40, 301])
def test_tails_are_exact_integers_and_match_scipy(n):
    tail = paired.lower_tail(n)
    assert tail[-1] == 2**n and all(a < b for a, b in zip(tail, tail[1:]))
    cdf = stats.binom.cdf(np.arange(n + 1), n, 0.5)
    assert np.allclose(np.array(tail, dtype=float) / 2**n, cdf, rtol=1e-12, atol=0)
    d = np.linspace(-1.0, 1.0, n)
    for c in (-2.0, -0.5, 0.0, 0.3, 2.0):  # none above, some, all
        assert paired.p_above(d, c) == pytest.approx(stats.binom.sf(int(np.sum(d > c)) - 1, n, 0.5) if n else 1.0,
                                                     rel=1e-12, abs=0)
    for t in (0.005, 0.025, 0.1):  # the largest k (at most n) with P(X <= k - 1) <= t, from scipy's cdf
        k = max([j + 1 for j in range(n) if cdf[j] <= t * (1 + 1e-12)], default=0)
        assert paired.interval(np.arange(float(n)), t) == ((k - 1.0, n - k + 0.0) if k else (-math.inf, math.inf))


def test_interval_is_order_statistics_and_infinite_when_too_few_pairs():
    d = np.arange(1.0, 21.0)  # 20 pairs
    lo, hi = paired.interval(d, 0.025)
    k = max(j for j in range(1, 11) if stats.binom.cdf(j - 1, 20, 0.5) <= 0.025)
    assert (lo, hi) == (d[k - 1], d[20 - k])
    assert paired.interval(np.array([1.0, 2.0, 3.0]), 0.01) == (-math.inf, math.inf)  # 2^-3 > 0.01


def test_interval_covers_the_median_as_promised_for_skewed_heavy_tailed_pairs():
    rng = np.random.default_rng(1)
    tail, hits, trials = 0.025, 0, 2000
    for _ in range(trials):
        d = rng.standard_t(2, 30) ** 3  # median 0, skewed tails
        lo, hi = paired.interval(d, tail)
        hits += lo <= 0 <= hi
    assert hits / trials >= 1 - 2 * tail - 0.01


def test_holm_rejects_step_down_and_adjusts():
    rejected, adjusted = paired.holm([0.01, 0.04, 0.03, 0.005], 0.05)
    assert rejected == [True, False, False, True]
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])


def _simulate(gate: paired.Gate, ratios, spread, rng, pairs=8, flips=0.05):
    """Rounds of pairs until the gate is done: log-ratios around log(ratio), t(3) noise, and a
    share of pairs in which the machine changed state between the halves (a 2x outlier)."""
    logs = [[] for _ in ratios]
    for r in range(1, gate.looks[-1] + 1):
        for i in gate.open:
            d = math.log(ratios[i]) + spread * rng.standard_t(3, pairs)
            flip = rng.random(pairs) < flips
            d[flip] += rng.choice([-1, 1], flip.sum()) * math.log(2)
            logs[i] += d.tolist()
        if r in gate.looks:
            gate.look([[np.array(x)] for x in logs], last=r == gate.looks[-1])
        if not gate.open:
            break
    return gate.verdicts


def test_identical_sides_rarely_give_any_regression_over_many_points_and_looks():
    rng = np.random.default_rng(7)
    bad = 0
    for _ in range(200):
        gate = paired.Gate(21, 0.05, 32)
        verdicts = _simulate(gate, [1.0] * 21, 0.03, rng)
        bad += any(v.verdict == "regression" for v in verdicts)
    assert bad / 200 <= paired.ALPHA  # in fact far fewer: the threshold is 5 % away


def test_a_point_at_the_threshold_is_held_to_alpha_over_the_whole_comparison():
    rng = np.random.default_rng(3)
    bad = 0
    for _ in range(300):
        gate = paired.Gate(1, 0.05, 32)
        bad += _simulate(gate, [1.05], 0.03, rng, flips=0.0)[0].verdict == "regression"
    assert bad / 300 <= paired.ALPHA + 0.02  # the worst case: the true ratio on the boundary


def test_ten_percent_slower_is_called_a_regression_at_every_point():
    rng = np.random.default_rng(11)
    verdicts = _simulate(paired.Gate(21, 0.05, 32), [1.10] * 21, 0.03, rng)
    assert [v.verdict for v in verdicts] == ["regression"] * 21
    assert all(v.low > 1.05 for v in verdicts)  # a regression's interval is above the threshold


def test_faster_points_become_improvements_not_unchanged_and_equal_ones_unchanged():
    rng = np.random.default_rng(5)
    verdicts = _simulate(paired.Gate(3, 0.05, 32), [0.80, 1.0, 1.20], 0.03, rng)
    assert [v.verdict for v in verdicts] == ["improvement", "unchanged", "regression"]
    assert 0.95 <= verdicts[1].low and verdicts[1].high <= 1.05


def test_a_point_that_may_be_faster_is_measured_on_and_unchanged_at_the_last_look():
    gate = paired.Gate(1, 0.05, 2)
    d = np.log(np.array([0.93, 0.96, 0.94, 1.02, 0.95, 0.99, 0.92, 0.97]))
    gate.look([[d]])
    assert gate.verdicts[0].verdict == "inconclusive" and gate.open == [0]
    gate.look([[d]], last=True)
    assert (gate.verdicts[0].verdict, gate.verdicts[0].note) == ("unchanged", "may be faster")


def test_a_settled_point_keeps_its_verdict_and_looks_are_limited():
    gate = paired.Gate(2, 0.05, 2)
    up = np.full(20, math.log(1.3))
    gate.look([[up], [np.zeros(20)]])
    assert [v.verdict for v in gate.verdicts] == ["regression", "unchanged"]
    gate.look([[np.zeros(20)], [up]])  # new data for settled points is not looked at
    assert [v.verdict for v in gate.verdicts] == ["regression", "unchanged"]
    with pytest.raises(RuntimeError):
        gate.look([[up], [up]])


def test_a_verdict_must_hold_in_every_pair_of_launches():
    """One launch pair's luck (+15 %) alone is no regression: the other pairs find none, and the
    hull of the intervals shows how far the launches disagree; a slowdown every pair finds is one."""
    rng = np.random.default_rng(2)
    lucky = [np.log(1.15) + 0.01 * rng.standard_normal(40), 0.01 * rng.standard_normal(40),
             0.01 * rng.standard_normal(40)]
    everywhere = [np.log(1.12) + 0.01 * rng.standard_normal(40) for _ in range(3)]
    gate = paired.Gate(2, 0.05, 1)
    v = gate.look([lucky, everywhere], last=True)
    assert v[0].verdict == "inconclusive" and "launches disagree" in v[0].note and v[0].high > 1.14 and v[0].low < 1.0
    assert v[1].verdict == "regression" and v[1].pairs == 120


def test_resolution_and_the_smallest_slowdown_caught():
    v = paired.PointVerdict("unchanged", 1.0, 0.98, 1.02, 1.0, 64, 1)
    assert v.resolution() == pytest.approx(math.sqrt(1.02 / 0.98) - 1)
    assert v.detectable(0.05) == pytest.approx(1.05 / 0.98 - 1)
    assert paired.PointVerdict("inconclusive", 1.0, None, None, 1.0, 2, 1).resolution() is None


def test_pair_logs_use_each_half_median_and_only_complete_pairs():
    a = {(1, 0): [1.0, 1.0, 9.0], (1, 1): [2.0], (2, 0): [1.0]}
    b = {(1, 0): [1.1, 1.1, 0.1], (1, 1): [2.2]}
    assert paired.pair_logs(a, b) == pytest.approx([math.log(1.1), math.log(1.1)])
