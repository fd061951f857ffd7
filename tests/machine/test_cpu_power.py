"""CPU power from RAPL (commbench.machine.cpu_power) on replayed powercap trees (tests/data/powercap:
two Intel sockets with DRAM, one AMD socket without): the domains read and skipped, counters
advancing, wrap-around, unreadable files, perf's PMU description, one reader per node, the columns
a window gives; and a real run reading a tree whose counters a thread advances, and this VM's
one-line reason when there is none."""

import json
import shutil
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from commbench.errors import OK
from commbench.machine import cpu_power
from commbench.machine import power
from conftest import DATA, commbench

TREES = DATA / "powercap"


def _tree(tmp_path, machine="intel-2s") -> Path:
    root = tmp_path / machine
    shutil.copytree(TREES / machine, root)
    return root


def _advance(root: Path, microjoules: dict[str, int]) -> None:
    """Move the counters of the named zones on, wrapping at their range, as a running machine would."""
    for zone, delta in microjoules.items():
        span = int((root / zone / "max_energy_range_uj").read_text())
        now = int((root / zone / "energy_uj").read_text())
        tmp = root / zone / "energy_uj.next"  # replaced whole, as a read of sysfs is
        tmp.write_text(f"{(now + delta) % (span + 1)}\n")
        tmp.replace(root / zone / "energy_uj")


def test_packages_and_dram_are_read_and_parts_of_them_are_not(tmp_path):
    source = cpu_power.Powercap(_tree(tmp_path))
    assert sorted(source.domains) == ["dram-0", "dram-1", "package-0", "package-1"]  # no core, uncore, psys, mmio
    assert cpu_power.Powercap(_tree(tmp_path, "amd-1s")).domains.keys() == {"package-0"}  # no DRAM domain


def test_the_energy_between_two_reads_handles_a_wrap(tmp_path):
    root = _tree(tmp_path)
    source = cpu_power.Powercap(root)
    before = source.read()
    _advance(root, {"intel-rapl:0": 45_000_000, "intel-rapl:0:2": 6_000_000, "intel-rapl:1": 40_000_000,
                    "intel-rapl:1:1": 5_500_000, "intel-rapl:0:0": 30_000_000})
    after = source.read()
    assert after["package-1"] < before["package-1"]  # package-1's counter wrapped
    assert source.joules(before, after) == pytest.approx({"package-0": 45.0, "package-1": 40.0, "dram-0": 6.0,
                                                          "dram-1": 5.5})


def test_a_meter_over_a_window_gives_joules_and_watts_per_domain(tmp_path):
    root = _tree(tmp_path, "amd-1s")
    meter = cpu_power.CpuMeter(cpu_power.Powercap(root))
    meter.start()
    _advance(root, {"intel-rapl:0": 12_500_000})
    reading = meter.stop()
    assert reading.energy_j == pytest.approx(12.5) and reading.domains == pytest.approx({"package-0": 12.5})
    assert reading.seconds > 0 and reading.power_w == pytest.approx(12.5 / reading.seconds)


@pytest.mark.parametrize("damage,says", [
    (lambda root: (root / "intel-rapl:0" / "energy_uj").write_text("lots\n"), "not a count"),
    (lambda root: (root / "intel-rapl:0" / "max_energy_range_uj").unlink(), "max_energy_range_uj"),
    (lambda root: [shutil.rmtree(root / z) for z in ("intel-rapl:0", "intel-rapl:1")], "has no intel-rapl package"),
])
def test_a_tree_that_cannot_be_read_is_one_line(tmp_path, damage, says):
    root = _tree(tmp_path)
    damage(root)
    with pytest.raises(cpu_power.Unreadable, match=says) as info:
        cpu_power.Powercap(root)
    assert "\n" not in str(info.value)


def test_counters_for_root_only_say_so(tmp_path, monkeypatch):
    """Since Linux 5.10 energy_uj is 0400 root (this test runs as root, so the refusal is simulated)."""
    root = _tree(tmp_path)
    real = Path.read_text

    def read_text(self, *args, **kwargs):
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)
    with pytest.raises(cpu_power.Unreadable, match="readable by root only"):
        cpu_power.Powercap(root)


def test_the_perf_power_pmu_is_read_from_its_sysfs_description(tmp_path):
    pmu = tmp_path / "power"
    (pmu / "events").mkdir(parents=True)
    (pmu / "type").write_text("23\n")
    (pmu / "cpumask").write_text("0,8-9\n")
    (pmu / "events" / "energy-pkg").write_text("event=0x02\n")
    (pmu / "events" / "energy-pkg.scale").write_text("2.3283064365386962890625e-10\n")
    (pmu / "events" / "energy-ram").write_text("event=0x03\n")
    (pmu / "events" / "energy-ram.scale").write_text("2.3283064365386962890625e-10\n")
    assert cpu_power.perf_events(pmu) == {"energy-pkg": (23, 2, 2.3283064365386962890625e-10),
                                          "energy-ram": (23, 3, 2.3283064365386962890625e-10)}
    assert cpu_power.cpu_list((pmu / "cpumask").read_text()) == [0, 8, 9]
    (pmu / "events" / "energy-pkg").unlink()
    with pytest.raises(cpu_power.Unreadable, match="no energy-pkg"):
        cpu_power.perf_events(pmu)


