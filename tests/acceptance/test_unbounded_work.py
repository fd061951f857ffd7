"""Hostile inputs, class 6 of issue 20 (unbounded work): work that would not end, or not fit, is
refused with BAD_INPUT in <= 5 s and <= the contract's LIMIT_MB, before it starts (the contract:
tests/hostile_contract.py; besides it, a run let go is never left "running" in its run.json)."""

import json
import shlex
import signal
from pathlib import Path

import pytest

from conftest import DATA
from hostile_contract import INTERRUPTED, Outcome, Sig, case, meets_contract
from hostile_fixtures import NCCL_JSON, OSU, RUN_SMALL, copy, nccl_json_set, params, write
from commbench.errors import BAD_INPUT, OK
from commbench.folder.schema import RUN_JSON


def million_runs(s: Path) -> None:
    """A suite of 10^6 runs, written compactly (each run an empty mapping: label run<i>)."""
    (s / "million.yaml").write_text("name: million\ndefaults: {backend: mpi, nprocs: 2, sizes: [8], iters: 5}\n"
                                    "runs: [" + "{}," * 1_000_000 + "]\n")


def fifty_mb_suite(s: Path) -> None:
    with open(s / "fifty.yaml", "w") as f:
        f.write("name: fifty\ndefaults: {backend: mpi, nprocs: 2, sizes: [8], iters: 5}\nruns:\n  - label: a\n")
        line = "# " + "x" * 1000 + "\n"
        f.write(line * (50 * 2**20 // len(line)))
        f.write("description: >\n  " + "y" * 1000 + "\n")


def fifty_mb_osu(s: Path) -> None:
    head = (DATA / OSU[5:]).read_text()
    (s / "osu.txt").write_text(head + "4    1.00\n" * (50 * 2**20 // 10))


def alias_bomb() -> str:
    """The billion-laughs document (~430 bytes) inside a suite's description."""
    lines = ["name: bomb", "description:", '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, cur in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"  {cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    lines += ["defaults: {backend: mpi, nprocs: 2, sizes: [8]}", "runs: [{label: a}]"]
    return "\n".join(lines) + "\n"


def not_running(folder: str):
    def check(s: Path, out: Outcome) -> list[str]:
        p = s / folder / RUN_JSON
        try:
            status = json.loads(p.read_text()).get("status") if p.exists() else None
        except ValueError:
            return [f"{folder}/run.json is not JSON"]
        return [f"{folder}/run.json left {status!r}"] if status == "running" else []
    return check


SIZES_10K = ",".join(str(8 * (i + 1)) for i in range(10_000))
CASES = [
    case(6, "yaml-alias-bomb-description", "sweep bomb.yaml --out S", write("bomb.yaml", alias_bomb())),
    case(6, "yaml-alias-bomb-defaults", "sweep bomb.yaml --out S",
         write("bomb.yaml", alias_bomb().replace("description:", "defaults:").replace(
             "defaults: {backend: mpi, nprocs: 2, sizes: [8]}\n", ""))),
    case(6, "yaml-merge-key-alias", "sweep m.yaml --out S",
         write("m.yaml", "name: m\nbase: &b {backend: mpi}\nruns:\n  - <<: *b\n    label: a\n"),
         note="aliases refused (and an unknown top-level field)"),
    case(6, "suite-million-runs", "sweep million.yaml --out S", million_runs),
    case(6, "suite-50mb", "sweep fifty.yaml --out S", fifty_mb_suite),
    case(6, "yaml-nested-100k-lists", "sweep deep.yaml --out S",
         write("deep.yaml", "name: deep\ndescription: " + "[" * 100_000 + "]" * 100_000 + "\nruns: [{label: a}]\n")),
    case(6, "yaml-nested-20k-mappings", "sweep deep.yaml --out S",
         write("deep.yaml", "name: deep\ndefaults: " + "{a: " * 20_000 + "1" + "}" * 20_000
               + "\nruns: [{label: a}]\n")),
    case(6, "suite-100k-sizes", "sweep s.yaml --out S",
         write("s.yaml", "name: s\ndefaults: {backend: mpi, nprocs: 2}\nruns:\n  - label: a\n    sizes: ["
               + ",".join(str(i + 1) for i in range(100_000)) + "]\n")),
    case(6, "suite-repeat-1e9", "sweep s.yaml --out S",
         write("s.yaml", "name: s\ndefaults: {backend: mpi, nprocs: 2, sizes: [8], repeat: 1000000000}\n"
                         "runs: [{label: a}]\n")),
    case(6, "run-n-10000", "run -n 10000 --backend mpi --sizes 8 --out R",
         note="more ranks than cores beyond a factor needs --oversubscribe"),
    case(6, "run-n-64-on-2-cores", "run -n 64 --backend mpi --sizes 8 --out R",
         note="32 ranks per core: beyond any oversubscription factor"),
    case(6, "predict-1e8-nodes-1e6-ranks", "model predict --nodes 100000000 --ranks-per-node 1000000 "
                                           "--intra 450,2 --inter 50,5"),
    case(6, "predict-1e8-sizes", "model predict --nodes 2 --ranks-per-node 2 --intra 450,2 --inter 50,5 "
                                 "-b 8 -e 8G -f 1.0000001"),
    case(6, "run-10000-sizes", ["run", "-n", "2", "--backend", "mpi", "-c", "all_reduce", "--in-place",
                                "--iters", "1", "--warmup", "0", "--sizes", SIZES_10K, "--out", "R"],
         expect=(OK, BAD_INPUT, INTERRUPTED), outputs=("R",), sig=Sig(signal.SIGINT, after_s=20.0, group=True),
         checks=(not_running("R"),), note="a limit on sizes per run refuses it (BAD_INPUT); if accepted it must run "
                                         "(the spec by file, not argv): done (OK), or Ctrl-C at 20 s (INTERRUPTED)"),
    case(6, "run-label-100kb", [*shlex.split(RUN_SMALL), "--label", "L" * 100_000, "--out", "R"],
         expect=(OK, BAD_INPUT), outputs=("R",), checks=(not_running("R"),),
         note="runs (the spec by file, not argv) or a label limit (BAD_INPUT)"),
    case(6, "import-osu-50mb", "import osu osu.txt -n 4 --out O", fifty_mb_osu),
    case(6, "import-nccl-json-1e6-samples", "import nccl-tests nccl.json --out O", copy(NCCL_JSON, "nccl.json"),
         nccl_json_set(("out_of_place_per_iter", "times_us"), [10.5] * 1_000_000)),
]


@pytest.mark.parametrize("c", params(CASES, launching=False))
def test_unbounded_work(c, tmp_path):
    meets_contract(c, tmp_path)


@pytest.mark.parametrize("c", params(CASES, launching=True))
def test_unbounded_work_of_run_and_sweep(c, tmp_path, job):
    """`run` and `sweep`: refused before launching, or (sizes, label) let run."""
    meets_contract(c, tmp_path)
