"""Tuning constants that an environment variable overrides (as NCCL's NCCL_BUFFSIZE, NCCL_MIN_NCHANNELS
or its protocol thresholds do): the kernels' defaults were measured on the machines docs/performance.md
names (Tuning constants of the kernels), and another machine may want others. The table of them is
commbench.kernels.abi.TUNABLES, beside the constants; this module reads and checks a variable. A variable
that is set is checked when a run's spec is (a bad value: one line, exit 2, before anything starts),
passed to the ranks on every host (commbench.run.launch), and recorded in run.json's environment
(commbench.runinfo), so `compare` names it as a difference of context."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from functools import lru_cache

from commbench.errors import InputError

PREFIX = "COMMBENCH_KERNEL_"  # every variable of the table starts so (runinfo records them, launch passes them on)


@dataclass(frozen=True, eq=False)  # (hashed by identity: one object per constant)
class Tunable:
    variable: str
    defaults: dict  # where ("cpu", "cuda", "oversubscribed") -> the value commbench uses when the variable is unset
    low: float
    high: float
    scale: float  # the variable's unit in the constant's (µs -> s: 1e-6; bytes, counts: 1)
    meaning: str
    power_of_two: bool = False

    def accepted(self) -> str:
        """What the variable takes: "a whole number from 4,096 to 16,777,216", "a number from 0 to 1,000,000"."""
        def shown(x: float) -> str:
            return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"
        return f"{'a number' if self.scale != 1 else 'a whole number'} from {shown(self.low)} to {shown(self.high)}"

    def parse(self, raw: str) -> float | int:
        """The variable's text as the constant's value; InputError naming the variable otherwise."""
        try:
            number = float(raw) if self.scale != 1 else int(raw, 10)
        except ValueError:
            number = None
        if number is None or not self.low <= number <= self.high:  # (NaN: outside any range)
            raise InputError(f"{self.variable}={raw[:40]!r}: give {self.accepted()} ({self.meaning})")
        if self.power_of_two and number & (number - 1):
            raise InputError(f"{self.variable}={raw[:40]!r}: give a power of two ({self.meaning})")
        return number * self.scale if self.scale != 1 else number


@lru_cache(maxsize=64)
def _parsed(tunable: Tunable, raw: str):
    return tunable.parse(raw)


def override(tunable: Tunable):
    """The value the tunable's variable sets, or None where it is unset (or empty)."""
    raw = os.environ.get(tunable.variable, "").strip()
    return _parsed(tunable, raw) if raw else None


def value(tunable: Tunable, where: str):
    """The tunable's value where ("cpu", "cuda", "oversubscribed"): its variable's, else its default there."""
    found = override(tunable)
    return tunable.defaults.get(where) if found is None else found


def check(tunables) -> None:
    """Every variable of these tunables that is set reads as its constant, and every variable set with their
    prefix is one of them (a misspelt one would be recorded and passed on, but read by nothing); InputError
    (one line) otherwise."""
    known = {t.variable for t in tunables}
    for name in sorted(os.environ):
        if name.startswith(PREFIX) and name not in known:
            near = difflib.get_close_matches(name, known, n=1)
            raise InputError(f"unknown variable {name}" + (f": did you mean {near[0]}?" if near else "") +
                             f" (known: {', '.join(sorted(known))})")
    for tunable in tunables:
        override(tunable)
