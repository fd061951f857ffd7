"""Faults the tests inject into ranks, from outside the product (which reads no test variable): a
Python started with this folder on PYTHONPATH (tests/conftest.py's fault_env) imports this module at
start-up, and where COMMBENCH_TEST_WRONG_RANK or COMMBENCH_TEST_HANG_RANK names its (world) rank, patches the
timing loop (commbench.rank.harness) of that rank:
  - wrong: the check's one call leaves one output element at the sentinel, which no pattern produces
    (one wrong element, counted by the product's own check);
  - hang: the rank stops answering before its first timed loop (the watchdog's and the teardown's case).
"""

import os

WRONG_ENV = "COMMBENCH_TEST_WRONG_RANK"
HANG_ENV = "COMMBENCH_TEST_HANG_RANK"


def _world_rank(point) -> int:
    """The rank's world rank (a --split point's comm is its group's; an older commbench has no `world`)."""
    return getattr(point, "world", point.comm).rank


def install(wrong: str | None, hang: str | None) -> None:
    import time

    import numpy as np

    from commbench.rank import harness

    check, timed = harness.Prepared.check, harness.Prepared.time

    def corrupted_check(self):
        if wrong != str(_world_rank(self)) or not self.counts.out_count:
            return check(self)
        call = self.fn

        def corrupting():
            done = call()
            self.comm.synchronize()
            self.comm.write(self.out, 0, np.array([float(self.dtype.sentinel)]))
            return done

        self.fn = corrupting
        try:
            return check(self)
        finally:
            self.fn = call

    def hanging_time(self, samples, batch, delay_s=0.0):
        if hang == str(_world_rank(self)):
            time.sleep(1e6)
        return timed(self, samples, batch, delay_s)

    harness.Prepared.check, harness.Prepared.time = corrupted_check, hanging_time


if os.environ.get(WRONG_ENV) or os.environ.get(HANG_ENV):
    install(os.environ.get(WRONG_ENV), os.environ.get(HANG_ENV))
