"""`commbench topo`: this machine as collectives see it."""

from __future__ import annotations

import typer

from commbench.cli.app import app


@app.command()
def topo(json_out: bool = typer.Option(False, "--json", help="Print the description as JSON.")):
    """This machine as collectives see it: cores, NUMA nodes, NICs, GPUs, NVLink and P2P between GPUs."""
    import json

    from commbench.rank.machine import describe

    info = describe()
    if json_out:
        print(json.dumps(info, indent=2))
        return
    cpu = info["cpu"]
    print(f"{info['hostname']}: {cpu['cores']} cores, {cpu['numa_nodes']} NUMA node(s), {cpu['machine']}")
    for nic in info["nics"]:
        speed = f"{nic['speed_mbps'] / 1000:g} Gbit/s" if nic["speed_mbps"] else "speed not reported"
        print(f"  nic {nic['name']}: {speed}, MTU {nic['mtu']}, NUMA node {nic['numa_node']}")
    if info["gpus_unavailable"]:
        print(f"  GPUs: none ({info['gpus_unavailable']})")
    for g in info["gpus"]:
        print(f"  gpu {g['index']}: {g['name']}, {g['memory_gib']} GiB, {g['nvlinks_up']} NVLink links up, "
              f"PCI {g['pci_bus_id']}, NUMA node {g['numa_node']}")
    for pair in info["gpu_pairs"]:
        i, j = pair["gpus"]
        print(f"  gpu {i} <-> gpu {j}: {pair['path']}, P2P read {pair['p2p_read']}, over NVLink {pair['p2p_nvlink']}")


