import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def commbench(*args, env=None, timeout=600, check_rc=None):
    """Run the real CLI, returning a CompletedProcess (text): in a subprocess in a test that starts
    ranks (the `job` fixture) or gives variables of its own; elsewhere in this process
    (tests/cli_inprocess.py: the same entry point, without a Python start per call), where a
    command that started ranks after all would fail the test (pytest_configure's guard)."""
    if env is None and not _LAUNCHES["allowed"]:
        from cli_inprocess import run_cli

        outcome = run_cli(*args, cwd=ROOT)
        proc = subprocess.CompletedProcess(["commbench", *map(str, args)], outcome.code, outcome.stdout, outcome.stderr)
    else:
        proc = subprocess.run([sys.executable, "-m", "commbench", *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, env=dict(os.environ, **(env or {})), cwd=ROOT)
    if check_rc is not None:
        assert proc.returncode == check_rc, f"rc={proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc


INJECTED = ROOT / "tests" / "injected"  # its sitecustomize.py injects the faults fault_env names


def fault_env(wrong: int | None = None, hang: int | None = None) -> dict:
    """The environment that makes a rank leave one wrong element (wrong=rank) or stop answering before
    its first timed loop (hang=rank), for commbench(env=...): tests/injected/sitecustomize.py patches
    the ranks' timing loop from outside the product."""
    from injected.sitecustomize import HANG_ENV, WRONG_ENV

    env = {"PYTHONPATH": os.pathsep.join([str(INJECTED), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env |= {WRONG_ENV: str(wrong)} if wrong is not None else {}
    return env | ({HANG_ENV: str(hang)} if hang is not None else {})


def pretend_machine(monkeypatch, **changes) -> None:
    """This process sees a machine with these facts changed (commbench.machine.facts), for the test."""
    import dataclasses

    from commbench.machine import facts as machine_facts

    monkeypatch.setattr(machine_facts, "_pretended", dataclasses.replace(current_facts(), **changes))


# --machine: the whole session sees another machine (the fast tier's in-process tests must pass on any)
MACHINES = {"1-core": {"cpus": 1, "usable_cpus": 1},
            "64-core": {"cpus": 64, "usable_cpus": 64},
            "300MB-L3": {"llc_bytes": 300 << 20, "cpu_model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz",
                         "cpu_flags": frozenset({"sse2", "avx", "avx2", "avx512f"})},
            "4MB-L3": {"llc_bytes": 4 << 20, "cpu_model": "Intel(R) Celeron(R) N4020 CPU @ 1.10GHz",
                       "cpu_flags": frozenset({"sse2"})}}


def has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


# --- tiers -------------------------------------------------------------------------------------------
# `make test` runs the fast tier (`pytest --tier fast`): every test but those that need what is slow or
# special here, unless marked `smoke` (the few real jobs it keeps); `make test-all` runs everything.
# The markers come from what a test uses, never by hand: the fixture it asks for, hypothesis, its folder.
FIXTURE_MARKERS = {"job": "job", "slurm": "slurm", "chromium": "browser", "netns": "netns", "nvcc": "nvcc"}
FULL_ONLY = ("job", "slurm", "browser", "netns", "nvcc", "fuzz", "acceptance")
LAUNCHING = ("run", "sweep", "ab", "workload", "check")  # commbench commands that start ranks
LAUNCHERS = ("mpirun", "mpiexec", "srun", "salloc", "sbatch", "torchrun")
RECORD_ENV = "COMMBENCH_TEST_RECORD_LAUNCHES"  # a file: note unmarked launches there instead of failing


def pytest_addoption(parser):
    parser.addoption("--machine", choices=sorted(MACHINES), default=None,
                     help="run as if on another machine (commbench.machine.facts.pretend): its cores, CPU model and "
                          "flags, last-level cache; leaves out the tests that start ranks (their launchers meet this one)")
    parser.addoption("--facts-users", metavar="FILE", default=None,
                     help="without --machine: write to FILE the tests that read a machine fact; with --machine: run only "
                          "the tests FILE names (a test that reads no fact cannot see the pretended machine)")
    parser.addoption("--tier", choices=("fast", "all"), default="all",
                     help="fast: leave out real jobs (but the `smoke` ones), Slurm, the browser, network namespaces, "
                          "nvcc, fuzzing and the acceptance suite; all: everything (default)")


def _tier_markers(item) -> list[str]:
    found = [m for f, m in FIXTURE_MARKERS.items() if f in getattr(item, "fixturenames", ())]
    if getattr(getattr(item, "function", None), "is_hypothesis_test", False):
        found.append("fuzz")
    if "acceptance" in item.path.parts:
        found.append("acceptance")
    return found


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="no NVIDIA GPU visible on this machine")
    if not has_gpu():
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
    users = _facts_users_to_run(config)
    kept, dropped = [], []
    for item in items:
        if users is not None and item.nodeid.split("::")[0] not in users:
            dropped.append(item)
            continue
        for marker in _tier_markers(item):
            item.add_marker(marker)
        slow = any(m in item.keywords for m in FULL_ONLY) and "smoke" not in item.keywords
        launches = bool({"job", "slurm", "netns"} & set(getattr(item, "fixturenames", ())))
        (dropped if (config.getoption("--tier") == "fast" and slow) or (config.getoption("--machine") and launches)
         else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _starts_ranks(argv) -> bool:
    """Does this command line start ranks (a launcher, or a commbench command that launches)?"""
    argv = [str(a) for a in (argv if isinstance(argv, (list, tuple)) else [argv])]
    if not argv:
        return False
    if os.path.basename(argv[0]) in LAUNCHERS or "torch.distributed.run" in argv:
        return not {"--version", "-V", "--help", "--mpi=list"} & set(argv)  # a question, not a launch
    if any(a in ("commbench.rank.worker", "commbench.rank.turns") for a in argv):
        return True
    for i, a in enumerate(argv):
        if (a == "commbench" and i and argv[i - 1] == "-m") or os.path.basename(a) == "commbench":
            return len(argv) > i + 1 and argv[i + 1] in LAUNCHING
    return False


_LAUNCHES = {"allowed": True, "test": None}  # the test being set up or run: may it start ranks?


def pytest_runtest_setup(item):
    """Before any fixture of the test (a module's included) is set up: does it say it starts ranks?"""
    _LAUNCHES.update(allowed=bool({"job", "slurm", "netns"} & set(item.fixturenames)), test=item.nodeid)


def pytest_runtest_teardown(item):
    _LAUNCHES.update(allowed=True, test=None)


class _RecordedFacts:
    """This machine's facts, noting which test reads one (--facts-users without --machine)."""

    def __init__(self, real, readers: set):
        self.real, self.readers = real, readers

    def __getattr__(self, name):
        if _LAUNCHES["test"]:  # (collection reads none; a fixture's teardown after its test may, harmlessly)
            self.readers.add(_LAUNCHES["test"])
        return getattr(self.real, name)


def current_facts():
    """The facts this process sees (the pretended machine's under --machine), as commbench.machine.facts.Facts."""
    from commbench.machine import facts as machine_facts

    found = machine_facts.facts()
    return found.real if isinstance(found, _RecordedFacts) else found


def _facts_users_to_run(config) -> set | None:
    """Under --machine with --facts-users: the files of the recorded tests, whole (a module's fixture may hand a
    fact to its other tests); None: every test, where there is no record."""
    path = config.getoption("--facts-users")
    if not (config.getoption("--machine") and path and os.path.exists(path)):
        return None
    return {u.split("::")[0] for u in Path(path).read_text().splitlines() if u}


def pytest_configure(config):
    """A test that starts ranks must say so by asking for `job` (or slurm, netns), which puts it in the
    full tier: a launch from any other test fails it (under RECORD_ENV: is noted in that file).
    --machine: the process sees another machine's facts; --facts-users alone: the tests that read one are noted."""
    from commbench.machine import facts as machine_facts

    if config.getoption("--machine"):
        import dataclasses

        machine_facts.pretend(dataclasses.replace(machine_facts.facts(), **MACHINES[config.getoption("--machine")]))
    elif config.getoption("--facts-users"):
        config._facts_readers = set()
        machine_facts.pretend(_RecordedFacts(machine_facts.facts(), config._facts_readers))
    real = subprocess.Popen.__init__

    def guarded(self, args, *rest, **kwargs):
        if not _LAUNCHES["allowed"] and _starts_ranks(args):
            record = os.environ.get(RECORD_ENV)
            if not record:
                raise AssertionError(f"{_LAUNCHES['test']} starts ranks ({' '.join(map(str, args))[:120]}): "
                                     "ask for the `job` fixture")
            with open(record, "a") as f:
                f.write(_LAUNCHES["test"] + "\n")
        return real(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = guarded


@pytest.fixture(scope="session")
def job():
    """Marks a test that starts ranks (the full tier, unless `smoke`); runs the CLI like commbench()."""
    return commbench


@pytest.fixture
def chromium():
    """The Chromium the report tests render in, or a skip with the reason."""
    from browser import CHROMIUM

    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return CHROMIUM


@pytest.fixture
def netns():
    """Root and iproute2 for emulated clusters (network namespaces, tc), or a skip with the reason."""
    import shutil

    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        pytest.skip("the emulated cluster needs root and iproute2 (ip, tc)")


@pytest.fixture(scope="session")
def nvcc():
    """nvcc's path, or a skip with the reason."""
    import shutil

    found = shutil.which("nvcc")
    if found is None:
        pytest.skip("nvcc is not installed")
    return found


def _mpirun_missing() -> bool:
    from commbench.run.launch import find_binary

    return find_binary("mpirun") is None


# CI installs MPI, so there a missing mpirun is a failure, not a skip
needs_mpirun = pytest.mark.skipif(_mpirun_missing() and not os.environ.get("CI"), reason="mpirun is not installed")


def _torch_is_a_gpu_build() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.version.cuda is not None or getattr(torch.version, "hip", None) is not None


# tests of what a CPU build of torch refuses (CI installs one)
needs_cpu_torch = pytest.mark.skipif(_torch_is_a_gpu_build(), reason="this torch is a CUDA build")


def cpu_torch_refusal() -> str:
    """What `--device cuda` with this (CPU) build of torch is refused with."""
    import torch

    return f"--device cuda needs a CUDA build of torch; this one ({torch.__version__}) is built without CUDA"


@pytest.fixture(scope="session")
def slurm():
    """A live one-node Slurm for the whole session (tests/slurm_cluster.py: installed as root with
    apt-get where missing), or a skip with the reason; stopped at the end."""
    import slurm_cluster

    reason = slurm_cluster.unavailable()
    if reason:
        pytest.skip(reason)
    cluster = slurm_cluster.start()  # installed but not starting is a failure, not a skip
    yield cluster
    slurm_cluster.stop(cluster)


def load_run(out: Path):
    import pandas as pd

    from commbench.folder.load import read_samples

    return pd.read_csv(out / "results.csv"), read_samples(out), json.loads((out / "run.json").read_text())


@pytest.fixture(scope="session")
def slow_mpi(tmp_path_factory):
    """benchmarks/slow_mpi.c built (LD_PRELOAD: MPI collectives stretched by COMMBENCH_SLOW of their period)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from ab_gate import build_preload

    return build_preload(tmp_path_factory.mktemp("slow_mpi"))


def start_hung_emulated_run(backend: str, out) -> tuple[subprocess.Popen, list[str]]:
    """`commbench run --emulate 2x1` whose rank 0 hangs in its first point, read up to the line that
    reports the ranks ready: (the process, the lines read); for the teardown tests."""
    proc = subprocess.Popen([sys.executable, "-m", "commbench", "run", "--backend", backend, "--emulate", "2x1",
                             "--sizes", "1K", "-w", "1", "--timeout", "60", "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **fault_env(hang=0)))
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if " points" in line:
            break
    return proc, seen


def pytest_sessionfinish(session):
    readers = getattr(session.config, "_facts_readers", None)
    if readers is not None:
        Path(session.config.getoption("--facts-users")).write_text("".join(f"{t}\n" for t in sorted(readers)))
