"""The emulated cluster end to end: real namespaces, rate-limited veths, one torchrun agent per
node, gloo across them. Needs root and iproute2; every test checks that no namespace is left."""

import json
import os
import re
import signal
import subprocess
import sys

import pandas as pd
import pytest

from commbench.kernels.host import compiler
from commbench.run import emulate
from conftest import commbench, fault_env, load_run, start_hung_emulated_run
from sweep_checks import check_sweep
from commbench.errors import BAD_INPUT, FAILED, NO_VERDICT, OK

pytest.importorskip("torch")
# hierarchical_kernel where the host build of the kernels can be made (its node kernels nap beside gloo)
ALL = "native,ring,ring_topology,tree,dbtree,rhd,hierarchical" + (",hierarchical_kernel" if compiler() else "")


@pytest.fixture
def no_leftovers():
    """Fails the test if it leaves a namespace; removes any it left, pass or fail."""
    before = set(emulate.namespaces())
    yield
    left = [ns for ns in emulate.namespaces() if ns not in before and ns.startswith("cb")]
    for ns in left:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    assert not left, f"namespaces left behind: {left}"


def _emulated(tmp_path, *args, **kw):
    out = tmp_path / "run"
    proc = commbench("run", "--backend", "gloo", "--out", out, "--quiet", *args, **kw)
    return proc, out


def test_every_algorithm_on_2x2(netns, tmp_path, no_leftovers):
    proc, out = _emulated(tmp_path, "--emulate", "2x2", "--link-rate", "2gbit", "-a", ALL, "--sizes", "4100,1M",
                          "--iters", 3, "-w", 1, "--segment-bytes", "64K", check_rc=OK)
    rows, samples, meta = load_run(out)
    check_sweep(rows, samples, meta, 4, meta["planned_points"] - len(meta["skipped"]))
    assert (rows.wrong == 0).all() and set(rows.algorithm) == set(ALL.split(","))
    assert meta["node_of_rank"] == [0, 0, 1, 1] and meta["nodes"] == 2
    assert meta["emulation"]["link_rate"] == "2gbit" and len(meta["emulation"]["namespaces"]) == 2
    assert [[n["mtu"] for n in m["nics"]] for m in meta["machines"]] == [[9000], [9000]]  # each node's veth
    big = rows[(rows.size_bytes >= 2**20) & rows.internode_bytes_expected.notna()]
    assert set(big.algorithm) == set(ALL.split(",")) - {"native"}
    ratio = big.internode_bytes_measured / big.internode_bytes_expected
    assert ratio.between(0.99, 1.05).all(), big[["algorithm", "collective", "internode_bytes_measured",
                                                 "internode_bytes_expected"]]
    ar = big[big.collective == "all_reduce"].set_index(["algorithm", "in_place"]).internode_bytes_measured
    assert (ar["hierarchical"] < ar["ring"]).all()  # 2(M-1)N against 1.5N per node link
    assert (rows.placement == "block").all()
    table = proc.stderr.split("speedup over the flat ring)", 1)  # the comparison table after the run
    assert len(table) == 2 and re.search(r"ring_ .*\n.* topology", table[1])
    assert all(name in table[1] for name in ("native", "hierarchical"))


def test_round_robin_placement(netns, tmp_path, no_leftovers, capsys):
    _, out = _emulated(tmp_path, "--emulate", "2x2", "--placement", "round-robin", "-a", "ring,ring_topology",
                       "-c", "all_reduce", "--sizes", "1M", "--in-place", "--iters", 2, "-w", 1, check_rc=OK)
    rows, _, meta = load_run(out)
    assert meta["node_of_rank"] == [0, 1, 0, 1]
    bytes_of = rows.set_index("algorithm").internode_bytes_measured
    assert bytes_of["ring_topology"] < 0.55 * bytes_of["ring"]  # every rank-order ring edge crosses nodes
    from commbench.cli import app

    capsys.readouterr()
    app(["topo-compare", str(out), "--csv", str(tmp_path / "c.csv")], standalone_mode=False)  # in this process
    err = capsys.readouterr().err
    assert "(speedup over the flat ring)" in err and re.search(r"ring_ *\n.* topology", err)  # a header word a line
    table = pd.read_csv(tmp_path / "c.csv")
    assert table["speedup:ring_topology"].iloc[0] > 1


