"""commbench.machine.load: other work on the ranks' machine, read from the real /proc/stat (a spinning
process reads as about one core; the rank's own CPU time does not count), the median's interval
against the sign test's own (scipy), the flags' rules; and real runs: beside a spinning process
every row says why it is not to be trusted, run.json counts them, an oversubscribed run says so."""

import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from commbench.analysis.paired import interval
from commbench.machine import load
from commbench.machine.facts import facts
from conftest import needs_mpirun
from nccl_semantics import NcclSemanticsComm, World


def _one_rank() -> NcclSemanticsComm:
    return NcclSemanticsComm(World(1), ("world",), 0, 1)


def _read(meter: load.LoadMeter, seconds: float, spin_here: bool = False) -> tuple[float | None, float]:
    meter.start()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not spin_here:
            time.sleep(0.01)
    return load.background(_one_rank(), meter.stop())


@pytest.fixture
def spinner():
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(0.2)
    yield proc
    proc.kill()
    proc.wait()


def test_a_spinning_process_reads_as_about_a_core_and_the_ranks_own_time_as_none(spinner):
    meter = load.open_meter(_one_rank())
    assert meter.reader and meter.ranks == 1 and meter.cores == facts().cpus
    busy, window = _read(meter, 0.6)
    assert 0.6 <= busy <= 2.0 and 0.6 <= window < 1.5, busy  # the spinner, and whatever else runs here
    spinner.kill()
    spinner.wait()
    quiet, _ = _read(meter, 0.6, spin_here=True)  # this "rank" spins itself: its own time is not other work
    assert quiet < busy - 0.5, (quiet, busy)


def test_a_short_point_is_read_over_the_points_before_it():
    meter = load.open_meter(_one_rank())
    for _ in range(5):
        _, window = _read(meter, 0.08)
    assert window >= load.MIN_WINDOW_S and window < 0.6  # reaches back to enough earlier starts, no further


def test_an_unreadable_proc_stat_is_no_reading_and_no_flag(monkeypatch):
    monkeypatch.setattr(load, "busy_seconds", lambda: None)
    busy, _ = _read(load.open_meter(_one_rank()), 0.05)
    assert busy is None
    assert load.reasons(load.LoadMeter(True, 2, 2), busy, np.ones(50)) == ""


@pytest.mark.parametrize("n", [*range(1, 201), 201, 257, 999, 5000])
def test_the_medians_interval_is_the_sign_tests(n):
    x = np.random.default_rng(n).permutation(np.arange(n, dtype=float))  # order statistic k is k - 1
    got = load.median_interval(x)
    low, high = interval(x, 0.025)
    if n == 5:  # the whole range (93.8 %): the fewest samples an adaptive point takes
        assert math.isinf(low) and got == (0.0, 4.0)
    elif math.isinf(low):
        assert got is None
    elif n <= 200:
        assert got == (low, high)
    else:  # the normal approximation: within one order statistic
        assert abs(got[0] - low) <= 1 and abs(got[1] - high) <= 1


@pytest.mark.parametrize("busy,ranks,cores,flagged", [
    (0.5, 2, 2, True),  # a spinner beside two spinning ranks on two cores
    (0.2, 2, 2, False),  # below what /proc/stat resolves
    (3.0, 8, 64, False),  # other work where cores are free
    (1.0, 63, 64, False),  # the last free core, exactly
    (1.5, 63, 64, True),  # and more
    (None, 2, 2, False),
])
def test_a_busy_machine_flags_only_where_the_ranks_wait_for_a_core(busy, ranks, cores, flagged):
    why = load.reasons(load.LoadMeter(True, ranks, cores), busy, np.full(50, 1.0))
    assert ("busy machine" in why) is flagged
    if flagged:
        assert why == f"busy machine: {busy:g} cores of other work beside {ranks} ranks on {cores} cores"


def test_samples_that_do_not_pin_the_median_flag_the_point():
    meter = load.LoadMeter(True, 2, 2)
    steady = np.concatenate([np.full(40, 10.0), np.full(10, 100.0)])  # a slow tail leaves the median alone
    assert load.reasons(meter, 0.0, steady) == ""
    bimodal = np.repeat([10.0, 30.0], 25)  # half and half: the median could be either
    assert load.reasons(meter, 0.0, bimodal).startswith("uncertain median: 95 % interval 10..30 us")
    assert load.reasons(meter, 0.0, np.array([1.0, 1.0, 1.0])) == "3 samples cannot bound the median (5 or more can)"


def _run(job, tmp_path, *args):
    out = tmp_path / "run"
    job("run", "-n", "2", "--sizes", "8,64K", "-c", "all_reduce", "--out", out, "--quiet", *args, check_rc=0)
    return pd.read_csv(out / "results.csv", keep_default_na=False), json.loads((out / "run.json").read_text())


@needs_mpirun
def test_beside_a_spinning_process_every_row_says_so(job, tmp_path, spinner):
    if (os.cpu_count() or 1) > 2:
        pytest.skip("2 ranks and a spinner crowd only a machine of 2 cores")
    rows, meta = _run(job, tmp_path)
    # the spinner's share of the 2 cores beside 2 spinning ranks varies (0.27-0.55 seen): every row reads
    # it (a quiet run reads under 0.1), most rows are flagged by it, and run.json counts them
    busy = rows.unreliable.str.startswith("busy machine: ")
    assert (rows.background_cores.astype(float) >= 0.15).all() and busy.sum() >= 2, rows.unreliable.tolist()
    assert meta["unreliable_points"] == (rows.unreliable != "").sum() and len(rows) == 4
    assert meta["load"] == {"ranks_per_machine": 2, "cores_per_machine": 2, "oversubscribed": False,
                            "busy_cores_flag": load.BUSY_CORES, "spread_flag": load.SPREAD,
                            "min_window_s": load.MIN_WINDOW_S}


@needs_mpirun
def test_more_ranks_than_cores_is_said_and_recorded(job, tmp_path):
    cores = os.cpu_count() or 1
    rows, meta = _run(job, tmp_path, "-n", str(cores + 1))
    assert meta["load"]["oversubscribed"] is True and meta["load"]["ranks_per_machine"] == cores + 1
    assert any(w.startswith(f"oversubscribed: {cores + 1} ranks on a machine of {cores} cores")
               for w in meta["warnings"]), meta.get("warnings")
    assert rows.background_cores.astype(float).ge(0).all() and meta["unreliable_points"] == (rows.unreliable != "").sum()
