"""Hostile inputs, class 7 of issue 20 (interrupts): signals at different moments of a small real
run end it with one line and 128 + N, run.json's status true to its rows (the contract:
tests/hostile_contract.py; besides it, run.json says "interrupted" when a planned point has no row,
"completed" when every one has, never "running")."""

import json
import signal
from pathlib import Path

import pytest

from hostile_contract import (HUNG_UP, INTERRUPTED, PIPE_CLOSED, TERMINATED, Outcome, Sig, case, count_rows,
                              meets_contract)
from hostile_fixtures import copy, json_lines, params, twin, write
from commbench.errors import OK
from commbench.folder.schema import RESULTS_CSV, RUN_JSON

# the run (ends early: every signal lands before its 16M and 64M points finish)
RUN7 = "run -n 2 --backend mpi -c all_reduce --sizes 8,16M,64M --iters 100 --out X"
# ... and a lighter one that is let run to its last point (3 points, a few seconds)
RUN7_SHORT = "run -n 2 --backend mpi -c all_reduce --sizes 8,64K,1M --iters 50 --in-place --out X"


def status_matches(folder: str = "X"):
    """run.json's status after a signal: completed when every planned point has a row (or was
    skipped), interrupted when one has none; never running."""
    def check(s: Path, out: Outcome) -> list[str]:
        d = s / folder
        if not (d / RUN_JSON).exists():
            return [f"{folder}/results.csv exists but no run.json"] if (d / RESULTS_CSV).exists() else []
        try:
            m = json.loads((d / RUN_JSON).read_text())
        except ValueError as exc:
            return [f"{folder}/run.json is not JSON after the signal ({exc})"]
        rows = count_rows(d / RESULTS_CSV)
        planned = m.get("planned_points")
        done = planned is not None and rows + len(m.get("skipped") or []) >= planned
        status = m.get("status")
        if status == "running":
            return [f"run.json says running after exit ({rows} rows of {planned})"]
        if done and status != "completed":
            return [f"every point has a row ({rows} of {planned}) but run.json says {status!r}"]
        if not done and status != "interrupted":
            return [f"{rows} rows of {planned} planned but run.json says {status!r}"]
        return []
    return check


ST = (status_matches("X"),)
CASES = [
    case(7, "sigint-at-startup", RUN7, expect=(INTERRUPTED,), outputs=("X",), checks=ST,
         sig=Sig(signal.SIGINT, after_s=0.4, group=True), note="during the commands' imports (about 1 s)"),
    case(7, "sigint-while-launching", RUN7, expect=(INTERRUPTED,), outputs=("X",), checks=ST,
         sig=Sig(signal.SIGINT, after_s=2.5, group=True)),
    case(7, "sigint-after-first-row", RUN7, expect=(INTERRUPTED,), outputs=("X",), checks=ST,
         sig=Sig(signal.SIGINT, rows=1, group=True)),
    case(7, "sigint-twice-after-first-row", RUN7, expect=(INTERRUPTED,), outputs=("X",), checks=ST,
         sig=Sig(signal.SIGINT, rows=1, group=True, twice=True)),
    case(7, "sigterm-while-launching", RUN7, expect=(TERMINATED,), outputs=("X",), checks=ST,
         sig=Sig(signal.SIGTERM, after_s=2.5)),
    case(7, "sigterm-after-first-row", RUN7, expect=(TERMINATED,), outputs=("X",), checks=ST,
         sig=Sig(signal.SIGTERM, rows=1)),
    case(7, "sighup-after-second-row", RUN7, expect=(HUNG_UP,), outputs=("X",), checks=ST,
         sig=Sig(signal.SIGHUP, rows=2)),
    case(7, "sigint-after-last-row", RUN7_SHORT, expect=(OK, INTERRUPTED), outputs=("X",), checks=ST,
         sig=Sig(signal.SIGINT, rows=3, group=True), note="OK if it ended first; status must be completed"),
    case(7, "sigterm-after-last-row-plus-0.3s", RUN7_SHORT, expect=(OK, TERMINATED), outputs=("X",), checks=ST,
         sig=Sig(signal.SIGTERM, rows=3, after_s=0.3), note="during the final load and summary"),
    case(7, "json-stdout-closed-after-one-line", f"{RUN7} --json", expect=(PIPE_CLOSED,), outputs=("X",), head=1,
         checks=ST + (json_lines,), note="`run --json | head -1`"),
    case(7, "sweep-sigint-after-first-row", "sweep s7.yaml --out S",
         write("s7.yaml", "name: s7\ndefaults: {backend: mpi, nprocs: 2, collective: all_reduce, "
                          "sizes: [8, 16M, 64M], iters: 100}\nruns:\n  - label: r1\n  - label: r2\n"),
         expect=(INTERRUPTED,), outputs=("S",), sig=Sig(signal.SIGINT, rows=1, csv="S/r1/results.csv", group=True),
         checks=(status_matches("S/r1"),)),
    case(7, "report-sigint-midway", "report SYN -o r.html", copy("SYN"), expect=(OK, INTERRUPTED),
         outputs=("r.html",), sig=Sig(signal.SIGINT, after_s=1.0, group=True),
         note="timing: lands while the report is built on an idle machine; OK if it was written first"),
    case(7, "compare-stdout-closed", "compare SYN TWIN", *twin("SYN"), expect=(OK, PIPE_CLOSED), head=1,
         note="`compare | head -1`: OK if the whole verdict fit the pipe first"),
]


@pytest.mark.parametrize("c", params(CASES, launching=False))
def test_interrupted_commands(c, tmp_path):
    """A report being built, a verdict being printed."""
    meets_contract(c, tmp_path)


@pytest.mark.parametrize("c", params(CASES, launching=True))
def test_interrupted_runs(c, tmp_path, job):
    meets_contract(c, tmp_path)
