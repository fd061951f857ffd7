"""The option table (commbench.options): every option reaches the CLI, the spec and suite files
with one default, and the backend `auto` means the same thing on every path."""

import dataclasses

import pytest
import typer

from commbench import options
from commbench.dtypes import DTYPES, OPS
from commbench.errors import InputError
from commbench.options import BY_NAME, CLI_OPTIONS, OPTIONS, SPEC_DEFAULTS, SUITE_FIELDS
from commbench.algorithms import ALGORITHMS
from commbench.collectives import COLLECTIVES
from commbench.run.suites import load_suite
from commbench.spec import SweepSpec
from conftest import ROOT

MATRIX = str(ROOT / "tests" / "data" / "alltoallv_matrix_4.txt")


def _run_command():
    from commbench.cli import app

    return typer.main.get_command(app).commands["run"]


def _cli_spec(*args) -> SweepSpec:
    """The spec `commbench run ARGS` would measure (parsed by the real command, not run)."""
    values = _run_command().make_context("run", list(args)).params
    return SweepSpec.from_options(**options.spec_arguments(options.cli_fields(values)))


def _suite_spec(tmp_path, run: str) -> SweepSpec:
    f = tmp_path / "s.yaml"
    f.write_text(f"runs: [{run}]\n")
    return load_suite(str(f)).runs[0].spec


def test_every_cli_option_is_a_flag_of_run_with_the_table_default_and_help():
    params = {p.name: p for p in _run_command().params if p.name != "help"}
    assert list(params) == [o.name for o in CLI_OPTIONS]
    for o in CLI_OPTIONS:
        p = params[o.name]
        assert tuple(p.opts) == o.flags and tuple(p.secondary_opts) == ((o.off_flag,) if o.off_flag else ()), o.name
        assert p.default == o.default and p.help == o.help, o.name
        assert p.is_flag == (o.type is bool), o.name


def test_flags_are_unique_and_derived_from_the_name():
    flags = [f for o in CLI_OPTIONS for f in (*o.flags, o.off_flag) if f]
    assert len(flags) == len(set(flags))
    assert BY_NAME["step_factor"].flags == ("-f", "--step-factor")
    assert BY_NAME["json_rows"].flags == ("--json",)
    assert BY_NAME["graph"].declarations == ("--graph/--no-graph",)


def test_cli_parses_each_type():
    spec = _cli_spec("-n", "3", "-f", "4", "-b", "1K", "-e", "16K", "--power", "--backend", "gloo", "--iters", "2")
    assert spec.nprocs == 3 and spec.sizes == [1024, 4096, 16384] and spec.power and spec.iters == 2


# for each option the spec takes: a value other than the default, what else it needs, and the check
SPEC_SAMPLES = {
    "collective": ("all_gather", {}, lambda s: s.collectives == ["all_gather"]),
    "backend": ("gloo", {}, lambda s: s.backends == ["gloo"]),
    "min_bytes": ("1M", {}, lambda s: s.sizes[0] == 1 << 20),
    "max_bytes": ("64", {}, lambda s: s.sizes[-1] == 64),
    "step_factor": (4.0, {}, lambda s: s.sizes[:2] == [8, 32]),
    "sizes": ("8,1K", {}, lambda s: s.sizes == [8, 1024]),
    "algorithm": ("ring,tree", {}, lambda s: s.algorithms == ["ring", "tree"]),
    "ring_order": ("topology", {"algorithm": "ring"}, lambda s: s.algorithms == ["ring_topology"]),
    "segment_bytes": ("4K", {}, lambda s: s.segment_bytes == 4096),
    "channels": (3, {}, lambda s: s.channels == 3),
    "dtype": ("int8,float64", {}, lambda s: s.dtypes == ["int8", "float64"]),
    "op": ("max", {}, lambda s: s.ops == ["max"]),
    "mode": ("in-place", {}, lambda s: s.in_place == [True]),
    "nprocs": (2, {}, lambda s: s.nprocs == 2),
    "oversubscribe": (True, {}, lambda s: s.oversubscribe),
    "launcher": ("local", {"backend": "gloo"}, lambda s: s.launcher == "local"),
    "device": ("cuda", {"backend": "gloo", "algorithm": "peer_oneshot"}, lambda s: s.device == "cuda"),
    "warmup": (0, {}, lambda s: s.warmup == 0),
    "iters": (7, {}, lambda s: s.iters == 7),
    "min_time": (0.5, {}, lambda s: s.min_time == 0.5),
    "max_iters": (3, {}, lambda s: s.max_iters == 3 and s.min_iters == 3),
    "batch": (1, {}, lambda s: s.batch == 1),
    "timeout": (9.0, {}, lambda s: s.timeout == 9.0),
    "timer": ("python", {}, lambda s: s.timer == "python"),
    "graph": (False, {}, lambda s: s.graph is False),
    "ranks_per_node": (2, {}, lambda s: s.ranks_per_node == 2),
    "emulate": ("2x2", {"backend": "gloo"}, lambda s: s.emulate == "2x2" and s.nprocs == 4),
    "link_rate": ("100mbit", {"backend": "gloo", "emulate": "1x2"}, lambda s: s.link_rate == "100mbit"),
    "placement": ("round-robin", {"backend": "gloo", "emulate": "2x1"}, lambda s: s.placement == "round-robin"),
    "node_link_rate": ("1=600mbit", {"backend": "gloo", "emulate": "2x1"},
                       lambda s: s.node_rates() == {0: "1gbit", 1: "600mbit"}),
    "inject_delay": ("1=0.3", {"nprocs": 2}, lambda s: s.delays() == {1: 0.3}),
    "power": (True, {}, lambda s: s.power),
    "nccl_tuning": (True, {"backend": "nccl", "device": "cuda"}, lambda s: s.nccl_tuning),
    "label": ("x", {}, lambda s: s.label == "x"),
    "root": (2, {"nprocs": 4}, lambda s: s.root == 2),
    "spread": (0.5, {"collective": "all_to_allv"}, lambda s: s.spread == 0.5),
    "split": ("MOD 2", {"nprocs": 4}, lambda s: s.split == "mod:2" and s.group_size() == 2),
    "registration": ("1", {"backend": "nccl", "device": "cuda"}, lambda s: s.registration == "local"),
    "matrix": (MATRIX, {"collective": "all_to_allv", "nprocs": 4}, lambda s: s.peer_bytes is not None),
    "matrix_scale": (2.0, {"collective": "all_to_allv", "nprocs": 4, "matrix": MATRIX}, lambda s: s.matrix_scale == 2.0),
    "out_dir": ("results/x", {}, lambda s: s.out_dir == "results/x"),
}


