"""Limits decided up front (issue 20, classes 4, 6 and 9): a suite file, a run's options and a
prediction's scale are bounded before any work starts; what is beyond a limit is one line, exit
2, naming the limit, before the time and memory it would have cost (bounded in
benchmarks/hostile_inputs.py); the spec reaches the ranks by file, so no valid spec is too long
for argv; the model's outputs are checked before it prints and written whole. Property-based:
suite YAML, model files and run options, through the real CLI in this process
(tests/cli_inprocess.py), launching nothing."""

import json
import math
import os
import sys
import tempfile
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cli_inprocess import run_cli
from commbench.analysis.model.fit import MAX_MODEL_BYTES, Fit, to_json
from commbench.analysis.model.predict import MAX_RANK_SIZES, MAX_RANKS
from commbench.errors import BAD_INPUT, InputError, OK
from commbench.options import (LOCAL_RANKS_PER_CORE, MAX_ITERS, MAX_LABEL_CHARS, MAX_NPROCS, MAX_POINTS, MAX_REPEAT,
                               MAX_SIZES, SUITE_FIELDS)
from commbench.rank.worker import SPEC_FILE, decode_spec
from commbench.run import launch
from commbench.run.suites import MAX_DEPTH, MAX_RUNS, MAX_SUITE_BYTES, SUITES_DIR, load_suite
from commbench.spec import SweepSpec

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
CORES = launch._cores()


def _snapshot(folder: Path, leave_out: Path) -> dict:
    """Every file under folder but those under leave_out: path -> (size, mtime)."""
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")
            if p.is_file() and leave_out not in p.parents}


@pytest.fixture
def launch_nothing(monkeypatch):
    """run_sweep and run_suite checked as far as a launch (prepare, the launcher, this machine's
    limits), then stopped: nothing is started, nothing written."""
    from commbench.run import api, jobs

    def check(spec, launcher_args):
        spec = api.prepare(spec)
        launcher = launch.resolve_launcher(spec)
        if launcher != "none":
            launch.check_local_ranks(spec, launcher, launcher_args or [])
        return spec

    def run_sweep(spec, launcher_args=None, on_event=None, relay=None, argv=None, repeat=1):
        jobs.check_repeat(repeat)
        return api.RunResult(Path(check(spec, launcher_args).out_dir), reports=False)

    def run_suite(suite, out_dir, resume=False, on_run=None, on_event=None):
        for run in suite.runs:
            spec = SweepSpec.from_json(run.spec.to_json())
            spec.out_dir = str(Path(out_dir) / run.label)
            check(spec, run.launcher_args)
        return []

    monkeypatch.setattr(api, "run_sweep", run_sweep)
    monkeypatch.setattr(api, "run_suite", run_suite)


