"""commbench.machine.facts: the one seam for this machine's facts, read from Linux's files (here from
files written by the test: another machine's), and `pretend` that the --machine option uses."""

import dataclasses

import pytest

from commbench.machine import facts as machine_facts


@pytest.fixture
def other_machine(tmp_path, monkeypatch):
    """A 300 MB-L3 Xeon's /proc/cpuinfo and cpu0's caches (L1d, L1i, L2, L3), in files."""
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8481C\n"
                                      "flags\t\t: fpu sse2 avx avx2\n\nprocessor\t: 1\nmodel name\t: other\n"
                                      "flags\t\t: fpu\n")
    for i, (level, size) in enumerate([(1, "48K"), (1, "32K"), (2, "2048K"), (3, "307200K")]):
        index = tmp_path / "cache" / f"index{i}"
        index.mkdir(parents=True)
        (index / "level").write_text(f"{level}\n")
        (index / "size").write_text(f"{size}\n")
    monkeypatch.setattr(machine_facts, "CPUINFO", tmp_path / "cpuinfo")
    monkeypatch.setattr(machine_facts, "CACHES", tmp_path / "cache")
    machine_facts._real.cache_clear()
    yield tmp_path
    machine_facts._real.cache_clear()


def test_the_facts_are_read_from_the_kernels_files(other_machine):
    found = machine_facts._real()
    assert found.cpu_model == "Intel(R) Xeon(R) Platinum 8481C"  # the first CPU's, not the last's
    assert found.cpu_flags == {"fpu", "sse2", "avx", "avx2"}
    assert found.llc_bytes == 300 << 20  # the highest level, not the largest index or the first
    assert found.cpus >= 1 and 1 <= found.usable_cpus <= found.cpus


def test_unreadable_files_leave_facts_unknown_not_a_crash(other_machine):
    (other_machine / "cpuinfo").unlink()
    (other_machine / "cache" / "index3" / "size").write_text("a lot\n")
    found = machine_facts._real()
    assert found.cpu_flags == frozenset() and found.cpu_model and found.llc_bytes == 2048 << 10


def test_pretend_replaces_every_fact_until_undone(monkeypatch):
    own = machine_facts._real()
    monkeypatch.setattr(machine_facts, "_pretended", None)  # restored after the test (the session's --machine)
    machine_facts.pretend(dataclasses.replace(own, cpus=64, usable_cpus=64))
    assert machine_facts.facts().cpus == 64 and machine_facts.facts().cpu_model == own.cpu_model
    machine_facts.pretend(None)
    assert machine_facts.facts() == machine_facts._real()
