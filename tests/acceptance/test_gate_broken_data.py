"""Hostile inputs, class 2 of issue 20 (the gate accepts broken data): broken numbers reach the gate
(compare), the report, the model and the importers: every one refused with BAD_INPUT (the contract:
tests/hostile_contract.py; besides it, compare's --format json strict JSON)."""

import pytest

from conftest import DATA
from hostile_contract import case, meets_contract
from hostile_fixtures import (NCCL_JSON, OSU, PREDICT, copy, edit_csv, edit_json, nccl_json_set, nccl_text_with,
                              params, strict_json, write)

NCCL_ROW8 = ("           8             2     float     sum      -1    135.8    0.00    0.00      0"
             "    123.5    0.00    0.00      0")  # the 8-byte row of the nccl-tests output


def osu_with(line: str):
    """The OSU all-reduce output with its first data line replaced."""
    def content(s):
        lines = (DATA / OSU[5:]).read_text().splitlines(keepends=True)
        first = next(i for i, x in enumerate(lines) if x[:1].isdigit())
        lines[first] = line + "\n"
        return "".join(lines)
    return write("osu.txt", content)


def nccl_row8(time_oop: str = "135.8", busbw: str = "0.00", size: str = "8", wrong: str = "0"):
    row = (f"{size:>12} {'2':>13} {'float':>9} {'sum':>7} {'-1':>7} {time_oop:>8} {'0.00':>7} {busbw:>7} "
           f"{wrong:>6} {'123.5':>8} {'0.00':>7} {'0.00':>7} {'0':>6}")
    return nccl_text_with(NCCL_ROW8, row)


def all_numbers(doc, value):
    """Every float in a JSON document replaced by value (a model file with NaN or negative parameters)."""
    if isinstance(doc, dict):
        return {k: all_numbers(v, value) for k, v in doc.items()}
    if isinstance(doc, list):
        return [all_numbers(v, value) for v in doc]
    return value if isinstance(doc, float) else doc


CASES = [case(2, f"compare-cand-time-{bad or 'empty'}", "compare SYN C", copy("SYN"), copy("SYN", "C"),
              edit_csv("C/results.csv", "time_us", bad), edit_csv("C/samples.csv", "time_us", bad))
         for bad in ("nan", "inf", "0", "-5", "abc", "")]
CASES += [
    case(2, "compare-cand-samples-only-nan", "compare SYN C", copy("SYN"), copy("SYN", "C"),
         edit_csv("C/samples.csv", "time_us", "nan")),
    case(2, "compare-cand-results-only-negative", "compare SYN C", copy("SYN"), copy("SYN", "C"),
         edit_csv("C/results.csv", "time_us", "-5"), note="the rows are validated even where samples are used"),
    case(2, "compare-baseline-time-zero", "compare B SYN", copy("SYN"), copy("SYN", "B"),
         edit_csv("B/results.csv", "time_us", "0"), edit_csv("B/samples.csv", "time_us", "0")),
    case(2, "compare-one-sample-nan", "compare SYN C", copy("SYN"), copy("SYN", "C"),
         edit_csv("C/samples.csv", "time_us", "nan", rows="last")),
    case(2, "compare-json-cand-nan", "compare SYN C --format json", copy("SYN"), copy("SYN", "C"),
         edit_csv("C/results.csv", "time_us", "nan"), edit_csv("C/samples.csv", "time_us", "nan"),
         checks=(strict_json,)),
    case(2, "compare-json-baseline-zero", "compare B SYN --format json", copy("SYN"), copy("SYN", "B"),
         edit_csv("B/results.csv", "time_us", "0"), edit_csv("B/samples.csv", "time_us", "0"), checks=(strict_json,)),
    case(2, "compare-junit-cand-negative", "compare SYN C --format junit", copy("SYN"), copy("SYN", "C"),
         edit_csv("C/results.csv", "time_us", "-1"), edit_csv("C/samples.csv", "time_us", "-1")),
    case(2, "compare-wrong-negative", "compare SYN C", copy("SYN"), copy("SYN", "C"),
         edit_csv("C/results.csv", "wrong", "-1")),
    case(2, "compare-job-zero", "compare SYN C", copy("SYN"), copy("SYN", "C"),
         edit_csv("C/results.csv", "job", "0"), edit_csv("C/samples.csv", "job", "0")),
    case(2, "report-time-nan", "report C -o r.html", copy("SYN", "C"), edit_csv("C/results.csv", "time_us", "nan")),
    case(2, "report-time-text", "report C -o r.html", copy("SYN", "C"), edit_csv("C/results.csv", "time_us", "fast")),
    case(2, "model-fit-time-nan", "model fit C -o m.json", copy("SYN", "C"),
         edit_csv("C/results.csv", "time_us", "nan")),
    case(2, "model-fit-time-negative", "model fit C -o m.json", copy("SYN", "C"),
         edit_csv("C/results.csv", "time_us", "-7")),
    case(2, "model-validate-time-inf", "model validate C", copy("SYN", "C"),
         edit_csv("C/results.csv", "time_us", "inf")),
    case(2, "topo-compare-time-nan", "topo-compare C", copy("TOPO", "C"), edit_csv("C/results.csv", "time_us", "nan")),
    case(2, "model-predict-model-nan", f"{PREDICT} --model m.json", copy("model.json", "m.json"),
         edit_json("m.json", lambda d, s: all_numbers(d, float("nan")))),
    case(2, "import-osu-time-nan", "import osu osu.txt -n 4 --out O", osu_with("8      nan")),
    case(2, "import-osu-time-zero", "import osu osu.txt -n 4 --out O", osu_with("8      0.00")),
    case(2, "import-osu-time-negative", "import osu osu.txt -n 4 --out O", osu_with("8      -13.37")),
    case(2, "import-nccl-text-time-nan", "import nccl-tests nccl.txt --out O", nccl_row8(time_oop="nan")),
    case(2, "import-nccl-text-time-zero", "import nccl-tests nccl.txt --out O", nccl_row8(time_oop="0")),
    case(2, "import-nccl-text-time-negative", "import nccl-tests nccl.txt --out O", nccl_row8(time_oop="-135.8")),
    case(2, "import-nccl-json-time-nan", "import nccl-tests nccl.json --out O", copy(NCCL_JSON, "nccl.json"),
         nccl_json_set(("out_of_place", "time"), float("nan"))),
    case(2, "import-nccl-json-time-negative", "import nccl-tests nccl.json --out O", copy(NCCL_JSON, "nccl.json"),
         nccl_json_set(("in_place", "time"), -10.2)),
    case(2, "import-nccl-json-sample-infinity", "import nccl-tests nccl.json --out O", copy(NCCL_JSON, "nccl.json"),
         nccl_json_set(("out_of_place_per_iter", "times_us"), [10.5, float("inf"), 10.3])),
    case(2, "import-nccl-json-size-text", "import nccl-tests nccl.json --out O", copy(NCCL_JSON, "nccl.json"),
         nccl_json_set(("size",), "1K; rm -rf /")),
]


@pytest.mark.parametrize("c", params(CASES, launching=False))
def test_gate_broken_data(c, tmp_path):
    meets_contract(c, tmp_path)
