"""Limits of a run's options decided up front (issue 20, classes 4, 6 and 9): ranks, sizes,
iterations, the label, --repeat and this machine's cores and memory are bounded before a folder, a
spec file or a rank exists; what is beyond a limit is one line, exit 2, naming the limit; the spec
reaches the ranks by file, so no valid spec is too long for argv. Property-based: run options
through the real CLI in this process (tests/cli_inprocess.py), launching nothing
(tests/limits_fixtures.py)."""

import tempfile
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from cli_inprocess import run_cli
from commbench.errors import BAD_INPUT, InputError, OK
from commbench.options import (LOCAL_RANKS_PER_CORE, MAX_ITERS, MAX_LABEL_CHARS, MAX_NPROCS, MAX_POINTS, MAX_REPEAT,
                               MAX_SIZES)
from commbench.folder.spec_file import SPEC_FILE, decode_spec
from commbench.run import launch
from commbench.spec import SweepSpec
from limits_fixtures import CORES, FUZZ, launch_nothing  # noqa: F401


# --- a run's options ------------------------------------------------------------------------------
RUN_LIMITS = [
    (["-n", 10_000], f"-n 10000 starts 10000 ranks on this machine, more than {LOCAL_RANKS_PER_CORE} per core"),
    (["-n", MAX_NPROCS + 1, "--oversubscribe"], f"at most {MAX_NPROCS}"),
    (["--sizes", ",".join(str(i) for i in range(1, MAX_SIZES + 2))], f"{MAX_SIZES + 1} sizes is more than a run takes"),
    (["-b", "1", "-e", "1G", "-f", "1.001"], f"gives more than {MAX_SIZES} sizes"),
    (["--sizes", "2T"], "size '2T' is larger than 1T"),
    (["--sizes", "9" * 30], "invalid size '" + "9" * 30),
    (["--iters", MAX_ITERS + 1], f"--iters {MAX_ITERS + 1} is more than {MAX_ITERS}"),
    (["--warmup", 10**12], f"--warmup {10**12} is more than {MAX_ITERS}"),
    (["--max-iters", 10**9], f"--max-iters {10**9} is more than {MAX_ITERS}"),
    (["--batch", 10**7], f"--batch {10**7} is more than {MAX_ITERS}"),
    (["--label", "x" * 100_000], f"--label is 100000 characters long; at most {MAX_LABEL_CHARS}"),
    (["--repeat", 10**20], f"must be between 1 and {MAX_REPEAT}"),
    (["--sizes", ",".join(str(i) for i in range(1, MAX_SIZES + 1)), "-a", "native,ring,tree", "-c", "all_reduce,all_gather"],
     f"more than a run takes (at most {MAX_POINTS})"),
    (["--emulate", "9" * 5000 + "x2", "--backend", "gloo"], "invalid --emulate '" + "9" * 38),
]


@pytest.mark.parametrize("args,message", RUN_LIMITS, ids=range(len(RUN_LIMITS)))
def test_run_beyond_a_limit_is_refused_before_anything_starts(tmp_path, args, message):
    """The real `run` (no stub): refused before a folder, a spec file or a rank exists."""
    out = tmp_path / "out"
    outcome = run_cli("run", "--backend", "gloo", "--launcher", "local", *args, "--out", out)
    outcome.assert_clean(codes=(BAD_INPUT,))
    assert message in outcome.stderr, outcome.stderr
    assert not out.exists()


def test_memory_of_the_ranks_here(tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "_memory_bytes", lambda: 8 << 30)
    outcome = run_cli("run", "-n", 4, "--backend", "gloo", "--launcher", "local", "--sizes", "2G", "--out", tmp_path / "o")
    outcome.assert_clean(codes=(BAD_INPUT,))
    assert "size 2G on 4 ranks of this machine needs at least 17.2 GB (2 buffers a rank)" in outcome.stderr
    assert "its 8.59 GB of memory" in outcome.stderr and not (tmp_path / "o").exists()
    launch.check_local_ranks(SweepSpec(nprocs=4, sizes=[1 << 31], device="cuda"), "local", [])  # GPU memory: not here


