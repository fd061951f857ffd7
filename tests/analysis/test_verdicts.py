"""compare's math and exit codes: the verdict statistics (commbench/analysis/verdicts.py) guard their
callers and hold for anything a valid folder can hold (zero spread, one-sided points, ratios past the
float range: null in strict JSON); exit codes stay apart (0 / 1 regression / 2 input / 3 crash)."""

from __future__ import annotations

import tempfile
import warnings

import numpy as np
import pytest

from cli_inprocess import run_cli
from synthetic_runs import write_run
from trust_sides import QUIET, sides, strict_json  # noqa: F401 - sides: a fixture

from commbench.analysis import compare as cmp_module
from commbench.analysis.verdicts import judge, level
from commbench.errors import BAD_INPUT, FAILED, INTERNAL, NO_VERDICT, InputError, OK


def test_verdict_math_guards_its_callers():
    for bad in ([10.0, 0.0, 10.0], [10.0, -1.0, 9.0], [10.0, np.nan, 9.0], [np.inf, 1.0, 1.0], []):
        with pytest.raises(InputError, match="job medians must be one or more finite times > 0"):
            judge(np.array(bad, float), np.array(QUIET), 0.05)
        with pytest.raises(InputError, match="finite times > 0"):
            level(np.array(bad, float))
    flat = np.array([10.0, 10.0, 10.0])  # jobs that agree to the last digit: copies, no interval
    j = judge(flat, flat, 0.05)
    assert (j.verdict, j.ratio, j.ci_low, j.ci_high, j.p_value) == ("inconclusive", 1.0, None, None, None)
    assert judge(flat, np.array([10.0, 10.0, 10.5]), 0.05).verdict == "inconclusive"
    assert level(np.array([5.0])) == (pytest.approx(5.0), None, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning on stderr
        far = judge(np.array([1e-300, 1.1e-300, 1e-300]), np.array([1e300, 1.1e300, 1e300]), 0.05)
    assert far.verdict == "regression" and far.ratio == float("inf")


def test_identical_folders_zero_spread_and_one_sided_points(tmp_path):
    base = write_run(tmp_path / "base", [10.0, 10.0, 10.0], noise=0.0)
    cand = write_run(tmp_path / "cand", [10.0, 10.0, 10.0], noise=0.0, seed=3)
    outcome = run_cli("compare", base, cand, "--format", "json")
    outcome.assert_clean(codes=(NO_VERDICT,))  # nothing judged
    doc = strict_json(outcome.stdout)
    # noise 0: each side's three jobs are one job's copies, counted once: no interval, never a verdict
    assert {p["verdict"] for p in doc["points"]} == {"inconclusive"} and all(p["p_value"] is None for p in doc["points"])
    assert all(p["jobs"] == [1, 1] and "duplicated (identical samples): counted once" in p["note"] for p in doc["points"])
    one = write_run(tmp_path / "one", [10.0])
    rows = (one / "results.csv").read_text().splitlines()
    (one / "results.csv").write_text("\n".join(rows[:-1]) + "\n")  # its 64 KiB point: baseline only
    outcome = run_cli("compare", base, one)  # a point the candidate lacks fails the gate
    assert outcome.code == FAILED and "missing in candidate: all_reduce native mpi float32 sum out-of-place 65536 B x2" \
        in outcome.stdout
    assert run_cli("compare", base, one, "--allow-missing").code == NO_VERDICT
    doc = strict_json(run_cli("compare", base, one, "--format", "json", "--allow-missing").stdout)
    assert doc["points"][0]["ci_low"] is None and doc["points"][0]["history"][0]["level"][1] is None


def test_a_time_past_any_call_is_refused_before_a_ratio_could_leave_float_range(tmp_path):
    """Times are read within (0, MAX_TIME_US] µs and samples.csv keeps 4 decimals, so no ratio of two
    comes near float's range (at most 1e24); a damaged one past the bound is refused in one line."""
    base = write_run(tmp_path / "base", [0.0101, 0.0102, 0.0099], noise=0.0)  # samples.csv keeps 4 decimals
    cand = write_run(tmp_path / "cand", [5e306, 5.1e306, 4.9e306], noise=0.0)
    outcome = run_cli("compare", base, cand, "--format", "json")
    assert outcome.code == BAD_INPUT and outcome.stdout == ""
    assert outcome.stderr.startswith("commbench: error: ") and "is not a time in µs" in outcome.stderr
    assert len(outcome.stderr.splitlines()) == 1


def test_exit_codes_stay_apart(tmp_path, sides, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the crash below leaves its traceback
    base, cand = sides
    assert run_cli("compare", base, cand).code == OK
    slow = write_run(tmp_path / "slow", [12.4, 12.6, 12.55], seed=3)
    assert run_cli("compare", base, slow).code == FAILED
    assert run_cli("compare", base, tmp_path / "missing").code == BAD_INPUT

    def crash(*args, **kwargs):
        raise ZeroDivisionError("float division by zero")
    monkeypatch.setattr(cmp_module, "compare", crash)
    outcome = run_cli("compare", base, cand)
    outcome.assert_clean(codes=(INTERNAL,))
    assert "internal error: ZeroDivisionError" in outcome.stderr