def test_without_either_source_both_reasons_are_given(tmp_path, monkeypatch):
    monkeypatch.setenv(cpu_power.POWERCAP_ENV, str(tmp_path / "none"))
    monkeypatch.setenv(cpu_power.PERF_ENV, str(tmp_path / "none-either"))
    with pytest.raises(cpu_power.Unreadable) as info:
        cpu_power.open_source()
    assert str(info.value).startswith("powercap: no ") and "; perf: no perf power PMU" in str(info.value)


class _World:
    """allgather_object over threads-as-ranks of one host or two."""

    def __init__(self, hosts):
        self.hosts, self.barrier, self.slots = hosts, threading.Barrier(len(hosts)), [None] * len(hosts)

    def comm(self, rank):
        world = self

        def allgather_object(value):
            world.slots[rank] = value
            world.barrier.wait()
            out = list(world.slots)
            world.barrier.wait()
            return out
        return SimpleNamespace(rank=rank, size=len(self.hosts), allgather_object=allgather_object)

    def run(self, fn):
        out = [None] * len(self.hosts)

        def one(rank):
            out[rank] = fn(self.comm(rank), self.hosts[rank])
        threads = [threading.Thread(target=one, args=(r,)) for r in range(len(self.hosts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out


def test_one_rank_per_node_reads_its_counters(tmp_path, monkeypatch):
    monkeypatch.setenv(cpu_power.POWERCAP_ENV, str(_tree(tmp_path)))
    got = _World(["a", "a", "b", "b"]).run(cpu_power.open_meter)
    kinds = [type(meter).__name__ for meter, _, _, _ in got]
    assert kinds == ["CpuMeter", "NullCpuMeter", "CpuMeter", "NullCpuMeter"]
    assert {(source, tuple(domains), reason) for _, source, domains, reason in got} == {
        ("powercap", ("dram-0", "dram-1", "package-0", "package-1"), None)}


def test_a_node_that_cannot_read_leaves_every_rank_without_a_meter(tmp_path, monkeypatch):
    monkeypatch.setenv(cpu_power.POWERCAP_ENV, str(tmp_path / "none"))
    monkeypatch.setenv(cpu_power.PERF_ENV, str(tmp_path / "none"))
    got = _World(["a", "b"]).run(cpu_power.open_meter)
    assert all(meter is None and reason.startswith("powercap: no ") for meter, _, _, reason in got)


def test_the_meters_columns_sum_nodes_and_keep_each_domain():
    cpu = SimpleNamespace(start=lambda: None,
                          stop=lambda: cpu_power.CpuReading(60.0, 2.0, {"package-0": 50.0, "dram-0": 10.0}))
    gpu = SimpleNamespace(start=lambda: None, stop=lambda: power.Reading(300.0, 150.0, 160.0, 2.0))
    meters = power.Meters(gpu, cpu, ["dram-0", "package-0"])
    meters.start()
    one = meters.stop()
    assert one == [300.0, 150.0, 160.0, 60.0, 30.0, 5.0, 25.0]
    total = [2 * v for v in one]  # two nodes alike, summed over the ranks
    assert meters.columns(total, calls=10) == {
        "energy_j": 60.0, "power_w_avg": 300.0, "power_w_max": 320.0, "cpu_energy_j": 12.0, "cpu_power_w_avg": 60.0,
        "cpu_power_domains": "dram-0 10.0 W, package-0 50.0 W"}
    idle = power.Meters(None, cpu_power.NullCpuMeter(), ["package-0"])
    assert idle.stop() == [0.0, 0.0, 0.0]  # a rank that reads nothing adds nothing


def test_the_note_says_what_was_not_measured():
    facts = {"gpu": {"measured": False, "reason": "no GPU in this run (--device cpu)"},
             "cpu": {"measured": True, "reason": None}}
    assert power.note("cpu", facts) is None
    facts["cpu"] = {"measured": False, "reason": "powercap: no x"}
    assert power.note("cpu", facts) == "CPU power not measured: powercap: no x"
    assert power.note("cuda", facts) == ("GPU power not measured: no GPU in this run (--device cpu); "
                                         "CPU power not measured: powercap: no x")


@pytest.fixture
def live_tree(tmp_path):
    """amd-1s with its package counter advancing at 40 W while the test runs."""
    root = _tree(tmp_path, "amd-1s")
    stop = threading.Event()

    def tick():
        last = time.monotonic()
        while not stop.wait(0.005):
            now = time.monotonic()
            _advance(root, {"intel-rapl:0": int(40e6 * (now - last))})
            last = now
    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    yield root
    stop.set()
    thread.join()


def test_a_run_reads_the_cpus_energy_per_point(job, tmp_path, live_tree):
    out = tmp_path / "run"
    commbench("run", "-n", 2, "--backend", "mpi", "--power", "--sizes", "64,64K", "-c", "all_reduce", "--out-of-place",
              "--iters", 20, "--out", out, "--quiet", env={cpu_power.POWERCAP_ENV: str(live_tree)}, check_rc=OK)
    rows = pd.read_csv(out / "results.csv")
    meta = json.loads((out / "run.json").read_text())
    assert meta["power"]["cpu"] == {"measured": True, "reason": None, "source": "powercap", "domains": ["package-0"]}
    assert rows.cpu_power_w_avg.between(30, 50).all(), rows.cpu_power_w_avg.tolist()  # the replayed 40 W
    assert (rows.cpu_energy_j_per_byte == rows.cpu_energy_j / rows.size_bytes).all()
    assert rows.cpu_power_domains.str.match(r"^package-0 \d+\.\d W$").all() and rows.power_w_avg.isna().all()
