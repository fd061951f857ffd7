"""Per-rank times from real launches: every timed loop (the C MPI loop, gloo's Python loop, the kernels'
C loop) records each rank's own time and its time outside the calls, `--inject-delay` makes one rank late
inside its timed calls, and `commbench stragglers` names it."""

import json
import random

import pandas as pd
import pytest

from commbench.errors import BAD_INPUT, FAILED, OK
from commbench.folder.schema import RANK_SUMMARY, RANKS_CSV
from conftest import needs_mpirun

SMALL = ["-c", "all_reduce", "-b", "1K", "-e", "64K", "-f", "8", "--out-of-place"]


def _ranks(out):
    return pd.read_csv(out / RANKS_CSV)


@needs_mpirun
def test_a_late_rank_of_the_c_mpi_loop_is_named_and_its_rows_say_so(job, tmp_path):
    late = random.Random().randrange(2)
    out = tmp_path / "run"
    proc = job("run", "-n", 2, "--backend", "mpi", *SMALL, "--inject-delay", f"{late}=0.5", "--json", "--out", out,
               check_rc=OK)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert {r["timer"] for r in rows} == {"native"} and len(rows) == 3  # 1K, 8K, 64K
    for r in rows:  # --json: each rank's median own time and time outside the calls
        assert set(RANK_SUMMARY) <= set(r) and len(r["rank_time_us"]) == 2
        assert r["rank_late_us"][late] > 0.2 * r["time_us"] and r["rank_late_us"][1 - late] == 0
    ranks = _ranks(out)
    assert set(ranks["rank"]) == {0, 1} and (ranks[ranks["rank"] == 1 - late].late_us == 0).all()
    assert (ranks[ranks["rank"] == late].late_us > 0).all()
    samples = pd.read_parquet(out / "samples.parquet")
    assert len(ranks) == 2 * len(samples)  # every sample of every point, for each rank
    meta = json.loads((out / "run.json").read_text())
    assert meta["spec"]["inject_delay"] == f"{late}=0.5"
    judged = job("stragglers", out, "--format", "json")
    assert judged.returncode == FAILED, judged.stderr
    assert [(f["what"], f["ranks"]) for f in json.loads(judged.stdout)["flagged"]] == [("rank", [late])]


def test_gloo_python_loop_and_the_kernels_c_loop_record_the_delay_too(job, tmp_path):
    out = tmp_path / "gloo"
    in_place = [a if a != "--out-of-place" else "--in-place" for a in SMALL]  # gloo's all-reduce has no other form
    job("run", "-n", 2, "--backend", "gloo", *in_place, "--inject-delay", "1=0.5", "--out", out, check_rc=OK)
    ranks = _ranks(out)
    assert (ranks[ranks["rank"] == 1].late_us > 0).all() and (ranks[ranks["rank"] == 0].late_us == 0).all()
    assert json.loads(job("stragglers", out, "--format", "json").stdout)["flagged"][0]["ranks"] == [1]
    out = tmp_path / "kernel"
    job("run", "-n", 2, "--backend", "gloo", "-a", "ring_kernel", *SMALL, "--inject-delay", "0=0.5", "--out", out,
        check_rc=OK)
    rows = pd.read_csv(out / "results.csv")
    assert set(rows.timer) == {"native"}  # the kernel's own C loop
    ranks = _ranks(out)
    assert (ranks[ranks["rank"] == 0].late_us > 0).all() and (ranks[ranks["rank"] == 1].late_us == 0).all()


@needs_mpirun
def test_without_a_delay_no_rank_is_late_and_nothing_is_flagged(job, tmp_path):
    out = tmp_path / "run"
    job("run", "-n", 2, "--backend", "mpi", *SMALL, "--out", out, "--quiet", check_rc=OK)
    assert (_ranks(out).late_us == 0).all()
    judged = job("stragglers", out)
    assert judged.returncode == OK and "OK: no rank or node flagged" in judged.stdout


@pytest.mark.parametrize("args, fragment", [
    (["--inject-delay", "2=0.3"], "rank 2 is not a rank of the run (0 to 1)"),
    (["--inject-delay", "one=0.3"], "expected RANK=FRACTION"),
    (["--inject-delay", "1=0"], "the fraction must be above 0"),
    (["--inject-delay", "1=0.1,1=0.2"], "names rank 1 twice"),
    (["--node-link-rate", "1=600mbit"], "applies to emulated clusters only"),
    (["--emulate", "2x1", "--node-link-rate", "2=600mbit"], "node 2 is not a node of --emulate 2x1"),
    (["--emulate", "2x1", "--node-link-rate", "1=fast"], "expected NODE=RATE"),
])
def test_a_bad_rehearsal_is_one_line_and_exit_2(tmp_path, args, fragment):
    from conftest import commbench

    out = commbench("run", "-n", 2, "--backend", "gloo", *SMALL, *args, "--out", tmp_path / "x")
    assert out.returncode == BAD_INPUT, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and not (tmp_path / "x").exists()