def test_a_tmpdir_the_ranks_here_cannot_use_is_refused_and_one_elsewhere_is_not(tmp_path, monkeypatch):
    """Issue 67: a missing TMPDIR was made by mpirun under whatever name it had, a file failed in PMIx (exit 1);
    ranks started elsewhere (srun, mpirun with hosts) have a TMPDIR of their own nodes, not this one's."""
    spec = SweepSpec(nprocs=2, sizes=[8])
    (tmp_path / "file").write_text("x")
    for where, says in ((tmp_path / "nope", "does not exist"), (tmp_path / "file", "is not a folder")):
        monkeypatch.setenv("TMPDIR", str(where))
        with pytest.raises(InputError, match=f"^TMPDIR='{where}' {says}: the launcher and the ranks keep"):
            launch.check_local_ranks(spec, "local", [])
        launch.check_local_ranks(spec, "srun", [])
        launch.check_local_ranks(spec, "mpirun", ["--hostfile", "h"])
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    launch.check_local_ranks(spec, "local", [])


def test_which_launches_start_their_ranks_here(monkeypatch):
    for name in launch.HOST_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert launch.ranks_here("mpirun", []) and launch.ranks_here("mpirun", ["--bind-to", "core"])
    assert launch.ranks_here("local", []) and launch.ranks_here("torchrun", []) and launch.ranks_here("emulated", [])
    for extra in (["--hostfile", "h"], ["-H", "a,b"], ["--host=a:4"], ["-f", "hosts"], ["-machinefile", "m"]):
        assert not launch.ranks_here("mpirun", extra), extra
    assert not launch.ranks_here("srun", []) and not launch.ranks_here("none", [])
    assert not launch.ranks_here("mpirun", [], env={"PBS_NODEFILE": "/x"})


def test_oversubscribe_lifts_the_cores_limit_only():
    many = LOCAL_RANKS_PER_CORE * CORES + 1
    spec = SweepSpec(nprocs=many, backends=["gloo"], sizes=[8]).validate()
    with pytest.raises(InputError, match="add --oversubscribe"):
        launch.check_local_ranks(spec, "local", [])
    launch.check_local_ranks(spec, "mpirun", ["--hostfile", "h"])  # the hosts' business
    spec.oversubscribe = True
    launch.check_local_ranks(spec, "local", [])
    assert SweepSpec.from_options(backend="gloo", oversubscribe=True).oversubscribe


LARGEST_TEST_WORLD = 8  # ranks the test suite starts on this machine (test_algorithms, test_ring_tree_kernels)


@pytest.mark.parametrize("cores", sorted({1, 2, CORES}))
@pytest.mark.parametrize("launcher", ["local", "mpirun"])
def test_the_test_suites_worlds_need_no_oversubscribe(monkeypatch, cores, launcher):
    """check_local_ranks on a machine of `cores` cores: the test suite's largest world passes
    wherever its 2-core floor holds; one rank past LOCAL_RANKS_PER_CORE per core needs
    --oversubscribe, which lifts the limit."""
    for name in launch.HOST_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(launch, "_cores", lambda: cores)
    monkeypatch.setattr(launch, "_memory_bytes", lambda: None)

    def check(n, oversubscribe=False):
        spec = SweepSpec(nprocs=n, backends=["gloo"], sizes=[8], oversubscribe=oversubscribe).validate()
        launch.check_local_ranks(spec, launcher, [])

    if cores >= 2:
        check(LARGEST_TEST_WORLD)
    check(LOCAL_RANKS_PER_CORE * cores)
    with pytest.raises(InputError, match=f"-n {LOCAL_RANKS_PER_CORE * cores + 1} starts .* more than "
                                         f"{LOCAL_RANKS_PER_CORE} per core of its {cores}: add --oversubscribe"):
        check(LOCAL_RANKS_PER_CORE * cores + 1)
    check(LOCAL_RANKS_PER_CORE * cores + 1, oversubscribe=True)


