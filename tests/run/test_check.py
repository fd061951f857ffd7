"""`commbench check` end to end: the emulated cluster with one node's link slower (drawn at random) is named,
and nothing else; every row is a node's all-reduce, a link or the cluster; a job that cannot span two nodes
is refused before it starts (or by its ranks) with one line and exit 2."""

import json
import random

import pandas as pd
import pytest

from commbench.errors import BAD_INPUT, FAILED, OK
from conftest import commbench, needs_mpirun


def _check(job, tmp_path, *args, name="check"):
    out = tmp_path / name
    proc = job("check", "--json", "--out", out, *args)
    assert proc.returncode in (OK, FAILED), proc.stderr
    return proc, json.loads(proc.stdout), out


@needs_mpirun
def test_the_slow_node_of_an_emulated_cluster_is_named_alone(netns, tmp_path):
    slow = random.Random().randrange(4)
    proc, doc, out = _check(commbench, tmp_path, "--emulate", "4x1", "--link-rate", "1gbit", "--node-link-rate",
                            f"{slow}=500mbit", "--size", "2M")
    assert proc.returncode == FAILED and doc["verdict"] == "flagged"
    assert [(f["what"], f["nodes"], f["hosts"]) for f in doc["flagged"]] == [("node", [slow], [doc["hosts"][slow]])]
    f = doc["flagged"][0]
    assert f["unit"] == "GB/s" and f["measured"] < 0.85 * f["expected"] and "of the cluster's median" in f["why"]
    rows = pd.read_csv(out / "results.csv")
    assert sorted(rows.check_scope.value_counts().items()) == [("cluster", 1), ("link", 6)]
    assert (rows.wrong == 0).all() and set(rows[rows.check_scope == "link"].collective) == {"send_recv"}
    meta = json.loads((out / "run.json").read_text())
    assert meta["emulation"]["node_link_rates"] == {str(slow): "500mbit"} and meta["status"] == "completed"
    assert doc["repetitions"] == meta["check"]["repetitions"] >= 3


@needs_mpirun
def test_a_healthy_cluster_of_nodes_of_two_ranks_flags_nothing_and_measures_each_node(netns, tmp_path):
    proc, doc, out = _check(commbench, tmp_path, "--emulate", "3x2", "--size", "1M")
    assert proc.returncode == OK and doc["verdict"] == "ok" and doc["flagged"] == []
    rows = pd.read_csv(out / "results.csv")
    nodes = rows[rows.check_scope == "node"]
    assert sorted(nodes.check_nodes.astype(str)) == ["0", "1", "2"] and set(nodes.world_size) == {2}
    assert sorted(rows[rows.check_scope == "link"].check_nodes) == ["0-1", "0-2", "1-2"]
    paths = rows[rows.check_scope == "path"]
    assert sorted(paths.check_ranks) == ["0-1", "2-3", "4-5"] and sorted(paths.check_nodes.astype(str)) == ["0", "1", "2"]
    assert int(rows[rows.check_scope == "cluster"].world_size.iloc[0]) == 6
    inside = [f for f in doc["findings"] if f["unit"] == "us" or f["ranks"]]
    assert len(inside) == 6 and {f["verdict"] for f in inside} == {"unjudged"}  # emulated: one machine's cores
    text = commbench("check", "--emulate", "2x1", "--size", "64K", "--out", tmp_path / "text")
    assert text.returncode == OK and "OK: no node or link flagged (2 nodes)" in text.stdout


def test_gloo_checks_the_emulated_cluster_too(netns, tmp_path):
    proc, doc, out = _check(commbench, tmp_path, "--emulate", "3x1", "--backend", "gloo", "--size", "1M",
                            "--node-link-rate", "1=400mbit")
    assert [(f["what"], f["nodes"]) for f in doc["flagged"]] == [("node", [1])]
    assert set(pd.read_csv(out / "results.csv").backend) == {"gloo"}


@needs_mpirun
def test_ranks_that_all_land_on_one_node_are_refused_by_the_ranks(job, tmp_path):
    out = job("check", "--backend", "mpi", "-n", 2, "--launcher", "mpirun", "--launcher-args", "--host localhost:2",
              "--size", "64K", "--out", tmp_path / "one")
    assert out.returncode == BAD_INPUT, out.stderr
    line = [x for x in out.stderr.splitlines() if "commbench: error:" in x]
    assert len(line) == 1 and "this job's 2 ranks are on one node" in line[0] and "Traceback" not in out.stderr


@pytest.mark.parametrize("args, fragment", [
    (["--emulate", "1x2"], "--emulate 1x2 has one node"),
    (["-n", 2, "--backend", "gloo"], "launcher local starts every rank on this machine"),
    (["--emulate", "3x1", "--node-link-rate", "3=1gbit"], "node 3 is not a node of --emulate 3x1"),
    (["--emulate", "2x1", "--link-rate", "fast"], "invalid --link-rate 'fast'"),
    (["--emulate", "2x1", "--peers", -1], "invalid --peers -1"),
    (["--emulate", "2x1", "--format", "yaml"], "unknown format 'yaml'"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragment):
    out = commbench("check", *args, "--out", tmp_path / "x")
    assert out.returncode == BAD_INPUT, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and not (tmp_path / "x").exists()


def test_a_one_node_slurm_allocation_is_refused(slurm, tmp_path):
    import sys

    from conftest import ROOT

    out = tmp_path / "slurm"
    proc = slurm.run("salloc", "-n", 2, sys.executable, "-m", "commbench", "check", "--backend", "gloo", "--out", out,
                     cwd=ROOT)
    assert proc.returncode == BAD_INPUT and not out.exists()
    line = [x for x in proc.stderr.splitlines() if "commbench: error:" in x]
    assert len(line) == 1 and "has one node" in line[0]


@pytest.mark.parametrize("text, fragment", [
    ('{"link_gbs": 1}', "unknown key 'link_gbs'"), ('{"link_gbps": -1}', "must be a positive number"),
    ("[1]", "expected an object"), ("nope", "not JSON"),
])
def test_a_floors_file_that_does_not_read_is_refused_before_anything_starts(tmp_path, text, fragment):
    floors = tmp_path / "floors.json"
    floors.write_text(text)
    out = commbench("check", "--emulate", "2x1", "--floors", floors, "--out", tmp_path / "x")
    assert out.returncode == BAD_INPUT and fragment in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


@needs_mpirun
def test_a_floor_above_what_the_links_carry_flags_them(netns, tmp_path):
    floors = tmp_path / "floors.json"
    floors.write_text('{"link_gbps": 1000}')
    proc, doc, _ = _check(commbench, tmp_path, "--emulate", "2x1", "--size", "256K", "--floors", floors)
    assert proc.returncode == FAILED
    assert sorted((f["what"], f["nodes"]) for f in doc["flagged"]) == [("link", [0, 1]), ("node", [0]), ("node", [1])]
    assert all("past the floor 1000 GB/s" in f["why"] and f["expected"] == 1000 for f in doc["flagged"])
