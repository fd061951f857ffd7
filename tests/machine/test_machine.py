"""`commbench topo`: what the kernel says about this machine, and why there are no GPUs here."""

import json
import subprocess

from commbench.cli import app
from commbench.machine.facts import facts


def _topo(capsys, *args) -> str:
    """`commbench topo ARGS` in this process (the command only reads the machine): its stdout."""
    capsys.readouterr()
    assert app(["topo", *args], standalone_mode=False) is None
    return capsys.readouterr().out


def test_topo_json_matches_the_kernel(capsys):
    info = json.loads(_topo(capsys, "--json"))
    assert info["cpu"]["cores"] == facts().cpus and info["cpu"]["llc_bytes"] == facts().llc_bytes
    up = subprocess.run(["ip", "-o", "link", "show", "up"], capture_output=True, text=True, check=True).stdout
    names = {line.split(":")[1].strip().split("@")[0] for line in up.splitlines()} - {"lo"}
    assert {n["name"] for n in info["nics"]} <= names and info["nics"]
    for nic in info["nics"]:
        assert nic["mtu"] == int(open(f"/sys/class/net/{nic['name']}/mtu").read())
    if not info["gpus"]:  # this machine: no GPU, and the reason is given
        assert info["gpus_unavailable"] and info["gpu_pairs"] == []


def test_topo_text(capsys):
    out = _topo(capsys)
    assert f"{facts().cpus} cores" in out and ("GPUs: none" in out or "gpu 0:" in out)
