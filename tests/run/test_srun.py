"""Slurm for real, on a live one-node cluster (the `slurm` fixture, tests/slurm_cluster.py): runs
inside salloc take the allocation's size and launcher (srun for gloo, for MPI the srun plugin that
forms a world, else mpirun), separate MPI singletons and a wrong -n stop with one line (exit 1),
more ranks than allocated is refused (exit 2), and the docs' sbatch script runs a suite whose
results `commbench report` renders."""

import json
import re
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from commbench import slurm as slurm_env
from conftest import ROOT, load_run
from commbench.errors import BAD_INPUT, FAILED, NO_VERDICT, OK

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a live Slurm needs Linux")
TINY = ["-c", "all_reduce", "-b", 8, "-e", 64, "--iters", 5, "--quiet"]
COMMBENCH = [sys.executable, "-m", "commbench"]
SINGLETONS = "srun started 2 separate MPI processes: this MPI has no PMI support for srun"


def _ok(proc):
    assert proc.returncode == OK, f"rc={proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc


def _world_of(out: Path, nprocs: int = 2):
    rows, _, meta = load_run(out)
    assert (rows.world_size == nprocs).all() and (rows.wrong == 0).all() and len(rows) > 0
    assert meta["world_size"] == nprocs and meta["world"]["size"] == nprocs and meta["status"] == "completed"
    return meta


def _one_line(stderr: str, text: str) -> str:
    lines = [line for line in stderr.splitlines() if text in line]
    assert len(lines) == 1, stderr
    return lines[0]


def test_salloc_mpi_takes_the_allocation_and_a_pmi_that_works(slurm, tmp_path):
    """salloc -n 2 commbench run: 2 ranks (not the default 4), through srun with the plugin the
    probe found (pmix where Slurm can load libpmix), else mpirun; run.json names job and PMI."""
    out = tmp_path / "mpi"
    proc = _ok(slurm.run("salloc", "-n", 2, *COMMBENCH, "run", "--backend", "mpi", *TINY, "--out", out, cwd=ROOT))
    meta = _world_of(out)
    assert meta["spec"]["nprocs"] == 2 and meta["spec"]["ranks_per_node"] == 2
    job = meta["slurm"]
    assert job["job_id"].isdigit() and job["partition"] == "debug" and job["tasks"] == 2 and job["num_nodes"] == 1
    assert job["nodes"] == [meta["ranks"][0]["hostname"]]
    libpmix = list(Path("/usr/lib").glob("*/pmix2/lib/libpmix.so")) + list(Path("/usr/lib").glob("*/libpmix.so"))
    if meta["launcher"] == "srun":
        assert "--mpi=pmix" in meta["launch_argv"] and meta["world"]["pmi"] == "pmix"
        assert meta["rank0_environment"]["PMIX_MCA_psec"] == "native" and "Sorry!" not in proc.stderr  # no help boxes
    else:
        assert not libpmix and meta["launcher"] == "mpirun"  # no srun plugin forms a world without libpmix.so


def test_salloc_gloo_runs_under_srun(slurm, tmp_path):
    """gloo under srun: rank and world from SLURM_*, MASTER_ADDR/PORT derived from the step."""
    out = tmp_path / "gloo"
    _ok(slurm.run("salloc", "-n", 2, *COMMBENCH, "run", "--backend", "gloo", *TINY, "--out", out, cwd=ROOT))
    meta = _world_of(out)
    assert meta["launcher"] == "srun" and meta["topology_source"] == "slurm" and meta["world"]["pmi"] is None
    env = meta["rank0_environment"]
    assert env["MASTER_ADDR"] == "127.0.0.1" and 10000 <= int(env["MASTER_PORT"]) < 32400


def test_salloc_mpirun_reads_the_allocation(slurm, tmp_path):
    """--launcher mpirun inside the allocation: Open MPI takes its slots from Slurm."""
    out = tmp_path / "mpirun"
    _ok(slurm.run("salloc", "-n", 2, *COMMBENCH, "run", "--backend", "mpi", "--launcher", "mpirun", *TINY, "--out", out,
                  cwd=ROOT))
    meta = _world_of(out)
    assert meta["launcher"] == "mpirun" and meta["topology_source"] == "openmpi"


def test_separate_mpi_processes_stop_with_one_line(slurm, tmp_path):
    """srun without a PMI starts one-rank MPI worlds: exit 1, one line from rank 0, no rows."""
    out = tmp_path / "singletons"
    proc = slurm.run("srun", "-n", 2, "--mpi=none", *COMMBENCH, "run", "--backend", "mpi", *TINY, "--out", out,
                     cwd=ROOT)
    assert proc.returncode == FAILED and "@@commbench" not in proc.stdout
    assert "use --launcher mpirun inside the allocation, or srun --mpi=pmix" in _one_line(proc.stderr, SINGLETONS)
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "failed" and SINGLETONS in meta["error"] and not (out / "results.csv").exists()
    # launched by commbench with the plugin forced to none: the parent says it once, and fails
    proc = slurm.run(*COMMBENCH, "run", "-n", 2, "--launcher", "srun", "--launcher-args=--mpi=none", "--backend", "mpi",
                     *TINY, "--out", tmp_path / "launched", cwd=ROOT)
    assert proc.returncode == FAILED and SINGLETONS in _one_line(proc.stderr, "commbench: failed")
    assert not (tmp_path / "launched" / "results.csv").exists()


