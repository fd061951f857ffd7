"""`commbench topo`: this machine as collectives see it."""

from __future__ import annotations

import typer

from commbench.cli.app import app


@app.command()
def topo(json_out: bool = typer.Option(False, "--json", help="Print the description as JSON.")):
    """This machine as collectives see it: cores, NUMA nodes, NICs, GPUs, NVLink and P2P between GPUs."""
    import json

    from commbench.machine.inventory import describe

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




FRESH_HELP = "Measure again (a figure the cache holds better is kept: a floor is the machine at its best)."


@app.command()
def floor(fresh: bool = typer.Option(False, "--fresh", help=FRESH_HELP),
          json_out: bool = typer.Option(False, "--json", help="Print the floors as JSON.")):
    """What two cores of this machine can physically do: the floors every point's efficiency is read against
    (run.json `floors`; the rows' latency_efficiency and bandwidth_efficiency). Measured once per machine and
    cached."""
    import json

    from commbench.errors import InputError
    from commbench.kernels import floor as probe
    from commbench.presentation.terminal import printable

    was_cached = not fresh and probe.cached() is not None
    try:
        found = probe.machine_floor(fresh=fresh)
    except probe.FloorUnavailable as exc:
        raise InputError(str(exc)) from None
    if json_out:
        print(json.dumps(found, indent=2))
        return
    a, b = found["cores"]
    on = f"cores {a} and {b}" if a >= 0 else "one core (this process may run on one only: the threads share it)"
    since = f" (the best of the probes since {printable(found['best_since'])})" if found.get("best_since") else ""
    print(f"{printable(found['host'])}: {printable(found['cpu_model'])}, {on}, measured {printable(found['measured_at'])}"
          f"{since}{' (cached: --fresh measures again)' if was_cached else ''}")
    print(f"  flag hand-off, one way      {found['handoff_us']:8.3f} us")
    print(f"  8 B exchange-and-add        {found['exchange_us']:8.3f} us   (the floor of a 2-rank 8 B all-reduce)")
    print(f"  one core's copy rate        {found['copy_GBps']:8.2f} GB/s "
          f"(the better of memcpy and a streamed copy of {probe.COPY_BYTES >> 20} MiB)")
    if found.get("slower_now"):
        read = {"handoff_us": "hand-off {:.3f} us", "exchange_us": "exchange {:.3f} us",
                "copy_GBps": "copy {:.2f} GB/s"}
        now = ", ".join(read[k].format(v) for k, v in found["slower_now"].items())
        print(f"  this probe read {now}: worse than the best above, which stays cached (delete "
              f"{printable(str(probe.cache_path()))} to forget it)")