# --- suites ---------------------------------------------------------------------------------------
def _bomb(levels: int = 9) -> str:
    """The billion laughs: 9 ** levels strings from about 430 bytes."""
    lines = ['  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"  {cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "name: bomb\ndescription:\n" + "\n".join(lines) + "\nruns: [{label: x}]\n"


BAD_SUITES = [
    (_bomb(), "line 3: YAML anchors and aliases (&name, *name) are not accepted in a suite"),
    ("defaults: &d {nprocs: 2}\nruns: [{label: a}]\n", "line 1: YAML anchors and aliases"),
    ("runs: " + "[" * 50 + "]" * 50 + "\n", f"more than {MAX_DEPTH} levels of nesting"),
    ("description: " + "x" * MAX_SUITE_BYTES + "\nruns: [{}]\n", f"larger than {MAX_SUITE_BYTES // 1024} KB"),
    ("runs:\n" + "- {}\n" * (MAX_RUNS + 1), f"{MAX_RUNS + 1} runs; a suite holds at most {MAX_RUNS}"),
    ("runs: [{label: a, sizes: [" + ",".join(["8"] * (MAX_SIZES + 1)) + "]}]\n",
     f"{MAX_SIZES + 1} sizes is more than a run takes (at most {MAX_SIZES})"),
    ("runs: [{label: a, nprocs: " + "9" * 5000 + "}]\n", "not valid YAML (Exceeds the limit"),
    ("runs: [{label: a, nprocs: " + str(MAX_NPROCS + 1) + "}]\n", f"is more ranks than commbench starts (at most {MAX_NPROCS})"),
    ("runs: [{label: a, iters: 10000000}]\n", f"--iters 10000000 is more than {MAX_ITERS}"),
    ("runs: [{label: a, sizes: 2T}]\n", "size '2T' is larger than 1T"),
    ("name: ../../etc\nruns: [{label: a}]\n", "name '../../etc' must be 1-64 letters"),
    ("description: [1, 2]\nruns: [{label: a}]\n", "description must be text"),
    ("1: 2\nruns: [{label: a}]\n", "unknown top-level field '1'"),
    ("runs: [{label: a, " + "x" * 100 + ": 1}]\n", "unknown field '" + "x" * 40 + "'"),
    ("runs: [{label: a}]\ndefaults: !!python/object/apply:os.system [echo hi]\n", "not valid YAML (could not determine a constructor"),
    ("runs: [{label: a}]\n\xff", "not valid YAML ('utf-8' codec"),
]


@pytest.mark.parametrize("text,message", BAD_SUITES, ids=range(len(BAD_SUITES)))
def test_bad_suite_is_refused_up_front(tmp_path, launch_nothing, text, message):
    f, out = tmp_path / "s.yaml", tmp_path / "out"
    f.write_bytes(text.encode("latin-1") if "\xff" in text else text.encode())
    outcome = run_cli("sweep", f, "--out", out)
    outcome.assert_clean(codes=(BAD_INPUT,))
    assert message in outcome.stderr and str(f) in outcome.stderr, outcome.stderr
    assert not out.exists()


def test_alias_bomb_costs_nothing(tmp_path):
    """The bomb that took 93 s and 2.5 GB: refused while it is read, before anything is built."""
    f = tmp_path / "bomb.yaml"
    f.write_text(_bomb())
    assert len(f.read_bytes()) < 500
    tracemalloc.start()
    with pytest.raises(InputError, match="anchors and aliases"):
        load_suite(str(f))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 5e6


def test_largest_suite_file_is_read_within_bounds(tmp_path):
    """A suite file at the size limit, as many nodes as it can hold, is refused in tens of MB (the
    runs counted before any is validated; its time: benchmarks/hostile_inputs.py)."""
    f = tmp_path / "flat.yaml"
    f.write_text("runs: [" + ",".join(["{}"] * ((MAX_SUITE_BYTES - 10) // 3)) + "]\n")
    assert f.stat().st_size <= MAX_SUITE_BYTES
    tracemalloc.start()
    with pytest.raises(InputError, match=f"a suite holds at most {MAX_RUNS}"):
        load_suite(str(f))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 100e6


def test_bundled_suites_fit_the_limits():
    for f in SUITES_DIR.glob("*.yaml"):
        assert f.stat().st_size < MAX_SUITE_BYTES / 16
        assert len(load_suite(f.stem).runs) <= MAX_RUNS


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


# --- suites, fuzzed -------------------------------------------------------------------------------
scalar = st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.integers(-10**40, 10**40),
                   st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
                   st.sampled_from(["8", "1K", "2T", "all_reduce", "gloo", "mpi", "ring", "in-place", "2x2", "a-b"]))
value = st.recursive(scalar, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                          max_size=3), max_leaves=10)
field_name = st.one_of(st.sampled_from(sorted(SUITE_FIELDS)), st.text(max_size=10))
run = st.dictionaries(field_name, value, max_size=5)
suite_doc = st.fixed_dictionaries({}, optional={
    "name": st.one_of(st.sampled_from(["ok", "../x", ""]), scalar), "description": value,
    "defaults": st.one_of(st.dictionaries(field_name, value, max_size=4), value),
    "runs": st.one_of(st.lists(run, max_size=4), value)})
SNIPPETS = ["&a ", "*a", "<<: *a\n", "[" * 12, "]", "{", "}", ": ", "\n- ", "\t", "\x00", "9" * 5000, "1e999", ".nan",
            "!!python/object/apply:os.system [x]", "nprocs: 100000\n", "sizes: [1T, 2T]\n", "repeat: 1000\n",
            "label: ../x\n", "- {}\n" * 30, "iters: 10000000\n", "'", '"', "#", "%YAML 1.1\n---\n", "? [a]\n"]
BUNDLED = sorted(SUITES_DIR.glob("*.yaml"))


def _sweep_is_clean(base: Path, text: bytes) -> None:
    f, out = base / "suite.yaml", base / "out"
    f.write_bytes(text)
    before = _snapshot(base, out)
    outcome = run_cli("sweep", f, "--out", out, cwd=base)
    outcome.assert_clean()
    event(f"exit {outcome.code}: {outcome.stderr[18:60]}")
    assert _snapshot(base, out) == before and not out.exists()  # nothing launched, nothing written


@FUZZ
@given(suite_doc)
def test_random_suites_end_clean(tmp_path_factory, launch_nothing, doc):
    import yaml

    _sweep_is_clean(Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())), yaml.safe_dump(doc).encode())


