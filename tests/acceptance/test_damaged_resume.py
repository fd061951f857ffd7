"""Hostile inputs, class 5 of issue 20 (damaged --resume folders): a damaged folder given to
`run --resume` or `sweep --resume` ends in BAD_INPUT with the folder exactly as it was, no repair
first (the contract: tests/hostile_contract.py). Each case resumes a copy of BASE, a real run."""

import os

import pytest

from hostile_contract import case, meets_contract
from hostile_fixtures import (TINY_SUITE, append, drop_column, edit_csv, keep_lines, mkdir, params, remove, resumable,
                              sweep_folder, symlink, truncate, write)
from commbench.errors import BAD_INPUT, OK

R = "run --resume R"
SWEEP = "sweep tiny.yaml --out S --resume"


def mk(name, *steps, expect=(BAD_INPUT,), outputs=(), note=""):
    return case(5, name, R, *resumable(), *steps, expect=expect, outputs=outputs, note=note)


CASES = [
    case(5, "resume-file-not-folder", R, write("R", "not a folder\n")),
    case(5, "resume-missing-folder", R),
    case(5, "resume-empty-folder", R, mkdir("R")),
    mk("run-json-missing", remove("R/run.json")),
    mk("run-json-empty", write("R/run.json", "")),
    mk("run-json-truncated", truncate("R/run.json", 0.5)),
    mk("run-json-directory", remove("R/run.json"), mkdir("R/run.json")),
    mk("results-point-nan", edit_csv("R/results.csv", "point", "nan", rows="last")),
    mk("results-point-text", edit_csv("R/results.csv", "point", "two", rows="first")),
    mk("results-point-out-of-plan", edit_csv("R/results.csv", "point", "999", rows="last")),
    mk("results-time-nan", edit_csv("R/results.csv", "time_us", "nan", rows="first")),
    mk("results-missing-point-column", drop_column("R/results.csv", "point")),
    mk("results-binary", write("R/results.csv", os.urandom(4096))),
    mk("results-binary-no-newline", write("R/results.csv", b"\x00\xff" * 500),
       note="a partial-line repair must not truncate a file it has not validated"),
    mk("results-empty", write("R/results.csv", ""), expect=(OK, BAD_INPUT), outputs=("R",),
       note="what a crash leaves between the first samples and the header (samples are written first): "
            "resumable (OK), its orphan samples dropped"),
    mk("results-header-only", keep_lines("R/results.csv", 1), expect=(OK, BAD_INPUT), outputs=("R",),
       note="a header and no rows is a run cut short before its first point: resumable (OK) or refused (BAD_INPUT)"),
    mk("results-directory", remove("R/results.csv"), mkdir("R/results.csv")),
    mk("results-symlink-outside", write("victim.txt", "victim, no trailing newline"), remove("R/results.csv"),
       symlink("R/results.csv", "../victim.txt"), note="victim.txt, outside R, must stay as it was"),
    mk("results-other-run-id", edit_csv("R/results.csv", "run_id", "someone-else", rows="first"),
       note="debatable: a row of another run in the folder; BAD_INPUT (a folder is one run)"),
    mk("samples-parquet-garbage", write("R/samples.parquet", os.urandom(1024)), expect=(OK, BAD_INPUT),
       outputs=("R",),
       note="debatable: resume may not read the samples (OK appends), or refuse a damaged folder (BAD_INPUT)"),
    mk("results-half-line-repairable", append("R/results.csv", b"20261123T000000Z-abcdef,,3,1,all_red"),
       expect=(OK,), outputs=("R",), note="valid: a half-written last line is repaired, then resumed"),
    case(5, "sweep-resume-run-json-truncated", SWEEP, *sweep_folder(damage=(truncate("S/r1/run.json", 0.5),))),
    case(5, "sweep-resume-run-is-file", SWEEP, *sweep_folder(damage=(remove("S/r1"), write("S/r1", "a file\n")))),
    case(5, "sweep-resume-results-binary", SWEEP,
         *sweep_folder(damage=(write("S/r1/results.csv", os.urandom(2048)),))),
    case(5, "sweep-resume-out-is-file", SWEEP, write("tiny.yaml", TINY_SUITE), write("S", "a file\n")),
]


@pytest.mark.parametrize("c", params(CASES, launching=True))
def test_damaged_resume(c, tmp_path, job):
    meets_contract(c, tmp_path)
