"""Hostile inputs, class 3 of issue 20 (crashes exit 1): anything that went wrong that is not a
regression ends in BAD_INPUT (bad input) or, were it a bug, INTERNAL (which the contract refuses),
never FAILED (the contract: tests/hostile_contract.py)."""

import os

import pytest

from hostile_contract import case, meets_contract
from hostile_fixtures import copy, mkdir, params, truncate, twin, write
from commbench.errors import BAD_INPUT, FAILED, NO_VERDICT, OK

CASES = [
    case(3, "compare-o-proc", "compare SYN TWIN -o /proc/nope.txt", *twin("SYN")),
    case(3, "compare-missing-candidate", "compare SYN nope", copy("SYN")),
    case(3, "compare-file-as-folder", "compare SYN file.txt", copy("SYN"), write("file.txt", "hello\n")),
    case(3, "compare-empty-folder", "compare SYN empty", copy("SYN"), mkdir("empty")),
    case(3, "compare-threshold-nan", "compare SYN TWIN --threshold nan", *twin("SYN")),
    case(3, "compare-threshold-negative", "compare SYN TWIN --threshold -5%", *twin("SYN")),
    case(3, "compare-format-unknown", "compare SYN TWIN --format xml", *twin("SYN")),
    case(3, "compare-few-common-points", "compare SYN TOPO", copy("SYN"), copy("TOPO"), expect=(FAILED,),
         note="4 points in common, 28 of the baseline's missing in the candidate: a point not measured fails"),
    case(3, "compare-few-common-points-allowed", "compare SYN TOPO --allow-missing", copy("SYN"), copy("TOPO"),
         expect=(NO_VERDICT,), note="--allow-missing: the 4 points in common decide (all inconclusive: 1 job a side): "
                                   "no verdict, exit 2"),
    case(3, "compare-with-itself", "compare SYN SYN", copy("SYN"),
         note="a folder compared with itself can only say 'unchanged': refused"),
    case(3, "compare-with-itself-by-another-path", "compare SYN ./SYN/", copy("SYN")),
    case(3, "report-missing", "report nope -o r.html"),
    case(3, "model-fit-native-only", "model fit BASE -o m.json", copy("BASE"),
         note="no points the model fits: unusable data"),
    case(3, "model-validate-native-only", "model validate BASE", copy("BASE"),
         note="debatable: nothing it can validate; BAD_INPUT (unusable data) as `model fit` on the same folder"),
    case(3, "model-predict-no-shape", "model predict --intra 450,2 --inter 50,5"),
    case(3, "model-predict-model-binary", "model predict --nodes 2 --ranks-per-node 2 --model m.json",
         write("m.json", bytes(range(256)) * 8)),
    case(3, "model-predict-model-truncated", "model predict --nodes 2 --ranks-per-node 2 --model m.json",
         copy("model.json", "m.json"), truncate("m.json", 0.5)),
    case(3, "topo-compare-single-node", "topo-compare BASE", copy("BASE")),
    case(3, "import-nccl-dev-null", "import nccl-tests /dev/null --out O"),
    case(3, "import-osu-binary", "import osu b.txt -n 4 --out O", write("b.txt", os.urandom(4096))),
    case(3, "unknown-command", "frobnicate"),
]


@pytest.mark.parametrize("c", params(CASES, launching=False))
def test_crash_exit_codes(c, tmp_path):
    meets_contract(c, tmp_path)


@pytest.mark.parametrize("c", params(CASES, launching=True))
def test_crash_exit_codes_on_a_real_run(c, tmp_path, job):
    """The cases that read BASE, a real run (built at first use)."""
    meets_contract(c, tmp_path)
