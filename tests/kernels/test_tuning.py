"""commbench.tuning and abi.TUNABLES (issue 64): every tuning constant of the kernels overridden by
its COMMBENCH_KERNEL_* variable, a bad value refused in one line before anything starts, what is set
recorded in run.json and used by the ranks (a real job with every variable set, exact)."""

import os
import re

import pytest

from conftest import commbench, load_run
from commbench import runinfo
from commbench.errors import BAD_INPUT, OK, InputError
from commbench.kernels import abi
from commbench.tuning import PREFIX
from commbench.spec import SweepSpec


@pytest.fixture(autouse=True)
def no_tuning(monkeypatch):
    for tunable in abi.TUNABLES.values():
        monkeypatch.delenv(tunable.variable, raising=False)


def test_every_variable_is_named_for_its_constant_and_starts_with_the_prefix():
    assert {t.variable for t in abi.TUNABLES.values()} == {
        f"{PREFIX}{n}" for n in ("SLOT_BYTES", "CHANNEL_BYTES", "MAX_CHANNELS", "ONESHOT_BYTES", "SPIN_US", "NAP_US",
                                 "CACHED_BYTES", "DIRECT_SLOTS", "TREE_SPLIT_BYTES")}
    assert all(t.meaning and "\n" not in t.meaning for t in abi.TUNABLES.values())


def test_unset_the_defaults_are_the_constants(monkeypatch):
    assert abi.tuned("slot_bytes", "cpu") == abi.SLOT_BYTES["cpu"] and abi.tuned("slot_bytes", "cuda") == abi.SLOT_BYTES["cuda"]
    assert abi.tuned("spin_us", "oversubscribed") == abi.SPIN_S["oversubscribed"]
    assert abi.tuned("max_channels", "cuda") == abi.MAX_AUTO_CHANNELS["cuda"] and abi.tuned("nap_us", "cpu") == abi.NAP_S
    assert abi.tuned("oneshot_bytes", "cpu") is None  # ONESHOT_MAX's own table decides
    assert [abi.tuned(n, w) for n in ("cached_bytes", "direct_slots", "tree_split_bytes") for w in ("cpu", "cuda")] == [
        abi.CACHED_OUTPUT_BYTES] * 2 + [abi.DIRECT_SLOTS] * 2 + [abi.TREE_SPLIT_BYTES] * 2
    monkeypatch.setenv(abi.TUNABLES["spin_us"].variable, "  ")  # empty: unset
    assert abi.tuned("spin_us", "cpu") == abi.SPIN_S["cpu"]


def test_set_each_variable_replaces_its_constant_everywhere(monkeypatch):
    monkeypatch.setenv(f"{PREFIX}SPIN_US", "3")
    monkeypatch.setenv(f"{PREFIX}MAX_CHANNELS", "1")
    monkeypatch.setenv(f"{PREFIX}CHANNEL_BYTES", "1024")
    assert abi.spin_time("cpu", 2) == abi.spin_time("cuda", 2) == abi.spin_time("cpu", 10_000) == pytest.approx(3e-6)
    assert abi.auto_channels("cpu", 1 << 30, 1) == abi.auto_channels("cuda", 1 << 30, 1) == 1
    monkeypatch.setenv(f"{PREFIX}MAX_CHANNELS", "16")
    assert abi.auto_channels("cuda", 4096, 1) == 4  # a channel per 1 KiB
    monkeypatch.setenv(f"{PREFIX}NAP_US", "50")
    assert abi.nap_time("cpu", "gloo") == pytest.approx(50e-6) and abi.nap_time("cpu", "mpi") == 0.0  # the policy stays


def test_the_one_shot_bound_replaces_every_bound_of_the_table(monkeypatch):
    assert abi.schedule("ring", "all_reduce", "cpu", 4, 512, 1) == "oneshot"  # the default bound (512 B)
    assert abi.schedule("ring", "all_reduce", "cuda", 4, 8, 1) == "ring"  # never one-shot on a GPU by default
    monkeypatch.setenv(f"{PREFIX}ONESHOT_BYTES", "0")
    assert abi.schedule("ring", "all_reduce", "cpu", 4, 8, 1) == "ring"  # 0: never
    monkeypatch.setenv(f"{PREFIX}ONESHOT_BYTES", str(abi.ONESHOT_BYTES))
    assert abi.schedule("tree", "all_gather", "cuda", 4, abi.ONESHOT_BYTES, 1) == "oneshot"
    assert abi.schedule("ring", "all_reduce", "cpu", 4, abi.ONESHOT_BYTES + 1, 1) == "ring"


