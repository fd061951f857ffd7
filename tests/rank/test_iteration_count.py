"""Exact iteration counts (commbench.rank.harness.sample_plan and measure): `--iters 200` times 200
calls, never 207 (23 batches of 9); a count no batch near the wanted one divides is rounded up to
whole batches by the fewest calls, a --batch that does not divide it as given, and a note says so; adapting never passes
--max-iters. The row's `iterations` is the calls timed."""

import pytest

from commbench.rank import harness
from commbench.rank.harness import sample_plan
from commbench.timers import Loop
from harness_fakes import FakeTimer, measure_ranks


@pytest.mark.parametrize("iters,per_call,want", [
    (200, 11e-6, (20, 10)),  # wants batches of 10 (100 us / 11 us = 9.1 -> 10): 10 divides 200
    (200, 12e-6, (20, 10)),  # wants 9 (was 23 x 9 = 207): 8 and 10 divide it, the larger is taken
    (200, 0.3e-6, (2, 100)),  # wants 334, at most MAX_BATCH (100)
    (1000, 30e-6, (250, 4)),  # wants 4
    (25, 10e-6, (5, 5)),  # wants 10: 5 (within a factor 2)
    (21, 5e-6, (1, 21)),  # wants 20: 7 is under half of it, 21 within twice it
])
def test_a_fixed_count_is_timed_exactly(iters, per_call, want):
    samples, batch, note = sample_plan(iters, None, per_call, False, 5, 1000)
    assert (samples, batch, note) == (*want, "")
    assert samples * batch == iters


def test_a_prime_count_rounds_up_to_whole_batches_and_says_so():
    samples, batch, note = sample_plan(199, None, 12e-6, False, 5, 1000)
    assert (samples, batch) == (20, 10)  # wants 9 (23 x 9 = 207): 10 adds one call
    assert sample_plan(199, None, 3e-6, False, 5, 1000)[:2] == (5, 40)  # wants 34 (6 x 34 = 204): 200
    assert note == ("--iters 199: it has no divisor near the batch a sample needs, so some points time more "
                    "calls, in whole batches (the iterations column counts the calls timed)")


def test_a_batch_given_that_does_not_divide_the_count_is_kept_and_said():
    assert sample_plan(12, 4, 1e-6, False, 5, 1000) == (3, 4, "")
    samples, batch, note = sample_plan(10, 4, 1e-6, False, 5, 1000)
    assert (samples, batch) == (3, 4) and note.startswith("--iters 10: --batch 4 does not divide it")


@pytest.mark.parametrize("iters,per_call", [(1000, 0.14e-6), (1000, 12e-6), (997, 9e-6), (1000, 11.5e-6)])
def test_adapting_never_passes_max_iters(iters, per_call):
    """The run of 2026-11-25 timed 1056, 1012 and 1008 calls with --max-iters 1000."""
    samples, batch, note = sample_plan(iters, None, per_call, True, 5, 1000)
    assert samples * batch <= 1000 and samples >= 5 and note == ""


def test_adapting_keeps_min_iters_samples():
    assert sample_plan(3, None, 1e-6, True, 20, 10_000)[0] == 20


def test_measure_times_exactly_the_iterations_asked(monkeypatch):
    timer = FakeTimer([[12e-6], [12e-6]], [[1e-6]] * 2)
    monkeypatch.setattr(harness, "loop_for", lambda fn, device, choice="auto", graph=False: Loop("python", timer))
    for m in measure_ranks(2, iters=200):
        assert (m.iterations, m.batch, len(m.samples_s), m.notes) == (200, 10, 20, ())
    assert timer.calls[0][-1] == (20, 10)  # the loop was asked for 20 x 10 calls
