"""Hostile inputs, class 10 of issue 43 (bombs in small packages): every reader is bounded before it
reads (commbench.folder.limits): a Parquet file's rows from its metadata, a file's bytes by stat, a
CSV file's rows by counting line ends, a header's columns in linear time, folder depth and run count
while walking. Each bomb is refused in one line, exit 2, within the contract's 5 s and LIMIT_MB; a
folder within the limits still reads, in bounded time and memory (the check `bounded`)."""

import dataclasses

import pytest

from hostile_contract import Outcome, case, meets_contract
from hostile_fixtures import copy, params, remove, write
from readers_fixtures import (deep_tree, many_lines, many_runs, parquet_bomb, parquet_footer, sparse, sparse_samples,
                              wide_header)
from commbench.errors import BAD_INPUT, OK

GB = 1 << 30


def bounded(seconds: float, mb: float):
    """A command that reads (exit 0 or 1) within seconds and mb of peak memory."""
    def check(s, out: Outcome) -> list[str]:
        problems = [f"{out.wall_s:.1f} s (limit {seconds:g} s)"] if out.wall_s > seconds else []
        return problems + ([f"{out.peak_mb:.0f} MB (limit {mb:g} MB)"] if out.peak_mb > mb else [])
    return check


def bomb(rows: int):
    """C: SYN with its samples replaced by a Parquet file of `rows` identical samples."""
    return copy("SYN", "C"), remove("C/samples.csv"), parquet_bomb("C/samples.parquet", rows)


CASES = [case(10, f"{cmd.split()[0]}-{cmd.split()[1]}-parquet-40M-identical-rows", cmd, *bomb(40_000_000),
              note="0.93 MB on disk: 19 s and 6.2 GB before issue 43")
         for cmd in ("compare C SYN", "report C -o r.html", "model fit C -o m.json", "model validate C")]
CASES += [case(10, f"{cmd.split()[0]}-results-csv-2GB-sparse", cmd, copy("SYN", "C"), sparse("C/results.csv", 2 * GB),
               note="2.2-4.4 GB before issue 43") for cmd in ("compare C SYN", "report C -o r.html",
                                                                "model fit C -o m.json", "topo-compare C")]
CASES += [
    case(10, "compare-samples-csv-2GB-sparse", "compare C SYN", copy("SYN", "C"), sparse_samples("C/samples.csv", 2 * GB)),
    case(10, "compare-samples-csv-300MB-sparse", "compare C SYN", copy("SYN", "C"),
         sparse_samples("C/samples.csv", 300 << 20), note="one file over COMMBENCH_MAX_FILE_MB"),
    case(10, "report-sweep-over-read-budget", "report S -o r.html", copy("SYN", "S/a"), copy("SYN", "S/b"),
         copy("SYN", "S/c"), sparse_samples("S/a/samples.csv", 200 << 20), sparse_samples("S/b/samples.csv", 200 << 20),
         sparse_samples("S/c/samples.csv", 200 << 20), note="600 MB under one path: over COMMBENCH_MAX_READ_MB"),
    case(10, "report-header-1e5-columns", "report C -o r.html", copy("SYN", "C"), wide_header("C/results.csv", 100_000),
         note="95 s before issue 43 (a quadratic check)"),
    case(10, "report-header-1e6-columns", "report C -o r.html", copy("SYN", "C"),
         wide_header("C/results.csv", 1_000_000), note="did not finish before issue 43"),
    case(10, "compare-header-1e5-columns", "compare C SYN", copy("SYN", "C"), wide_header("C/results.csv", 100_000)),
    case(10, "model-fit-header-1e5-columns", "model fit C -o m.json", copy("SYN", "C"),
         wide_header("C/results.csv", 100_000)),
    case(10, "compare-samples-header-1e5-columns", "compare C SYN", copy("SYN", "C"),
         write("C/samples.csv", "run_id,point,iteration,time_us,job" + "".join(f",x{i}" for i in range(100_000)) + "\n")),
    case(10, "compare-samples-csv-3M-short-lines", "compare C SYN", copy("SYN", "C"),
         many_lines("C/samples.csv", 3_000_000, "x,0,0,1,1\n"), note="30 MB: over COMMBENCH_MAX_SAMPLES"),
    case(10, "report-results-70k-short-lines", "report C -o r.html", copy("SYN", "C"),
         many_lines("C/results.csv", 70_000, "x\n"), note="over COMMBENCH_MAX_ROWS, counted before parsing"),
    case(10, "report-sweep-2001-runs", "report S -o r.html", many_runs("S", 2001), note="over COMMBENCH_MAX_RUNS"),
    case(10, "report-tree-40-deep", "report S -o r.html", deep_tree("S", 40, "SYN"), note="over COMMBENCH_MAX_DEPTH"),
    case(10, "compare-tree-1500-deep", "compare S SYN", copy("SYN"), deep_tree("S", 1500, "SYN"),
         note="RecursionError (exit 3) before issue 43"),
    case(10, "model-fit-tree-1500-deep", "model fit S -o m.json", deep_tree("S", 1500, "SYN")),
    case(10, "compare-parquet-footer-4GB", "compare C SYN", copy("SYN", "C"), remove("C/samples.csv"),
         parquet_footer("C/samples.parquet", 0xFFFFFFF0)),
    case(10, "compare-parquet-not-parquet", "compare C SYN", copy("SYN", "C"), write("C/samples.parquet", "x\n")),
    case(10, "compare-parquet-1M-identical-rows-reads", "compare C SYN", copy("SYN"), *bomb(1_000_000), expect=(OK, 1),
         checks=(bounded(10, 1000),), note="within the limits: read, in bounded time and memory"),
    case(10, "compare-parquet-2.4M-identical-rows-reads", "compare C SYN", copy("SYN"), *bomb(2_400_000), expect=(OK, 1),
         checks=(bounded(10, 400),), note="just within COMMBENCH_MAX_SAMPLES: read in pieces, times kept alone"),
    case(10, "report-tree-30-deep-reads", "report S -o r.html", deep_tree("S", 30, "SYN"), expect=(OK,),
         outputs=("r.html",), checks=(bounded(20, 1000),)),
]

NAMED = {"parquet-40M": "SAMPLES", "2GB-sparse": "FILE_MB", "300MB-sparse": "FILE_MB", "read-budget": "READ_MB",
         "columns": "COLUMNS", "3M-short-lines": "SAMPLES", "70k-short-lines": "ROWS", "2001-runs": "RUNS",
         "deep": "DEPTH"}


def names_limit(env: str):
    """The refusal names the limit's variable (how to raise it)."""
    def check(s, out: Outcome) -> list[str]:
        return [] if out.rc != BAD_INPUT or env in out.stderr.decode() else [f"the refusal does not name {env}"]
    return check


CASES = [dataclasses.replace(c, checks=c.checks + tuple(names_limit(f"COMMBENCH_MAX_{env}") for part, env in
                                                         NAMED.items() if part in c.name)) for c in CASES]


@pytest.mark.parametrize("c", params(CASES, launching=False))
def test_readers_bombs(c, tmp_path):
    meets_contract(c, tmp_path)


def test_class_size():
    assert len(CASES) >= 20 and all(c.expect in ({BAD_INPUT}, {OK}, {OK, 1}) for c in CASES)