@pytest.mark.parametrize("name, raw, says", [
    ("SPIN_US", "abc", "give a number from 0 to 1,000,000"), ("SPIN_US", "-1", "from 0"), ("SPIN_US", "nan", "a number"),
    ("SLOT_BYTES", "5000", "a power of two"), ("SLOT_BYTES", "1024", "a whole number from 4,096 to 16,777,216"),
    ("SLOT_BYTES", "64K", "a whole number"), ("MAX_CHANNELS", "33", f"to {abi.MAX_CHANNELS}"),
    ("ONESHOT_BYTES", str(abi.ONESHOT_BYTES + 1), f"to {abi.ONESHOT_BYTES:,}"), ("CHANNEL_BYTES", "1.5", "a whole number"),
])
def test_a_bad_value_is_one_line_naming_the_variable(monkeypatch, name, raw, says):
    monkeypatch.setenv(f"{PREFIX}{name}", raw)
    with pytest.raises(InputError, match=rf"^{PREFIX}{name}=.*{re.escape(says)}") as info:
        abi.check_tuning()
    assert "\n" not in str(info.value)
    with pytest.raises(InputError, match=f"{PREFIX}{name}"):  # a run's spec checks them before anything starts
        SweepSpec(nprocs=2, backends=["mpi"]).validate()


def test_a_misspelt_variable_is_refused_with_the_name_it_is_near(monkeypatch):
    """Recorded and passed on but read by nothing, it would say a run was tuned that was not."""
    monkeypatch.setenv(f"{PREFIX}SLOTBYTES", "8192")
    with pytest.raises(InputError, match=rf"^unknown variable {PREFIX}SLOTBYTES: did you mean {PREFIX}SLOT_BYTES\?"):
        abi.check_tuning()


def test_what_is_set_is_recorded_as_the_runs_environment():
    assert runinfo.collective_env({f"{PREFIX}SPIN_US": "3", "HOME": "/root"}) == {f"{PREFIX}SPIN_US": "3"}


def test_a_run_with_every_variable_set_is_exact_and_recorded(job, tmp_path):
    """The ranks size their kernels from the variables (a slot of 4 KiB, one channel per KiB up to 2, no call
    one-shot, no spin), every point exact; the 64 B calls, one-shot by default, run the kernels' own schedules;
    run.json and rank 0 record the variables; a bad one is refused in one line."""
    tuned = {f"{PREFIX}SLOT_BYTES": "4096", f"{PREFIX}CHANNEL_BYTES": "1024", f"{PREFIX}MAX_CHANNELS": "2",
             f"{PREFIX}ONESHOT_BYTES": "0", f"{PREFIX}SPIN_US": "0", f"{PREFIX}NAP_US": "0"}
    assert abi.schedule("ring", "all_reduce", "cpu", 2, 64, 2) == abi.schedule("tree", "all_reduce", "cpu", 2, 64, 2) \
        == "oneshot"  # (unset)
    out = tmp_path / "r"
    proc = commbench("run", "-n", "2", "--backend", "mpi", "-a", "ring_kernel,tree_kernel", "-c",
                     "all_reduce,all_gather,reduce_scatter", "--sizes", "64,4K,64K", "--iters", "5", "-w", "1",
                     "--out", str(out), "--quiet", env=os.environ | tuned)
    assert proc.returncode == OK, proc.stderr[-2000:]
    rows, _, meta = load_run(out)
    assert len(rows) == 3 * 3 * 2 + 3 * 2 and (rows.wrong == 0).all()  # ring: 3 collectives; tree: all-reduce
    small = rows[(rows.size_bytes == 64) & (rows.collective == "all_reduce")]
    assert set(zip(small.algorithm, small.library_choice)) == {("ring_kernel", "ring"), ("tree_kernel", "tree")}
    assert {k: meta["environment"][k] for k in tuned} == tuned == {k: meta["rank0_environment"][k] for k in tuned}
    bad = commbench("run", "-n", "2", "--sizes", "8", "--out", str(tmp_path / "bad"),
                    env=os.environ | {f"{PREFIX}SLOT_BYTES": "5000"})
    assert bad.returncode == BAD_INPUT and bad.stderr.strip().count("\n") == 0 and "SLOT_BYTES" in bad.stderr
    assert not (tmp_path / "bad").exists()
