"""`commbench topo`: what the kernel says about this machine, and why there are no GPUs here."""

import json
import os
import subprocess

from conftest import commbench


def test_topo_json_matches_the_kernel():
    info = json.loads(commbench("topo", "--json", check_rc=0).stdout)
    assert info["cpu"]["cores"] == os.cpu_count()
    up = subprocess.run(["ip", "-o", "link", "show", "up"], capture_output=True, text=True, check=True).stdout
    names = {line.split(":")[1].strip().split("@")[0] for line in up.splitlines()} - {"lo"}
    assert {n["name"] for n in info["nics"]} <= names and info["nics"]
    for nic in info["nics"]:
        assert nic["mtu"] == int(open(f"/sys/class/net/{nic['name']}/mtu").read())
    if not info["gpus"]:  # this machine: no GPU, and the reason is given
        assert info["gpus_unavailable"] and info["gpu_pairs"] == []


def test_topo_text():
    proc = commbench("topo", check_rc=0)
    assert f"{os.cpu_count()} cores" in proc.stdout and ("GPUs: none" in proc.stdout or "gpu 0:" in proc.stdout)