def test_the_spec_reaches_the_ranks_by_file(tmp_path):
    """10,000 sizes and the longest label: a short argv, the whole spec in the run folder."""
    spec = SweepSpec(nprocs=2, backends=["gloo"], collectives=["all_reduce"], in_place=[True], run_id="r",
                     sizes=list(range(1, MAX_SIZES + 1)), label="é" * MAX_LABEL_CHARS, out_dir=str(tmp_path / "run"))
    commands = launch.build_commands(spec.validate(), "local", [])
    for argv, _ in commands:
        assert sum(len(a) for a in argv) < 1000
        assert argv[argv.index("--spec") + 1] == str((tmp_path / "run").resolve() / SPEC_FILE)
        assert decode_spec(argv[-1]) == spec
    assert oct((tmp_path / "run" / SPEC_FILE).stat().st_mode & 0o777) == "0o644"


def test_a_refused_launch_writes_no_spec_file(tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "_which", lambda b: (_ for _ in ()).throw(InputError(f"{b} is not installed")))
    spec = SweepSpec(nprocs=2, backends=["mpi"], sizes=[8], run_id="r", out_dir=str(tmp_path / "run")).validate()
    with pytest.raises(InputError, match="not installed"):
        launch.build_commands(spec, "mpirun", [])
    assert not (tmp_path / "run").exists()


def test_a_rank_that_cannot_read_the_spec_says_why(tmp_path):
    with pytest.raises(RuntimeError, match="on a filesystem every node of the job shares"):
        decode_spec(str(tmp_path / SPEC_FILE))


def _mostly(valid, *edges):
    """Values within the limits, and about one time in eight one at or past an edge."""
    return st.tuples(st.integers(0, 7), valid, st.sampled_from(edges)).map(lambda t: t[2] if t[0] == 7 else t[1])


@FUZZ
@given(n=_mostly(st.integers(1, 8), -3, 0, LOCAL_RANKS_PER_CORE * CORES + 1, MAX_NPROCS, MAX_NPROCS + 1, 10**30),
       sizes=_mostly(st.integers(1, 6), 0, MAX_SIZES, MAX_SIZES + 1),
       largest=_mostly(st.sampled_from(["8", "64K", "1M"]), "1T", "2T", "99999999999999999999"),
       iters=_mostly(st.one_of(st.none(), st.integers(1, 50)), 0, MAX_ITERS, MAX_ITERS + 1, 10**25),
       warmup=_mostly(st.integers(0, 5), -1, MAX_ITERS, MAX_ITERS + 1),
       batch=_mostly(st.one_of(st.none(), st.integers(1, 10)), 0, MAX_ITERS + 1),
       label=_mostly(st.integers(0, 20), MAX_LABEL_CHARS, MAX_LABEL_CHARS + 1, 10**5),
       repeat=_mostly(st.integers(1, 3), 0, MAX_REPEAT, MAX_REPEAT + 1, 10**19),
       oversubscribe=st.booleans(), backend=st.sampled_from(["gloo", "mpi"]))
def test_run_options_beyond_a_limit_are_refused(tmp_path_factory, launch_nothing, n, sizes, largest, iters, warmup,
                                                batch, label, repeat, oversubscribe, backend):
    base = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    out = base / "out"
    listed = ",".join([*map(str, range(1, sizes)), largest][-sizes:]) if sizes else ""
    args = ["run", "-n", n, "--backend", backend, "--sizes", listed, "-c", "all_reduce", "--in-place",
            "--warmup", warmup, "--label", "x" * label, "--repeat", repeat, "--out", out]
    args += (["--iters", iters] if iters is not None else []) + (["--batch", batch] if batch is not None else [])
    args += ["--oversubscribe"] if oversubscribe else []
    outcome = run_cli(*args, cwd=base)
    outcome.assert_clean()
    event(f"exit {outcome.code}: {outcome.stderr[18:60]}")
    beyond = (n > MAX_NPROCS or (n > LOCAL_RANKS_PER_CORE * CORES and not oversubscribe) or sizes > MAX_SIZES
              or largest in ("2T", "99999999999999999999") or max(iters or 0, warmup, batch or 0) > MAX_ITERS
              or label > MAX_LABEL_CHARS or repeat > MAX_REPEAT)
    if beyond:
        assert outcome.code == BAD_INPUT, (args[:12], outcome.stderr)
    if outcome.code == OK:
        assert 1 <= n <= (MAX_NPROCS if oversubscribe else LOCAL_RANKS_PER_CORE * CORES)
    assert not out.exists()