@FUZZ
@given(st.sampled_from(BUNDLED), st.lists(st.tuples(st.integers(-1, 3), field_name, value), min_size=1, max_size=3))
def test_bundled_suites_with_fields_changed_end_clean(tmp_path_factory, launch_nothing, suite, changes):
    """A bundled suite with fields set to anything (huge numbers, wrong types, lists, nesting):
    defaults (-1) or a run's."""
    import yaml

    doc = yaml.safe_load(suite.read_text())
    for target, name, new in changes:
        where = doc.setdefault("defaults", {}) if target < 0 else doc["runs"][target % len(doc["runs"])]
        where[name] = new
    _sweep_is_clean(Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())), yaml.safe_dump(doc).encode())


@FUZZ
@given(st.sampled_from(BUNDLED), st.lists(st.tuples(st.sampled_from(["insert", "delete", "replace"]), st.floats(0, 1),
                                                    st.one_of(st.sampled_from(SNIPPETS), st.text(max_size=8))),
                                          min_size=1, max_size=4))
def test_mutated_bundled_suites_end_clean(tmp_path_factory, launch_nothing, suite, edits):
    text = suite.read_text()
    for op, where, snippet in edits:
        i = int(where * len(text))
        text = (text[:i] + snippet + text[i:] if op == "insert" else text[:i] + text[i + len(snippet):]
                if op == "delete" else text[:i] + snippet + text[i + len(snippet):])
    _sweep_is_clean(Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())),
                    text.encode("utf-8", "surrogatepass"))


# --- model ----------------------------------------------------------------------------------------
PREDICT = ["model", "predict", "--nodes", 2, "--ranks-per-node", 2]
LINKS = ["--intra", "450,2", "--inter", "50,5"]
BAD_PREDICT = [
    (["--nodes", 100_000_000, "--ranks-per-node", 1_000_000, *LINKS],
     f"is 100000000000000 ranks; model predict takes at most {MAX_RANKS}"),
    (["--nodes", MAX_RANKS, "--ranks-per-node", 1, *LINKS, "-f", 2], f"(ranks x sizes at most {MAX_RANK_SIZES})"),
    ([*PREDICT[2:], *LINKS, "--links-per-node", -3], "invalid --links-per-node -3: it must be at least 1"),
    ([*PREDICT[2:], *LINKS, "--links-per-node", 0], "invalid --links-per-node 0"),
    ([*PREDICT[2:], *LINKS, "--reduce-bw", -1], "invalid --reduce-bw -1.0"),
    ([*PREDICT[2:], *LINKS, "--reduce-bw", "nan"], "invalid --reduce-bw nan"),
    ([*PREDICT[2:], *LINKS, "--reduce-bw", "inf"], "invalid --reduce-bw inf"),
    ([*PREDICT[2:], "--intra", "nan,2", "--inter", "50,5"], "invalid --intra 'nan,2'"),
    ([*PREDICT[2:], "--intra", "450,2", "--inter", "inf,5"], "invalid --inter 'inf,5'"),
    ([*PREDICT[2:], "--intra", "450,1e999", "--inter", "50,5"], "invalid --intra '450,1e999'"),
    ([*PREDICT[2:], "--intra", "-1,2", "--inter", "50,5"], "invalid --intra '-1,2'"),
    ([*PREDICT[2:], *LINKS, "-e", "2T"], "size '2T' is larger than 1T"),
    ([*PREDICT[2:], *LINKS, "-f", "nan"], "invalid step factor nan"),
]


@pytest.mark.parametrize("args,message", BAD_PREDICT, ids=range(len(BAD_PREDICT)))
def test_predict_nonsense_is_refused_up_front(tmp_path, args, message):
    outcome = run_cli("model", "predict", *args, "--out", tmp_path / "p")
    outcome.assert_clean(codes=(BAD_INPUT,))
    assert message in outcome.stderr and outcome.stdout == "", outcome.stderr
    assert not (tmp_path / "p").exists()


def _model(**change) -> dict:
    params = {"alpha_intra": 2e-6, "beta_intra": 1e-10, "alpha_inter": None, "beta_inter": None, "gamma": 1e-10,
              "mem_factor": None, "cache_bytes": None}
    fit = Fit("mpi", params, {k: 0.1 for k in params}, 12, 0.05, 0.1, 1, 2, ["ring", "tree"])
    data = to_json([fit], ["run"])
    data["fits"]["mpi"].update(change)
    return data


