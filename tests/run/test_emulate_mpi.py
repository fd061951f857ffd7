"""The emulated cluster with MPI: one real mpirun in the bridge namespace, its daemons started in each
node's namespace by the launch agent (commbench/run/netns_agent.sh) under host names of their own,
Open MPI's TCP transport over the shaped links. Needs root, iproute2 and Open MPI; every test
checks that no namespace and no MPI daemon is left."""

import json
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from commbench.run import emulate
from conftest import ROOT, commbench, load_run, start_hung_emulated_run, needs_mpirun
from commbench.errors import FAILED, NO_VERDICT, OK
from sweep_checks import check_sweep

pytestmark = needs_mpirun


def _daemons() -> set[int]:
    """The pids of Open MPI's daemons alive (a killed one that init has not reaped yet is gone)."""
    out = subprocess.run(["ps", "-eo", "pid=,stat=,comm="], capture_output=True, text=True).stdout
    return {int(f[0]) for f in map(str.split, out.splitlines()) if f[2:] == ["prted"] and not f[1].startswith("Z")}


@pytest.fixture
def no_leftovers():
    """Fails the test if it leaves a namespace or an MPI daemon; removes what it left, pass or fail."""
    before, daemons = set(emulate.namespaces()), _daemons()
    yield
    left = [ns for ns in emulate.namespaces() if ns not in before and ns.startswith("cb")]
    for ns in left:
        emulate._delete(ns)
    assert not left, f"namespaces left behind: {left}"
    assert _daemons() <= daemons


def _emulated(tmp_path, *args, **kw):
    out = tmp_path / "run"
    return commbench("run", "--backend", "mpi", "--out", out, "--quiet", *args, **kw), out


def test_mpi_across_2x2_nodes(netns, tmp_path, no_leftovers):
    """native: Open MPI's flat coll/tuned (coll/han's priority 0), native_han its coll/han, in one run."""
    algorithms = "native,native_han,ring,ring_topology,hierarchical,hierarchical_kernel"
    _, out = _emulated(tmp_path, "--emulate", "2x2", "--link-rate", "2gbit", "-a", algorithms,
                       "-c", "all_reduce,all_gather", "--sizes", "4100,1M", "--iters", 3, "-w", 1, check_rc=OK,
                       env={"OMPI_MCA_coll_han_priority": "0"})
    rows, samples, meta = load_run(out)
    check_sweep(rows, samples, meta, 4, meta["planned_points"] - len(meta["skipped"]))
    assert (rows.wrong == 0).all() and set(rows.algorithm) == set(algorithms.split(","))
    hosts = meta["emulation"]["hosts"]
    assert meta["emulation"]["launcher"] == "mpirun" and len(set(hosts)) == 2
    assert meta["node_of_rank"] == [0, 0, 1, 1] and meta["nodes"] == 2
    assert [r["hostname"] for r in meta["ranks"]] == [hosts[0], hosts[0], hosts[1], hosts[1]]
    big = rows[(rows.size_bytes >= 2**20) & rows.internode_bytes_expected.notna()]
    assert set(big.algorithm) == set(algorithms.split(",")) - {"native", "native_han"}
    ratio = big.internode_bytes_measured / big.internode_bytes_expected
    assert ratio.between(0.99, 1.05).all(), big[["algorithm", "collective", "internode_bytes_measured",
                                                 "internode_bytes_expected"]]
    native = rows[(rows.algorithm == "native") & (rows.size_bytes >= 2**20)]
    assert (native.internode_bytes_measured > 0).all()  # Open MPI's own all-reduce crossed the links: TCP
    # coll/han's all-gather: each node's blocks cross once (1 MB in all over 2 nodes); coll/tuned's, flat, more
    gathered = rows[(rows.collective == "all_gather") & (rows.size_bytes == 2**20)].set_index(["algorithm", "in_place"])
    han, tuned = gathered.loc["native_han"].internode_bytes_measured, gathered.loc["native"].internode_bytes_measured
    assert (han / 2**20).between(0.99, 1.05).all() and (tuned > 1.2 * han).all(), gathered.internode_bytes_measured
    assert meta["rank0_environment"]["OMPI_MCA_coll_han_priority"] == "0"
    choice = rows.set_index("algorithm").library_choice
    assert (choice.loc["native_han"] == "coll/han").all() and choice.loc["native"].isna().all()
    assert set(meta["floors"]) == set(hosts)  # one machine: measured once, said for each of its hosts