def test_every_spec_option_has_a_sample():
    assert set(SPEC_DEFAULTS) == set(SPEC_SAMPLES)


@pytest.mark.parametrize("keyword", sorted(SPEC_SAMPLES))
def test_every_spec_option_reaches_the_spec(keyword):
    value, needs, check = SPEC_SAMPLES[keyword]
    base = {"backend": "mpi"} | needs
    assert not check(SweepSpec.from_options(**base))  # the default does not already pass
    assert check(SweepSpec.from_options(**base | {keyword: value}))


@pytest.mark.parametrize("name", sorted(SUITE_FIELDS))
def test_every_suite_field_reaches_the_run(tmp_path, name):
    keyword = BY_NAME[name].spec
    if keyword is None:  # run-level fields: checked below
        assert name in ("repeat", "launcher_args")
        return
    value, needs, check = SPEC_SAMPLES[keyword]
    fields = {"label": "a", "backend": "mpi"} | needs | {name: value}
    text = ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else repr(v) if isinstance(v, str) else v}"
                     for k, v in fields.items())
    assert check(_suite_spec(tmp_path, "{" + text + "}"))


def test_run_level_suite_fields(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("runs: [{label: a, repeat: 2, launcher_args: '--x 1'}, {label: b}]\n")
    runs = load_suite(str(f)).runs
    assert [(r.label, r.repeat, r.launcher_args) for r in runs] == [("a", 2, ["--x", "1"]), ("b", 1, [])]


def test_suite_fields_are_the_table():
    assert set(SUITE_FIELDS) == {o.name for o in OPTIONS if o.suite}
    assert {"repeat", "launcher_args", "mode", "label"} <= set(SUITE_FIELDS)
    assert not {"quiet", "json_rows", "resume", "out", "in_place"} & set(SUITE_FIELDS)


def test_defaults_agree_between_cli_spec_and_suite(tmp_path):
    from_options = SweepSpec.from_options()
    assert _cli_spec() == from_options
    suite = _suite_spec(tmp_path, "{label: a}")
    assert dataclasses.replace(suite, label="") == from_options
    # the dataclass's own defaults are the table's, except the buffer mode and the backend
    plain = SweepSpec().validate()
    assert dataclasses.replace(plain, in_place=from_options.in_place, backends=from_options.backends) == from_options


@pytest.mark.parametrize("resolved", ["mpi", "gloo"])
def test_auto_backend_is_resolved_once_for_cli_and_suites(tmp_path, monkeypatch, resolved):
    import commbench.spec_checks

    monkeypatch.setattr(commbench.spec_checks, "default_backend", lambda: resolved)
    assert _cli_spec().backends == [resolved]
    assert _cli_spec("--backend", "auto").backends == [resolved]
    assert _suite_spec(tmp_path, "{label: a}").backends == [resolved]
    assert SweepSpec.from_options(backend="auto,gloo").backends == list(dict.fromkeys([resolved, "gloo"]))


def test_default_backend_without_mpirun_is_gloo(monkeypatch):
    monkeypatch.setattr(options, "find_binary", lambda name: None)
    assert options.default_backend() == "gloo"


def test_help_lists_come_from_the_registries():
    for name, owner in (("collective", COLLECTIVES), ("algorithm", ALGORITHMS), ("dtype", DTYPES), ("op", OPS),
                        ("backend", options.BACKENDS), ("launcher", options.LAUNCHERS), ("device", options.DEVICES)):
        assert all(v in BY_NAME[name].help for v in owner), name
    assert BY_NAME["collective"].default == ",".join(c for c in COLLECTIVES if COLLECTIVES[c].default_sweep)
    assert BY_NAME["collective"].default == "all_reduce,all_gather,reduce_scatter"  # -c not given: the three


def test_mode_switches():
    base = {o.name: o.default for o in CLI_OPTIONS}
    assert options.cli_fields(base)["mode"] == "both"
    assert options.cli_fields(base | {"in_place": True})["mode"] == "in-place"
    assert options.cli_fields(base | {"out_of_place": True})["mode"] == "out-of-place"
    assert "in_place" not in options.cli_fields(base)
    with pytest.raises(InputError, match="^choose one of --in-place, --out-of-place and --both$"):
        options.cli_fields(base | {"in_place": True, "both": True})


def test_launcher_args_split_like_a_shell():
    assert options.launcher_argv("--hostfile 'my hosts'") == ["--hostfile", "my hosts"]
    assert options.launcher_argv("") == []
    with pytest.raises(InputError, match="invalid launcher arguments"):
        options.launcher_argv("--x 'open")