def test_predict_with_a_model_and_its_outputs(tmp_path):
    model = tmp_path / "model.json"
    model.write_text(json.dumps(_model()))
    args = ["model", "predict", "--nodes", 1, "--ranks-per-node", 4, "--model", model, "-e", "64K"]
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("x")
    for out, message in ((taken, "is not empty"), (model, "is a file, not a folder"), ("/proc/p", "cannot be written")):
        outcome = run_cli(*args, "--out", out)
        outcome.assert_clean(codes=(BAD_INPUT,))
        assert message in outcome.stderr and outcome.stdout == ""  # refused before anything is printed
    outcome = run_cli(*args, "--reduce-bw", 5)
    assert outcome.code == BAD_INPUT and "the model file has its own" in outcome.stderr
    run_cli(*args, "--out", tmp_path / "new" / "p").assert_clean(codes=(OK,))
    assert (tmp_path / "new" / "p" / "results.csv").exists()
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["p"]  # written whole: no temporary folder left


@pytest.mark.parametrize("text,message", [
    ("[1, 2]", "not a commbench model file"),
    ("{\"commbench_model\": 2, \"fits\": {}}", "not a commbench model file"),
    ("[" * 100_000 + "]" * 100_000, "not JSON"),
    ("\xff\xfe", "not JSON"),
    (json.dumps(_model(params={"gamma": float("nan")})), "field 'params' is not what `model fit` writes"),
    (json.dumps(_model(params={"gamma": -1.0})), "field 'params'"),
    (json.dumps(_model(params={"zeta": 1.0})), "field 'params'"),
    (json.dumps(_model(links_per_node=-3)), "field 'links_per_node'"),
    (json.dumps(_model(links_per_node=True)), "field 'links_per_node'"),
    (json.dumps(_model(engine=["steps"])), "field 'engine'"),
    (json.dumps(_model(colour="red")), "unknown field 'colour'"),
    (" " * (MAX_MODEL_BYTES + 1), "larger than 1 MB"),
])
def test_a_malformed_model_file_is_one_line(tmp_path, text, message):
    model = tmp_path / "model.json"
    model.write_bytes(text.encode("latin-1") if text.startswith("\xff") else text.encode())
    outcome = run_cli("model", "predict", "--nodes", 1, "--ranks-per-node", 4, "--model", model)
    outcome.assert_clean(codes=(BAD_INPUT,))
    assert message in outcome.stderr and str(model) in outcome.stderr, outcome.stderr


junk = st.one_of(scalar, st.lists(scalar, max_size=3), st.dictionaries(st.text(max_size=12), scalar, max_size=3),
                 st.dictionaries(st.sampled_from(["alpha_intra", "beta_intra", "gamma", "x"]), scalar, max_size=4))


@FUZZ
@given(st.one_of(st.dictionaries(st.sampled_from([*Fit.__dataclass_fields__, "other"]), junk, max_size=3), value,
                 st.just("whole")), st.booleans())
def test_fuzzed_model_files_end_clean(tmp_path_factory, change, keep_marker):
    base = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    data = _model(**change) if isinstance(change, dict) else change if change != "whole" else _model()
    if isinstance(data, dict) and not keep_marker:
        data.pop("commbench_model", None)
    model = base / "model.json"
    model.write_text(json.dumps(data, allow_nan=True))
    before = _snapshot(base, base / "none")
    outcome = run_cli("model", "predict", "--nodes", 1, "--ranks-per-node", 4, "--model", model, "-e", "64K", cwd=base)
    outcome.assert_clean()
    event(f"exit {outcome.code}: {outcome.stderr[18:60]}")
    if outcome.code == OK:
        assert "predicted busbw" in outcome.stdout and "nan" not in outcome.stdout.lower()
    assert _snapshot(base, base / "none") == before


def test_fit_and_validate_check_their_outputs_before_fitting(tmp_path):
    """-o and --csv refused before the rows are read (the inputs here do not even exist)."""
    for args in (["fit", tmp_path / "none", "-o", "/proc/m.json"], ["validate", tmp_path / "none", "--csv", tmp_path],
                 ["fit", tmp_path / "none", "-o", tmp_path / "no" / "m.json"]):
        outcome = run_cli("model", *args)
        outcome.assert_clean(codes=(BAD_INPUT,))
        assert outcome.stderr.startswith(("commbench: error: -o ", "commbench: error: --csv ")), outcome.stderr
    outcome = run_cli("model", "validate", tmp_path, "--links-per-node", 0)
    assert outcome.code == BAD_INPUT and "invalid --links-per-node 0" in outcome.stderr
