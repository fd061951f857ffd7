"""Launcher argv lists (never a shell string) and ranks started by the user (--launcher none)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from commbench.errors import InputError, OK
from commbench.folder.spec_file import decode_spec
from commbench.run.launch import build_commands, find_binary, resolve_launcher
from commbench.spec import SweepSpec
from conftest import ROOT, load_run, needs_mpirun


def _spec(out="/tmp/x", **kw):
    return SweepSpec(nprocs=3, out_dir=str(out), run_id="r", **kw).validate()


@needs_mpirun
def test_mpirun_argv(job, tmp_path):
    spec = _spec(tmp_path, label="a 'quoted' $label; rm -rf /")
    [(argv, env)] = build_commands(spec, "mpirun", ["--hostfile", "h"])
    assert argv[0].endswith("mpirun") and argv[1:3] == ["-n", "3"]
    assert argv[argv.index("--hostfile") + 1] == "h"
    assert argv[argv.index("--spec") - 3:argv.index("--spec")] == [sys.executable, "-m", "commbench.rank.worker"]
    assert argv[-1] == str(tmp_path.resolve() / ".spec.json")  # a file in the run folder, never the spec in argv
    assert decode_spec(argv[-1]) == spec  # the spec travels intact, whatever its strings hold
    if os.geteuid() == 0:
        assert "--allow-run-as-root" in argv
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "-x"] == ["PYTHONSAFEPATH"]  # to other hosts too
    assert env["PYTHONSAFEPATH"] == "1"  # python -m puts the current folder on sys.path: not in a rank


@needs_mpirun
def test_mpirun_forwards_the_plugins_to_every_host(job, monkeypatch, tmp_path):
    monkeypatch.setenv("COMMBENCH_PLUGINS", "my_collectives")
    [(argv, env)] = build_commands(_spec(tmp_path), "mpirun", [])
    assert argv[argv.index("-x") + 1] == "COMMBENCH_PLUGINS" and env["COMMBENCH_PLUGINS"] == "my_collectives"


@needs_mpirun
def test_mpirun_forwards_the_kernels_tuning_variables_to_every_host(job, monkeypatch, tmp_path):
    """Issue 64: every rank must size its kernels alike (a slot of another size would misread the FIFO)."""
    monkeypatch.setenv("COMMBENCH_KERNEL_SLOT_BYTES", "8192")
    monkeypatch.setenv("COMMBENCH_KERNEL_SPIN_US", "5")
    [(argv, env)] = build_commands(_spec(tmp_path), "mpirun", [])
    forwarded = [argv[i + 1] for i, a in enumerate(argv) if a == "-x"]
    assert {"COMMBENCH_KERNEL_SLOT_BYTES", "COMMBENCH_KERNEL_SPIN_US"} <= set(forwarded)


def test_torchrun_and_local_argv(tmp_path):
    pytest.importorskip("torch")
    spec = _spec(tmp_path, backends=["gloo"])
    [(argv, _)] = build_commands(spec, "torchrun", [])
    assert argv[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert argv[argv.index("--nproc-per-node") + 1] == "3" and "-m" in argv[3:]
    local = build_commands(spec, "local", [])
    assert [env["RANK"] for _, env in local] == ["0", "1", "2"]
    assert {env["WORLD_SIZE"] for _, env in local} == {"3"} and len({env["MASTER_PORT"] for _, env in local}) == 1


def test_resolve_launcher():
    assert resolve_launcher(_spec(backends=["gloo"])) in ("local", "none")
    with pytest.raises(InputError, match="needs an MPI launcher"):
        resolve_launcher(_spec(backends=["mpi"], launcher="local"))


def test_launcher_none_outside_a_job_takes_one_rank(monkeypatch):
    """(a probe: --launcher none -n 2 in a shell failed as a job, exit 1, naming WorldError)"""
    from commbench.machine import topology

    monkeypatch.setattr(topology, "inside_launched_job", lambda env=None: False)
    with pytest.raises(InputError, match=r"^--launcher none runs this process as a rank of a job already started "
                                         r"\(mpirun, srun, torchrun\), and none is here: -n 3 needs a launcher"):
        resolve_launcher(_spec(backends=["gloo"], launcher="none"))
    assert resolve_launcher(SweepSpec(nprocs=1, backends=["gloo"], launcher="none").validate()) == "none"
    monkeypatch.setattr(topology, "inside_launched_job", lambda env=None: True)
    assert resolve_launcher(_spec(backends=["gloo"], launcher="none")) == "none"  # (the ranks check the world)


@needs_mpirun
def test_ranks_started_by_the_user(job, tmp_path):
    """mpirun -n 3 commbench run: auto sees it is a rank and runs in place; rank 0 writes."""
    out = tmp_path / "r"
    cmd = [find_binary("mpirun"), "-n", "3", "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    proc = subprocess.run(cmd + [sys.executable, "-m", "commbench", "run", "--backend", "mpi", "--sizes", "1K,64K",
                                 "-c", "all_reduce,all_gather", "--iters", "3", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == OK, proc.stderr
    rows, _, meta = load_run(out)
    assert len(rows) == 8 and (rows.wrong == 0).all() and (rows.world_size == 3).all()
    assert meta["launcher"] == "none" and meta["status"] == "completed"
    assert proc.stdout.count("# all_reduce") == 1  # one table (both modes) per group, printed by rank 0 only
    assert proc.stderr.count("OK: 8 points measured") == 1 and "OK: 0 points" not in proc.stderr  # rank 0 sums up


def test_emulated_mpi_argv_one_mpirun_in_the_bridge_with_a_host_per_node(tmp_path, monkeypatch):
    """--emulate with MPI: one mpirun inside the bridge namespace, one host per node with its ranks
    as slots (unbound: each node would bind from core 0), the launch agent that enters each node's
    namespace, TCP on the nodes' links only; round-robin is mpirun's --map-by node. Another MPI's
    mpirun, or Open MPI before 5 (other parameter names), is refused."""
    from commbench.run import emulate, launch

    monkeypatch.setattr(launch, "_which", lambda name: f"/opt/mpi/bin/{name}")
    monkeypatch.setattr(launch, "_mpirun_version", lambda mpirun: "mpirun (open mpi) 5.0.11\n")
    spec = SweepSpec(backends=["mpi"], nprocs=4, emulate="2x2", out_dir=str(tmp_path), run_id="r").validate()
    assert resolve_launcher(spec) == "emulated"
    [(argv, env)] = build_commands(spec, "emulated", [])
    assert argv[:4] == ["ip", "netns", "exec", emulate.bridge_ns()] and argv[4] == "/opt/mpi/bin/mpirun"
    assert argv[argv.index("--host") + 1] == f"{emulate.node_host(0)}:2,{emulate.node_host(1)}:2"
    assert argv[argv.index("--map-by") + 1] == "slot" and argv[argv.index("--bind-to") + 1] == "none"
    agent = argv[argv.index("plm_ssh_agent") + 1].split()
    assert agent[1] == str(emulate.AGENT) and os.access(emulate.AGENT, os.R_OK)
    assert argv[argv.index("btl_tcp_if_include") + 1] == emulate.IFACE
    assert env[emulate.NETNS_PREFIX_ENV] + "0" == emulate.node_ns(0) and env["COMMBENCH_LINK_IFACE"] == "eth0"
    spec.placement = "round-robin"
    [(argv, _)] = build_commands(spec, "emulated", [])
    assert argv[argv.index("--map-by") + 1] == "node"
    for other in ("mpirun (open mpi) 4.1.2\n", "hydra build details:\n    version: 4.1.2\n"):
        monkeypatch.setattr(launch, "_mpirun_version", lambda mpirun: other)
        with pytest.raises(InputError, match="needs Open MPI 5 or later"):
            build_commands(spec, "emulated", [])
    monkeypatch.setattr(emulate.socket, "gethostname", lambda: "node7.cluster.example.org")
    assert emulate.node_host(3) == "node7-n3"  # short, as Open MPI cuts it: the agent finds node 3 in it


def test_a_job_s_lines_reach_the_terminal_escaped(capsys):
    """A rank's or a launcher's own output (not an event) is passed on to stderr terminal-safe: an escape
    sequence or a NUL byte shows as an escape, never drives the terminal (issue 67, low)."""
    from commbench.run.launch import Line, relay_stderr

    relay_stderr(Line("warning \x1b[2J\x00 done", "stderr"))
    said = capsys.readouterr().err
    assert said == "warning \\x1b[2J\\x00 done\n" and "\x1b" not in said


def test_open_mpis_shared_memory_files_go_to_a_folder_of_each_launch(tmp_path, monkeypatch):
    """Open MPI names its btl/sm files in /dev/shm by a 16-bit hash of the job and a killed job leaves them: a
    later job of the same hash crashed in btl/sm at start-up. Each launch here gets a folder of its own (in this
    process's, 0700), stale ones of this user's dead processes are removed, another user's kept; none for
    ranks on other hosts (the folder is this machine's)."""
    from commbench import runinfo
    from commbench.run import job_folders

    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=30)
    stale, theirs = Path(f"/dev/shm/{runinfo.SM_PREFIX}{dead.pid}-stale"), Path(f"/dev/shm/{runinfo.SM_PREFIX}{dead.pid}-theirs")
    for folder in (stale, theirs):
        folder.mkdir()
    try:
        if os.geteuid() == 0:
            os.chown(theirs, 65534, 65534)
        job_folders.sm_folder.cache_clear()
        mine = job_folders.sm_folder()
        assert mine and Path(mine).parent == Path("/dev/shm") and (os.stat(mine).st_mode & 0o777) == 0o700
        assert not stale.exists() and theirs.exists() == (os.geteuid() == 0)
        monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
        spec = SweepSpec(nprocs=2, backends=["mpi"], out_dir=str(tmp_path)).validate()
        envs = [build_commands(spec, "mpirun", [])[0][1][runinfo.SM_DIR_VARIABLE] for _ in range(2)]
        assert len(set(envs)) == 2 and all(Path(e).parent == Path(mine) for e in envs)
        assert runinfo.SM_DIR_VARIABLE not in build_commands(spec, "mpirun", ["--host", "a,b"])[0][1]
        # commbench's own folder is no setting of the run's: run.json's environment leaves it out
        assert runinfo.SM_DIR_VARIABLE not in runinfo.collective_env({runinfo.SM_DIR_VARIABLE: envs[0]})
        assert runinfo.collective_env({runinfo.SM_DIR_VARIABLE: "/scratch"}) == {runinfo.SM_DIR_VARIABLE: "/scratch"}
    finally:
        for folder in (stale, theirs):
            if folder.exists():
                folder.rmdir()
