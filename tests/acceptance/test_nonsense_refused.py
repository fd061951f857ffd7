"""Hostile inputs, class 9 of issue 20 (nonsense accepted): nonsense is refused up front with
BAD_INPUT, not accepted, ignored, or launched to fail (the contract: tests/hostile_contract.py)."""

import pytest

from hostile_contract import case, meets_contract
from hostile_fixtures import NCCL_TXT, OSU, TINY_SUITE, copy, params, resumable, write

P = "model predict --nodes 2 --ranks-per-node 2"
IN = "--intra 450,2 --inter 50,5"
R = "run -n 2 --backend mpi --sizes 8 --out R"


def resume(name, extra):
    return case(9, name, f"run --resume R {extra}", *resumable(), note="an option --resume would ignore is refused")


CASES = [
    case(9, "predict-links-per-node-negative", f"{P} {IN} --links-per-node -3"),
    case(9, "predict-reduce-bw-negative", f"{P} {IN} --reduce-bw -1"),
    case(9, "predict-reduce-bw-nan", f"{P} {IN} --reduce-bw nan"),
    case(9, "predict-intra-negative", f"{P} --intra -450,2 --inter 50,5"),
    case(9, "predict-inter-latency-negative", f"{P} --intra 450,2 --inter 50,-5"),
    case(9, "predict-nodes-zero", f"model predict --nodes 0 --ranks-per-node 2 {IN}"),
    case(9, "predict-step-factor-one", f"{P} {IN} -f 1"),
    case(9, "predict-segment-zero", f"{P} {IN} --segment-bytes 0"),
    case(9, "model-fit-links-negative", "model fit SYN -o m.json --links-per-node -1", copy("SYN")),
    case(9, "model-validate-links-zero", "model validate SYN --links-per-node 0", copy("SYN")),
    case(9, "import-osu-n-1e20", "import osu osu.txt -n 1e20 --out O", copy(OSU, "osu.txt")),
    case(9, "import-osu-n-zero", "import osu osu.txt -n 0 --out O", copy(OSU, "osu.txt")),
    case(9, "import-nccl-collective-unknown", "import nccl-tests nccl.txt --collective broadcastish --out O",
         copy(NCCL_TXT, "nccl.txt")),
    resume("resume-with-n", "-n 4"),
    resume("resume-with-sizes", "--sizes 1M"),
    resume("resume-with-backend", "--backend gloo"),
    resume("resume-with-label", "--label other"),
    resume("resume-with-iters", "--iters 7"),
    resume("resume-with-out", "--out elsewhere"),
    case(9, "run-n-zero", "run -n 0 --backend mpi --sizes 8 --out R"),
    case(9, "run-iters-huge", f"{R} --iters 1000000000000000"),
    case(9, "run-warmup-huge", f"{R} --warmup 1000000000000000"),
    case(9, "run-sizes-1t", "run -n 2 --backend mpi --sizes 1T --out R", note="a buffer no machine here can hold"),
    case(9, "run-sizes-empty", ["run", "-n", "2", "--backend", "mpi", "--sizes", ",", "--out", "R"]),
    case(9, "run-min-time-nan", f"{R} --min-time nan"),
    case(9, "sweep-out-into-run-folder", "sweep tiny.yaml --out BASE", write("tiny.yaml", TINY_SUITE), copy("BASE"),
         note="a sweep inside a run folder would hide it from compare and report"),
    case(9, "sweep-out-inside-run-folder", "sweep tiny.yaml --out BASE/sub", write("tiny.yaml", TINY_SUITE),
         copy("BASE")),
    case(9, "run-out-inside-run-folder", "run -n 2 --backend mpi --sizes 8 --out BASE/sub", copy("BASE"),
         note="debatable: a run inside a run folder hides it the same way"),
]


@pytest.mark.parametrize("c", params(CASES, launching=False))
def test_nonsense_refused(c, tmp_path):
    meets_contract(c, tmp_path)


@pytest.mark.parametrize("c", params(CASES, launching=True))
def test_nonsense_refused_by_run_and_sweep(c, tmp_path, job):
    """`run` and `sweep` (refused before launching), and the cases that read BASE (a real run)."""
    meets_contract(c, tmp_path)
