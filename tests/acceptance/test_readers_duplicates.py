"""Hostile inputs, class 13 of issue 43 (duplicates): the same run twice or more on one side of a
comparison (three copies of one run gave "4 regressions" with an interval of zero width and p = 0) is
refused in one line, exit 2; a row copied in results.csv is refused by every reader; samples present
as both samples.csv and samples.parquet (a conversion cut short) are read once, the Parquet file's
winning, so compare counts each job's samples once."""

import json

import pytest

from hostile_contract import Outcome, case, meets_contract
from hostile_fixtures import copy, params
from readers_fixtures import copies, samples_as_parquet
from commbench.errors import BAD_INPUT, FAILED, NO_VERDICT, OK


def copied_row(rel: str):
    """rel's last line written twice (a row copied)."""
    def step(s):
        p = s / rel
        p.write_text(p.read_text() + p.read_text().splitlines(keepends=True)[-1])
    return step


def samples_once(s, out: Outcome) -> list[str]:
    """compare --format json: every point's samples are its 3 jobs x 20, on both sides (not twice that)."""
    try:
        points = json.loads(out.stdout)["points"]
    except (ValueError, KeyError):
        return ["no JSON comparison on stdout"]
    wrong = [p["samples"] for p in points if p["samples"] != [60, 60]]
    return [f"samples per point {wrong[0]}, expected [60, 60] (counted twice?)"] if wrong else []


def note_says_duplicated(s, out: Outcome) -> list[str]:
    points = json.loads(out.stdout or "{}").get("points", [])
    return [] if points and all("duplicated" in p["note"] for p in points) else ["no point's note says duplicated"]


def dup_jobs(folder: str):
    """folder: SYN with job 2's samples replaced by job 1's (a job copied within the run)."""
    def step(s):
        import csv
        p = s / folder / "samples.csv"
        rows = list(csv.reader(p.open()))
        head, body = rows[0], rows[1:]
        job, point, it = head.index("job"), head.index("point"), head.index("iteration")
        first = {(r[point], r[it]): r for r in body if r[job] == "1"}
        body = [r if r[job] != "2" else first[(r[point], r[it])][:job] + ["2"] + first[(r[point], r[it])][job + 1:]
                for r in body]
        with p.open("w", newline="") as f:
            csv.writer(f).writerows([head, *body])
    return step


CASES = [
    case(13, "compare-baseline-three-copies-of-one-run", "compare B SYN", copy("SYN"), copies("SYN", "B", 3),
         note="'4 regressions', zero-width intervals and p = 0 before issue 43"),
    case(13, "compare-candidate-three-copies-of-one-run", "compare SYN B", copy("SYN"), copies("SYN", "B", 3)),
    case(13, "compare-candidate-two-copies-json", "compare SYN B --format json", copy("SYN"), copies("SYN", "B", 2)),
    case(13, "compare-copy-beside-other-run", "compare SYN B", copy("SYN"), copies("SYN", "B", 2),
         copy("TOPO", "B/other")),
    case(13, "compare-results-row-copied", "compare C SYN", copy("SYN"), copy("SYN", "C"), copied_row("C/results.csv")),
    case(13, "report-results-row-copied", "report C -o r.html", copy("SYN", "C"), copied_row("C/results.csv")),
    case(13, "model-fit-results-row-copied", "model fit C -o m.json", copy("SYN", "C"), copied_row("C/results.csv")),
    case(13, "compare-samples-csv-and-parquet-read-once", "compare SYN C --format json", copy("SYN"), copy("SYN", "C"),
         samples_as_parquet("C"), expect=(OK,), checks=(samples_once,),
         note="counted twice before issue 43; the Parquet file's samples win"),
    case(13, "compare-job-copied-flagged", "compare C SYN --format json", copy("SYN"), copy("SYN", "C"),
         dup_jobs("C"), expect=(OK, FAILED, NO_VERDICT), checks=(note_says_duplicated,),
         note="a job whose samples are another's, value for value: the note says duplicated"),
]


@pytest.mark.parametrize("c", params(CASES, launching=False))
def test_readers_duplicates(c, tmp_path):
    meets_contract(c, tmp_path)


def test_class_size():
    # (a compare of copied jobs: a verdict, or none: {OK, FAILED, NO_VERDICT}; NO_VERDICT is BAD_INPUT's 2)
    assert len(CASES) >= 9 and all(c.expect in ({BAD_INPUT}, {OK}, {OK, FAILED}, {OK, FAILED, NO_VERDICT}) for c in CASES)
