"""Shared by the tests of limits decided up front (issue 20, classes 4, 6 and 9):
tests/run/test_suite_limits.py, tests/run/test_run_limits.py and
tests/analysis/test_predict_limits.py. `launch_nothing` (import it by name) stops run_sweep and
run_suite at the launch; `scalar` and `value` are hypothesis strategies of YAML/JSON values
(huge numbers, wrong types, lists, nesting)."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from commbench.run import launch
from commbench.spec import SweepSpec

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
CORES = launch._cores()


def snapshot(folder: Path, leave_out: Path) -> dict:
    """Every file under folder but those under leave_out: path -> (size, mtime)."""
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")
            if p.is_file() and leave_out not in p.parents}


@pytest.fixture
def launch_nothing(monkeypatch):
    """run_sweep and run_suite checked as far as a launch (prepare, the launcher, this machine's
    limits), then stopped: nothing is started, nothing written."""
    from commbench.run import api, jobs

    def check(spec, launcher_args):
        spec = api.prepare(spec)
        launcher = launch.resolve_launcher(spec)
        if launcher != "none":
            launch.check_local_ranks(spec, launcher, launcher_args or [])
        return spec

    def run_sweep(spec, launcher_args=None, on_event=None, relay=None, argv=None, repeat=1):
        jobs.check_repeat(repeat)
        return api.RunResult(Path(check(spec, launcher_args).out_dir), reports=False)

    def run_suite(suite, out_dir, resume=False, on_run=None, on_event=None):
        for run in suite.runs:
            spec = SweepSpec.from_json(run.spec.to_json())
            spec.out_dir = str(Path(out_dir) / run.label)
            check(spec, run.launcher_args)
        return []

    monkeypatch.setattr(api, "run_sweep", run_sweep)
    monkeypatch.setattr(api, "run_suite", run_suite)


scalar = st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.integers(-10**40, 10**40),
                   st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
                   st.sampled_from(["8", "1K", "2T", "all_reduce", "gloo", "mpi", "ring", "in-place", "2x2", "a-b"]))
value = st.recursive(scalar, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                          max_size=3), max_leaves=10)