def test_wrong_n_inside_a_started_job_stops(slurm, tmp_path):
    proc = slurm.run("srun", "-n", 2, *COMMBENCH, "run", "-n", 3, "--backend", "gloo", *TINY, "--out", tmp_path / "n",
                     cwd=ROOT)
    assert proc.returncode == FAILED
    assert "srun started 2 ranks, not the 3 asked for with -n" in _one_line(proc.stderr, "WorldError")


def test_more_ranks_than_allocated_is_refused(slurm, tmp_path):
    out = tmp_path / "more"
    proc = slurm.run("salloc", "-n", 1, *COMMBENCH, "run", "-n", 2, "--backend", "gloo", *TINY, "--out", out, cwd=ROOT)
    assert proc.returncode == BAD_INPUT and not out.exists()
    line = _one_line(proc.stderr, "commbench: error:")
    assert re.search(r"-n 2 is more ranks than Slurm job \d+ has tasks \(1\)", line) and "Traceback" not in proc.stderr


def test_readme_sbatch_script_runs_a_suite_that_reports(slurm, tmp_path):
    """The docs' script (docs/how-to/slurm.md), as documented, through sbatch on 1 node x 2 tasks (no GPUs here)."""
    script = re.search(r"```bash\n(#!/bin/bash\n#SBATCH.*?)```", (ROOT / "docs/how-to/slurm.md").read_text(),
                       re.S).group(1)
    (tmp_path / "commbench.sbatch").write_text(script)
    (tmp_path / "tiny.yaml").write_text(
        "name: tiny\ndefaults: {collective: all_reduce, min_bytes: 8, max_bytes: 64, iters: 5}\n"
        "runs:\n  - {label: mpi, backend: mpi}\n  - {label: gloo, backend: gloo}\n")
    job_id = _ok(slurm.run("sbatch", "--parsable", "--nodes=1", "--ntasks-per-node=2", "--gpus-per-node=0",
                           f"--chdir={tmp_path}", f"--output={tmp_path}/job.out", tmp_path / "commbench.sbatch",
                           "tiny.yaml", "results/tiny")).stdout.strip().split(";")[0]
    assert _finished(slurm, job_id) == ("COMPLETED", "0:0"), (tmp_path / "job.out").read_text()
    sweep = tmp_path / "results" / "tiny"
    assert "OK: 2 runs, 0 failed" in (tmp_path / "job.out").read_text()
    for label in ("mpi", "gloo"):
        meta = _world_of(sweep / label)
        assert meta["slurm"]["job_id"] == job_id and meta["launcher"] in ("srun", "mpirun")
    page = (tmp_path / "results" / "tiny.html").read_text()
    assert "Plotly" in page and "tiny" in page and len(pd.read_csv(sweep / "gloo" / "results.csv")) > 0


def _finished(slurm, job_id: str, timeout_s: float = 600) -> tuple[str, str]:
    """Wait for a batch job (polling: sbatch --wait backs off to tens of seconds); its state and exit code."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        info = dict(f.split("=", 1) for f in _ok(slurm.run("scontrol", "-o", "show", "job", job_id)).stdout.split()
                    if "=" in f)
        if info["JobState"] not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            return info["JobState"], info["ExitCode"]
        time.sleep(0.5)
    raise AssertionError(f"batch job {job_id} still {info['JobState']} after {timeout_s} s")


def test_hostlists_read_as_scontrol_reads_them(slurm):
    lists = ["node[01-03,07]", "gpu-a[1-2]b[3,5],x", "n[8-11],login", "c[098-101]"]
    for text in lists:
        proc = _ok(slurm.run("scontrol", "show", "hostnames", text))
        assert slurm_env.expand_hostlist(text) == proc.stdout.split(), text


def test_ab_inside_an_allocation_takes_rounds_of_srun_launches(slurm, tmp_path):
    """commbench ab under salloc: srun starts the sides (two steps might not fit the allocation at
    once, so rounds of launches), the side's variable reaches every rank of every step."""
    out = tmp_path / "ab"
    proc = slurm.run("salloc", "-n", 2, *COMMBENCH, "ab", "--backend", "gloo", "-c", "all_reduce", "--sizes", "64",
                     "--in-place", "--env-b", "COMMBENCH_AB_PROBE=1", "--rounds", 2, "--quiet", "--out", out, cwd=ROOT)
    assert proc.returncode in (OK, FAILED, NO_VERDICT), f"rc={proc.returncode}\n{proc.stderr[-3000:]}"
    meta = json.loads((out / "run.json").read_text())
    assert meta["launcher"] == "srun" and meta["ab"]["grain"] == "launch" and meta["status"] == "completed"
    assert "Slurm allocation" in meta["ab"]["grain_reason"] and meta["rounds"] == 2
    rows = pd.read_csv(out / "results.csv")
    assert set(rows.side) == {"A", "B"} and set(rows["round"]) == {1, 2} and (rows.wrong == 0).all()
