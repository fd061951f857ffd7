"""Hostile inputs, class 4 of issue 20 (unwritable outputs): every writer, pointed at a place it
cannot write, ends in BAD_INPUT with its own inputs untouched (the contract: tests/hostile_contract.py;
besides it, a private device node given as the output stays a device node)."""

import stat
from pathlib import Path

import pytest

from hostile_contract import Outcome, case, meets_contract
from hostile_fixtures import OSU, PREDICT, TINY_SUITE, copy, device, mkdir, params, twin, write
from commbench.errors import BAD_INPUT, OK


def still_device(rel: str):
    def check(s: Path, out: Outcome) -> list[str]:
        p = s / rel
        if not (p.exists() and stat.S_ISCHR(p.lstat().st_mode)):
            kind = "folder" if p.is_dir() else "regular file" if p.is_file() else "special file"
            return [f"replaced the character device {rel} ({'a ' + kind if p.exists() else 'gone'})"]
        return []
    return check


LONG_NAME = "x" * 300
CASES = [
    case(4, "run-out-proc", "run -n 2 --backend mpi --sizes 8 --out /proc/nope"),
    case(4, "run-out-existing-run", "run -n 2 --backend mpi --sizes 8 --out BASE", copy("BASE")),
    case(4, "run-out-name-too-long", f"run -n 2 --backend mpi --sizes 8 --out {LONG_NAME}"),
    case(4, "sweep-out-proc", "sweep tiny.yaml --out /proc/nope", write("tiny.yaml", TINY_SUITE)),
    case(4, "import-osu-out-proc", "import osu osu.txt -n 4 --out /proc/nope", copy(OSU, "osu.txt")),
    case(4, "import-osu-out-existing-run", "import osu osu.txt -n 4 --out BASE", copy(OSU, "osu.txt"), copy("BASE")),
    case(4, "import-osu-out-missing-parents", "import osu osu.txt -n 4 --out missing/deep/O", copy(OSU, "osu.txt"),
         expect=(OK,), outputs=("missing",), note="valid: a new results folder, parents created"),
    case(4, "predict-out-proc", f"{PREDICT} --out /proc/nope"),
    case(4, "predict-out-existing-run", f"{PREDICT} --out BASE", copy("BASE")),
    case(4, "report-o-proc", "report SYN -o /proc/nope.html", copy("SYN")),
    case(4, "report-o-full-device", "report SYN -o full", copy("SYN"), device("full", 1, 7),
         checks=(still_device("full"),), note="a private /dev/full: ENOSPC on write; the node must stay"),
    case(4, "report-o-own-results-csv", "report SYN -o SYN/results.csv", copy("SYN")),
    case(4, "report-o-directory", "report SYN -o d", copy("SYN"), mkdir("d")),
    case(4, "report-o-missing-folder", "report SYN -o missing/r.html", copy("SYN"), expect=(OK, BAD_INPUT),
         outputs=("missing",), note="create the folder (OK) or refuse (BAD_INPUT)"),
    case(4, "compare-o-directory", "compare SYN TWIN -o d", *twin("SYN"), mkdir("d")),
    case(4, "compare-o-own-results-csv", "compare SYN TWIN -o SYN/results.csv", *twin("SYN")),
    case(4, "compare-o-null-device", "compare SYN TWIN -o null", *twin("SYN"), device("null", 1, 3), expect=(OK,),
         checks=(still_device("null"),), note="valid: a private /dev/null takes anything, and stays a device"),
    case(4, "model-fit-o-proc", "model fit SYN -o /proc/nope.json", copy("SYN")),
    case(4, "model-fit-o-own-results-csv", "model fit SYN -o SYN/results.csv", copy("SYN")),
    case(4, "model-fit-o-full-device", "model fit SYN -o full", copy("SYN"), device("full", 1, 7),
         checks=(still_device("full"),)),
    case(4, "model-validate-csv-proc", "model validate SYN --csv /proc/nope.csv", copy("SYN")),
    case(4, "model-validate-csv-own-results", "model validate SYN --csv SYN/results.csv", copy("SYN")),
    case(4, "topo-compare-csv-proc", "topo-compare TOPO --csv /proc/nope.csv", copy("TOPO")),
    case(4, "topo-compare-csv-own-results", "topo-compare TOPO --csv TOPO/results.csv", copy("TOPO")),
]


@pytest.mark.parametrize("c", params(CASES, launching=False))
def test_unwritable_outputs(c, tmp_path):
    meets_contract(c, tmp_path)


@pytest.mark.parametrize("c", params(CASES, launching=True))
def test_unwritable_outputs_of_run_and_sweep(c, tmp_path, job):
    """`run` and `sweep` (refused before launching), and the cases that read BASE (a real run)."""
    meets_contract(c, tmp_path)