def test_mpi_round_robin_placement(netns, tmp_path, no_leftovers):
    _, out = _emulated(tmp_path, "--emulate", "2x2", "--placement", "round-robin", "-a", "ring,ring_topology",
                       "-c", "all_reduce", "--sizes", "1M", "--in-place", "--iters", 2, "-w", 1, check_rc=OK)
    rows, _, meta = load_run(out)
    assert meta["node_of_rank"] == [0, 1, 0, 1] and (rows.wrong == 0).all()
    bytes_of = rows.set_index("algorithm").internode_bytes_measured
    assert bytes_of["ring_topology"] < 0.55 * bytes_of["ring"]  # every rank-order ring edge crosses nodes


def test_mpi_sigterm_tears_down_the_daemons_and_namespaces(netns, tmp_path, no_leftovers):
    out = tmp_path / "run"
    proc, seen = start_hung_emulated_run("mpi", out)
    nodes = [emulate.node_ns(i, proc.pid) for i in range(2)]
    assert set(nodes) < set(emulate.namespaces()), seen
    assert all(subprocess.run(["ip", "netns", "pids", n], capture_output=True, text=True).stdout.split()
               for n in nodes), "a node's namespace runs nothing: its daemon is not inside"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert not [n for n in emulate.namespaces() if n.startswith(f"cb{proc.pid}")]
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"


def test_a_namespace_with_a_process_in_it_is_emptied_and_deleted(netns, no_leftovers):
    ns = f"cb{2**22 + 54321}n0"  # a dead run's (no such pid): removed by the next emulated run
    subprocess.run(["ip", "netns", "add", ns], check=True)
    sleeper = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "600"])
    try:
        assert emulate.remove_stale() == [ns]
        assert sleeper.wait(timeout=10) == -signal.SIGKILL and ns not in emulate.namespaces()
    finally:
        sleeper.kill()


def test_ab_pairs_two_algorithms_on_one_emulated_cluster(netns, tmp_path, no_leftovers):
    """`commbench ab --emulate`: one cluster for both sides, built once. Sides one job can hold (ring
    against hierarchical_kernel) take in-process turns; sides that need a job each (an MCA variable on
    one side) take rounds of launches on the same cluster."""
    out = tmp_path / "ab"
    proc = commbench("ab", "--emulate", "2x2", "--backend", "mpi", "-c", "all_reduce", "--sizes", "4M", "--in-place",
                     "--args-a", "-a ring", "--args-b", "-a hierarchical_kernel", "--rounds", "1", "--out", out,
                     "--format", "json", env={})
    assert proc.returncode in (OK, FAILED, NO_VERDICT), proc.stderr  # the link's speed is not this test's
    points = json.loads(proc.stdout)["points"]
    assert len(points) == 1 and points[0]["jobs"] == [8, 8] and points[0]["key"]["world_size"] == "4", points
    rows, _, meta = load_run(out)
    assert meta["ab"]["grain"] == "in-process" and meta["launcher"] == "emulated" and meta["status"] == "completed"
    assert meta["emulation"]["nodes"] == 2 and meta["emulation"]["launcher"] == "mpirun"
    assert set(zip(rows.side, rows.algorithm)) == {("A", "ring"), ("B", "hierarchical_kernel")}
    assert (rows.wrong == 0).all() and (rows.placement == "block").all()  # (link bytes: run's rows only)
    # the rows say what ran, as run's: 2 chunks of 4 MB, pipelined (on the CPU)
    choice = rows.set_index("side").library_choice
    assert choice["B"] == "pipelined" and pd.isna(choice["A"])

    out = tmp_path / "launches"
    proc = commbench("ab", "--emulate", "2x1", "--backend", "mpi", "-c", "all_reduce", "--sizes", "64K", "-a", "native",
                     "--env-b", "OMPI_MCA_coll_han_priority=100", "--rounds", "2", "--out", out, env={})
    assert proc.returncode in (OK, NO_VERDICT), proc.stderr  # two launch pairs: likely too few to judge
    _, _, meta = load_run(out)
    assert meta["ab"]["grain"] == "launch" and "one job at a time" in meta["ab"]["grain_reason"]
    assert meta["status"] == "completed" and meta["rounds"] == 2


def test_ab_sigterm_tears_down_the_cluster(netns, tmp_path, no_leftovers):
    out = tmp_path / "ab"
    proc = subprocess.Popen([sys.executable, "-m", "commbench", "ab", "--emulate", "2x1", "--backend", "mpi", "-c",
                             "all_reduce", "--sizes", "4M", "--args-a", "-a ring", "--args-b", "-a native",
                             "--rounds", "32", "--budget", "10m", "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "results.csv").exists() or not (out / "results.csv").read_text().count("\n") > 1:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    nodes = [emulate.node_ns(i, proc.pid) for i in range(2)]
    assert set(nodes) < set(emulate.namespaces())
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert not [n for n in emulate.namespaces() if n.startswith(f"cb{proc.pid}")]
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