def test_ab_pairs_two_algorithms_across_the_emulated_nodes(netns, tmp_path, no_leftovers):
    """`commbench ab --emulate` over gloo: a torchrun agent per node's namespace, both sides in one job."""
    out = tmp_path / "ab"
    proc = commbench("ab", "--emulate", "2x2", "--backend", "gloo", "-c", "all_reduce", "--sizes", "64K",
                     "--args-a", "-a ring", "--args-b", "-a hierarchical", "--rounds", "1", "--out", out, env={})
    assert proc.returncode in (OK, FAILED, NO_VERDICT), proc.stderr  # the link's speed is not this test's
    rows, _, meta = load_run(out)
    assert meta["ab"]["grain"] == "in-process" and meta["emulation"]["launcher"] == "torchrun"
    assert meta["status"] == "completed" and meta["nodes"] == 2 and (rows.wrong == 0).all()
    assert set(zip(rows.side, rows.algorithm)) == {("A", "ring"), ("B", "hierarchical")}
    # sides of a job each: one torchrun launch after another on the same cluster (node 0's port free again)
    proc = commbench("ab", "--emulate", "2x1", "--backend", "gloo", "-c", "all_reduce", "--sizes", "4K", "--in-place",
                     "--env-b", "X=1", "--rounds", "2", "--out", tmp_path / "launches", env={})
    assert proc.returncode in (OK, NO_VERDICT), proc.stderr  # two launch pairs: likely too few to judge
    _, _, meta = load_run(tmp_path / "launches")
    assert meta["ab"]["grain"] == "launch" and meta["status"] == "completed" and meta["rounds"] == 2


def test_failed_run_leaves_nothing(netns, tmp_path, no_leftovers):
    proc, out = _emulated(tmp_path, "--emulate", "2x1", "--sizes", "1K", "--timeout", 1, "-w", 1,
                          env=fault_env(hang=1))
    assert proc.returncode == FAILED, proc.stderr
    assert json.loads((out / "run.json").read_text())["status"] == "failed"


@pytest.mark.parametrize("hosts", ["--host a,b", "--hostfile=/etc/hosts", "-H a"])
def test_launcher_arguments_that_place_ranks_are_refused_beside_emulate(netns, tmp_path, no_leftovers, hosts):
    """Issue 66: `--launcher-args '--host a,b'` won over `--emulate 3x1` (3 ranks on 2 nodes, exit 0)."""
    proc, out = _emulated(tmp_path, "--emulate", "3x1", "--sizes", "1K", "--launcher-args", hosts)
    assert proc.returncode == BAD_INPUT, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"commbench: error: --launcher-args {hosts.split()[0]} places ranks on hosts, which --emulate lays out itself "
        "(its nodes, --ranks-per-node, --placement): leave it out"]
    assert not out.exists()


def test_sigterm_tears_down(netns, tmp_path, no_leftovers):
    out = tmp_path / "run"
    proc, seen = start_hung_emulated_run("gloo", out)
    assert len([n for n in emulate.namespaces() if n.startswith(f"cb{proc.pid}")]) >= 3, seen
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "commbench: interrupted: SIGTERM" in err, err
    assert not [n for n in emulate.namespaces() if n.startswith(f"cb{proc.pid}")]
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"


def test_stale_namespaces_of_dead_runs_are_removed(netns, tmp_path, no_leftovers):
    dead = 2**22 + 12345  # above the default pid_max: no such process
    subprocess.run(["ip", "netns", "add", f"cb{dead}n0"], check=True)
    subprocess.run(["ip", "netns", "add", "cbkeep"], check=True)  # not ours: left alone
    try:
        assert emulate.remove_stale() == [f"cb{dead}n0"]
        assert "cbkeep" in emulate.namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", "cbkeep"], capture_output=True)


def test_not_root_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    """As a user without root (os.geteuid stands in for one: this machine runs tests as root)."""
    from commbench import cli

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(sys, "argv", ["commbench", "run", "--backend", "gloo", "--emulate", "2x1", "--sizes", "1K",
                                      "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit) as stop:
        cli.main()
    assert stop.value.code == BAD_INPUT
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "needs root" in lines[0], lines
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("backend", ["mpi", "gloo"])
def test_split_groups_run_at_once_across_the_emulated_nodes(netns, tmp_path, no_leftovers, backend):
    """--split mod:2 on 2x2: groups {0,2} and {1,3}, each across the link, both at once, exact; the link
    counters see both groups' bytes (the contention's figures: benchmarks/split_contention.py)."""
    out = tmp_path / "run"
    commbench("run", "--backend", backend, "--out", out, "--quiet", "--emulate", "2x2", "--split", "mod:2",
              "-c", "all_reduce,all_to_allv", "-a", "native,ring,pairwise", "--sizes", "64K", "--iters", 3, "-w", 1,
              check_rc=OK)
    rows, _, meta = load_run(out)
    # both modes of all-reduce (gloo's all_reduce: in place only), all_to_allv out of place
    assert (rows.wrong == 0).all() and len(rows) == (6 if backend == "mpi" else 5)
    assert set(rows.algorithm) == {"native", "ring", "pairwise"}
    assert (rows.world_size == 2).all() and (rows.groups == 2).all() and (rows.nodes == 2).all()
    assert meta["node_of_rank"] == [0, 0, 1, 1] and meta["spec"]["split"] == "mod:2"
    assert (rows.internode_bytes_measured > 0).all() and rows.internode_bytes_expected.isna().all()
