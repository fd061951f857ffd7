"""How sure a prediction is (commbench.analysis.model.spread, issue 39's per-entry error bars): the
fit keeps its log parameters' covariance (Fit.log_cov), whose diagonal is the σ the fit reports;
a prediction's 95 % interval from it covers the truth about as often as it says, widens with the
noise, and is empty-width for exact points; a model file keeps it, and a malformed one is refused."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from commbench.analysis.model.costs import Params, Shape, time_s
from commbench.analysis.model.fit import Fit, fit_backend, usable_rows
from commbench.analysis.model.model_file import from_json, to_json
from commbench.analysis.model.spread import interval
from commbench.errors import InputError

TRUTH = Params(5e-6, 2e-10, 0.0, 0.0, 1e-10)  # 5 µs a message, 5 GB/s copies, 10 GB/s reductions
SIZES = tuple(2**k for k in range(3, 25, 3))  # 8 B .. 2 MB by 8x
RANKS = 4


def rows(noise: float, seed: int) -> pd.DataFrame:
    """ring, tree and rhd all-reduce and all-gather on 4 ranks of one node, TRUTH x lognormal noise."""
    rng = np.random.default_rng(seed)
    out = []
    for collective in ("all_reduce", "all_gather"):
        for algorithm in ("ring", "tree", "rhd"):
            for size in SIZES:
                t = time_s(TRUTH, algorithm, collective, Shape(1, RANKS), size, in_place=False)
                if t is None:  # tree has no all-gather
                    continue
                out.append({"collective": collective, "algorithm": algorithm, "backend": "mpi", "wrong": 0,
                            "time_us": t * 1e6 * math.exp(noise * rng.standard_normal()), "world_size": RANKS,
                            "nodes": 1, "ranks_per_node": RANKS, "size_bytes": size, "in_place": 0})
    return pd.DataFrame(out)


def fit(rows: pd.DataFrame) -> list[Fit]:
    """The fit of `model fit`, at the truth's lanes (one per rank: the search over lanes is tested elsewhere)."""
    return [fit_backend(usable_rows(rows), "mpi", lanes=RANKS)]


def asked(values: dict, ranks: int = 8, size: int = 1 << 20) -> float:
    """The prediction checked: ring all-reduce on 8 ranks of one node (beyond the points: 4 ranks), 1 MB."""
    return time_s(Params.from_values(values), "ring", "all_reduce", Shape(1, ranks), size, in_place=False)


def test_the_covariance_diagonal_is_the_fits_sigma_and_it_is_symmetric():
    f = fit(rows(0.05, 1))[0]
    assert set(f.log_cov) == {"alpha_intra", "beta_intra", "gamma"}, f.log_cov
    for a in f.log_cov:
        assert f.log_cov[a][a] == pytest.approx(f.rel_std[a] ** 2, rel=1e-6)
        assert all(f.log_cov[a][b] == f.log_cov[b][a] for b in f.log_cov)
    # α and β trade off along the points' sizes: their logs are negatively correlated
    assert f.log_cov["alpha_intra"]["beta_intra"] < 0


def test_the_interval_covers_the_truth_about_as_often_as_it_says():
    """24 fits of noisy points (fixed seeds): the 95 % interval of a prediction beyond the points
    holds the true time in at least 90 % of the fits that give one (a width of zero would hold it
    in none; the width is bounded too). A fit whose spurious memory term moves the prediction gives
    none and says which parameter."""
    truth = asked(TRUTH.__dict__)
    inside, widths, none = 0, [], []
    for seed in range(24):
        f = fit(rows(0.1, seed))[0]
        got = interval(asked, f.estimates(), f.log_cov)
        if isinstance(got, str):
            none.append(got)
            continue
        inside += got[0] <= truth <= got[1]
        widths.append(math.log(got[1] / got[0]))
    assert len(widths) >= 16 and inside >= 0.9 * len(widths), (inside, len(widths), none)
    assert 0.01 < float(np.median(widths)) < 0.5, widths
    assert all("whose uncertainty the model does not have" in why for why in none), none


def test_the_interval_widens_with_the_noise_and_is_a_point_without_it():
    width = {}
    for noise in (0.0, 0.02, 0.2):
        f = fit(rows(noise, 7))[0]
        t = asked(f.estimates())
        low, high = interval(asked, f.estimates(), f.log_cov)
        assert low <= t <= high
        width[noise] = math.log(high / low)
    assert width[0.0] < 1e-6 < width[0.02] < width[0.2], width


def test_a_parameter_without_covariance_leaves_no_interval_and_says_which():
    f = fit(rows(0.05, 3))[0]
    cov = {a: {b: v for b, v in r.items() if b != "gamma"} for a, r in f.log_cov.items() if a != "gamma"}
    assert "gamma" in interval(asked, f.estimates(), cov)
    # given on the command line (exact): then it needs none
    assert isinstance(interval(asked, f.estimates(), cov, exact={"gamma"}), tuple)


def test_an_unbounded_interval_or_a_time_of_zero_is_said_not_overflowed():
    def twice(v):
        return 2 * v["a"]

    assert "unbounded" in interval(twice, {"a": 1.0}, {"a": {"a": 1e6}})  # exp of a huge half-width: no OverflowError
    assert interval(lambda v: 0.0, {"a": 1.0}, {"a": {"a": 0.1}}) == (0.0, 0.0)  # one rank: nothing, exactly
    low, high = interval(twice, {"a": 1.0}, {"a": {"a": 0.01}})  # σ 0.1 on log a: 2 x exp(±1.96 x 0.1)
    assert (low, high) == (pytest.approx(2 * math.exp(-0.196)), pytest.approx(2 * math.exp(0.196)))


def test_a_model_file_keeps_the_covariance_and_refuses_a_malformed_one():
    f = fit(rows(0.05, 5))[0]
    doc = json.loads(json.dumps(to_json([f], ["x"])))
    assert from_json(doc, None)[0].log_cov == f.log_cov
    del doc["fits"]["mpi"]["log_cov"]  # an older file: no covariance, still read
    assert from_json(doc, None)[0].log_cov == {}
    for bad in ({"alpha_intra": {"alpha_intra": -1.0}}, {"alpha_intra": {"beta_intra": 1.0}},
                {"alpha_intra": {"alpha_intra": 1.0, "beta_intra": 2.0}, "beta_intra": {"alpha_intra": 3.0, "beta_intra": 1.0}},
                {"nonsense": {"nonsense": 1.0}}, [1], {"alpha_intra": {"alpha_intra": "1"}},
                {"alpha_intra": {"alpha_intra": float("nan")}}, {"alpha_intra": {"alpha_intra": True}},
                # symmetric, variances positive, but not positive semi-definite (eigenvalues 3 and -1): some
                # combination's variance negative, which an interval would turn into a width of zero
                {"alpha_intra": {"alpha_intra": 1.0, "beta_intra": 2.0}, "beta_intra": {"alpha_intra": 2.0, "beta_intra": 1.0}}):
        doc["fits"]["mpi"]["log_cov"] = bad
        with pytest.raises(InputError, match="log_cov"):
            from_json(doc, None)
    doc["fits"]["mpi"]["log_cov"] = {"alpha_intra": {"alpha_intra": 1.0, "beta_intra": 1.0},  # singular: PSD, taken
                                     "beta_intra": {"alpha_intra": 1.0, "beta_intra": 1.0}}
    assert from_json(doc, None)[0].log_cov["beta_intra"]["beta_intra"] == 1.0
