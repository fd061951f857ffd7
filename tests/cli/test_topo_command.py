"""`commbench topo` (commbench/cli/topo.py), in-process on a machine described by a stand-in for
commbench.machine.inventory.describe: the text lists the cores, every NIC (its speed in Gbit/s or that it
is not reported), the GPUs or why there are none, and every GPU pair's path; --json prints the
description itself. (tests/gpu/test_topo.py runs it on a real GPU machine.)"""

import json

import pytest

import commbench.machine.inventory
from cli_inprocess import run_cli
from commbench.errors import OK

GPU_BOX = {
    "hostname": "gpu-node", "cpu": {"cores": 64, "numa_nodes": 2, "machine": "x86_64"},
    "nics": [{"name": "ib0", "speed_mbps": 400000, "mtu": 4092, "numa_node": 1},
             {"name": "eth0", "speed_mbps": 2500, "mtu": 1500, "numa_node": 0},
             {"name": "lo", "speed_mbps": None, "mtu": 65536, "numa_node": None}],
    "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_gib": 79.6, "nvlinks_up": 18,
              "pci_bus_id": "00000000:18:00.0", "numa_node": 0, "uuid": "GPU-a"},
             {"index": 1, "name": "NVIDIA H100 80GB HBM3", "memory_gib": 79.6, "nvlinks_up": 18,
              "pci_bus_id": "00000000:2A:00.0", "numa_node": 0, "uuid": "GPU-b"}],
    "gpu_pairs": [{"gpus": [0, 1], "path": "NVLink (NV18)", "p2p_read": "ok", "p2p_nvlink": "ok"}],
    "gpus_unavailable": None,
}
CPU_BOX = {"hostname": "vm", "cpu": {"cores": 2, "numa_nodes": 1, "machine": "aarch64"}, "nics": [], "gpus": [],
           "gpu_pairs": [], "gpus_unavailable": "NVML is not usable: NVML Shared Library Not Found"}


@pytest.fixture
def machine(monkeypatch):
    def use(description):
        monkeypatch.setattr(commbench.machine.inventory, "describe", lambda: description)
    return use


def test_the_text_of_a_gpu_machine(machine):
    machine(GPU_BOX)
    outcome = run_cli("topo")
    assert outcome.code == OK and outcome.stderr == ""
    assert outcome.stdout.splitlines() == [
        "gpu-node: 64 cores, 2 NUMA node(s), x86_64",
        "  nic ib0: 400 Gbit/s, MTU 4092, NUMA node 1",
        "  nic eth0: 2.5 Gbit/s, MTU 1500, NUMA node 0",
        "  nic lo: speed not reported, MTU 65536, NUMA node None",
        "  gpu 0: NVIDIA H100 80GB HBM3, 79.6 GiB, 18 NVLink links up, PCI 00000000:18:00.0, NUMA node 0",
        "  gpu 1: NVIDIA H100 80GB HBM3, 79.6 GiB, 18 NVLink links up, PCI 00000000:2A:00.0, NUMA node 0",
        "  gpu 0 <-> gpu 1: NVLink (NV18), P2P read ok, over NVLink ok",
    ]


def test_a_machine_without_gpus_says_why(machine):
    machine(CPU_BOX)
    outcome = run_cli("topo")
    assert outcome.code == OK
    assert outcome.stdout == ("vm: 2 cores, 1 NUMA node(s), aarch64\n"
                              "  GPUs: none (NVML is not usable: NVML Shared Library Not Found)\n")


@pytest.mark.parametrize("description", [GPU_BOX, CPU_BOX], ids=["gpus", "cpu"])
def test_json_is_the_description_itself(machine, description):
    machine(description)
    outcome = run_cli("topo", "--json")
    assert outcome.code == OK and json.loads(outcome.stdout) == description
    assert outcome.stdout.startswith("{\n  \"hostname\"")  # indented for reading


def test_this_machine_is_described_in_both_forms():
    text, doc = run_cli("topo"), run_cli("topo", "--json")
    assert text.code == doc.code == OK
    info = json.loads(doc.stdout)
    assert text.stdout.startswith(f"{info['hostname']}: {info['cpu']['cores']} cores, ")
    assert len(text.stdout.splitlines()) == 1 + len(info["nics"]) + len(info["gpus"]) + len(info["gpu_pairs"]) + (
        1 if info["gpus_unavailable"] else 0)
