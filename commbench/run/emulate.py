"""An emulated multi-node cluster on one machine, out of Linux network namespaces.

    node 0 ns             bridge ns                node 1 ns
    ranks 0..G-1          br0 10.231.0.254         ranks G..2G-1
    eth0 10.231.0.1 ───── n0   n1 ──────────────── eth0 10.231.0.2
          (tbf rate R)        (tbf rate R)               ...

Every emulated node is a namespace with its own loopback, so ranks on one node talk over
loopback (fast), and an `eth0` veth to a bridge namespace. Both ends of every veth are limited
by a token bucket (`tc qdisc tbf`) to the link rate: a full-duplex link of that rate per node,
through a non-blocking switch. MTU 9000 keeps header bytes near 1% of what the counters see.

Latency is not emulated: netem is not available on these kernels, and tbf only shapes rate, so a
message between emulated nodes costs the veth and TCP latency (tens of µs) plus queueing.

The ranks start one of two ways, by the backends' world (commbench.backends):
  * torch.distributed (gloo): one torchrun agent per node, inside its namespace, meeting at node 0;
  * MPI: one mpirun inside the bridge namespace (where br0's address reaches every node), given one
    host per node, HOST-nI; its launch agent (netns_agent.sh, in place of ssh) starts node I's daemon
    inside node I's namespace under that host name, so Open MPI sees N nodes: TCP between them over
    the shaped links (btl_tcp_if_include eth0), shared memory inside each. Placement: mpirun's
    --map-by slot (block) or node (round-robin).

Names carry the parent's pid (cb<pid>n<i>, cb<pid>br), so namespaces left by a process that was
SIGKILLed are recognised and removed by the next emulated run. Everything is torn down on exit,
on error, on Ctrl-C and on SIGTERM / SIGHUP (turned into KeyboardInterrupt while a cluster exists).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
from contextlib import contextmanager

from pathlib import Path

from commbench import interrupts
from commbench.backends import emulated_launcher
from commbench.errors import InputError
from commbench.machine.facts import facts
from commbench.machine.topology import PLACEMENT_ENV
from commbench.machine.traffic import LINK_IFACE_ENV
from commbench.run import processes
from commbench.spec import SweepSpec

SUBNET = "10.231.0"
IFACE = "eth0"
MTU = 9000
BURST = "256kb"  # above the largest GSO packet, so tbf shapes without splitting
QUEUE_LIMIT = "64mb"  # deep enough that TCP never loses a packet (retransmits would skew counters)
# a collective's phases leave connections idle for a moment; without this, TCP would restart
# from its initial window every phase (hosts tuned for collectives set it too)
SYSCTLS = {"net.ipv4.tcp_slow_start_after_idle": 0}
MASTER_PORT = 29500  # node 0's namespace is the run's (or one ab comparison's, a job at a time): the port is free
SWITCH_ADDR = f"{SUBNET}.254"  # br0's own address, in the bridge namespace: where mpirun meets its daemons
AGENT = Path(__file__).with_name("netns_agent.sh")
NETNS_PREFIX_ENV = "COMMBENCH_NETNS_PREFIX"  # the agent's namespace names: this, then the node's index
_NAME_RE = re.compile(r"^cb(\d+)(?:n\d+|br)$")


def node_ns(i: int, pid: int | None = None) -> str:
    return f"cb{pid or os.getpid()}n{i}"


def bridge_ns(pid: int | None = None) -> str:
    return f"cb{pid or os.getpid()}br"


def node_addr(i: int) -> str:
    return f"{SUBNET}.{i + 1}"


def node_host(i: int) -> str:
    """Emulated node i's host name for MPI's ranks (its namespace has a UTS namespace of its own)."""
    return f"{socket.gethostname().split('.')[0][:48]}-n{i}"  # short: Open MPI cuts a name at its first dot


def check_available() -> None:
    """Raise InputError unless this process can build namespaces and shape links."""
    if os.geteuid() != 0:
        raise InputError("--emulate needs root (it creates network namespaces and tc qdiscs); "
                         "run as root or leave out --emulate")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise InputError(f"--emulate needs iproute2's {tool!r}, which is not installed")


def _sh(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {proc.stderr.strip() or proc.stdout.strip()}")


def namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=60).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _delete(ns: str) -> None:
    """Kill what still runs inside the namespace (a rank, an MPI daemon in a process group of its
    own), then delete it: a namespace with a process in it would outlive its name."""
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=60).stdout
    for pid in out.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ValueError, ProcessLookupError, PermissionError):
            pass
    subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=60)


def remove_stale() -> list[str]:
    """Delete the namespaces of emulated clusters whose process no longer exists."""
    removed = []
    for name in namespaces():
        m = _NAME_RE.match(name)
        if m and not processes.alive(int(m.group(1))):
            _delete(name)
            removed.append(name)
    return removed


def _shape(ns: str, dev: str, rate: str) -> None:
    _sh("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", BURST, "limit", QUEUE_LIMIT)


def create(rates: dict[int, str]) -> None:
    """The bridge and one node per entry of rates (node -> its link's tc rate)."""
    nodes = len(rates)
    _sh("ip", "netns", "add", bridge_ns())
    _sh("ip", "-n", bridge_ns(), "link", "add", "br0", "type", "bridge")
    _sh("ip", "-n", bridge_ns(), "link", "set", "br0", "up")
    _sh("ip", "-n", bridge_ns(), "link", "set", "lo", "up")
    _sh("ip", "-n", bridge_ns(), "addr", "add", f"{SWITCH_ADDR}/24", "dev", "br0")
    for i in range(nodes):
        ns, port = node_ns(i), f"n{i}"
        _sh("ip", "netns", "add", ns)
        _sh("ip", "-n", ns, "link", "set", "lo", "up")
        for key, value in SYSCTLS.items():
            _sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"{key}={value}")
        _sh("ip", "link", "add", IFACE, "netns", ns, "mtu", str(MTU), "type", "veth",
            "peer", "name", port, "netns", bridge_ns(), "mtu", str(MTU))
        _sh("ip", "-n", ns, "addr", "add", f"{node_addr(i)}/24", "dev", IFACE)
        _sh("ip", "-n", ns, "link", "set", IFACE, "up")
        _sh("ip", "-n", bridge_ns(), "link", "set", port, "master", "br0", "up")
        _shape(ns, IFACE, rates[i])  # node -> switch
        _shape(bridge_ns(), port, rates[i])  # switch -> node


def destroy(nodes: int) -> None:
    """Delete this process's namespaces (the veths inside go with them) and whatever still runs in them."""
    for ns in [node_ns(i) for i in range(nodes)] + [bridge_ns()]:
        _delete(ns)


@contextmanager
def cluster(spec: SweepSpec):
    """The emulated cluster for spec while the block runs (nothing when spec.emulate is None)."""
    layout = spec.emulated_layout()
    if layout is None:
        yield None
        return
    check_available()
    remove_stale()
    saved = {s: signal.signal(s, interrupts.handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        try:
            create(spec.node_rates())
        except RuntimeError as exc:
            raise InputError(f"cannot build the emulated cluster: {exc}") from None
        yield description(spec)
    finally:
        destroy(layout[0])
        for s, handler in saved.items():
            signal.signal(s, handler)


def description(spec: SweepSpec) -> dict:
    nodes, per_node = spec.emulated_layout()
    launcher = emulated_launcher(spec.backends)
    own = {str(k): r for k, r in spec.node_rates().items() if r != spec.link_rate}
    return {"nodes": nodes, "ranks_per_node": per_node, "link_rate": spec.link_rate, "placement": spec.placement,
            **({"node_link_rates": own} if own else {}),
            "mtu": MTU, "tbf": {"burst": BURST, "limit": QUEUE_LIMIT}, "latency": "not emulated (no netem)",
            "namespaces": [node_ns(i) for i in range(nodes)], "addresses": [node_addr(i) for i in range(nodes)],
            "launcher": launcher, **({"hosts": [node_host(i) for i in range(nodes)]} if launcher == "mpirun" else {})}


def mpirun_command(spec: SweepSpec, mpirun: list[str], extra: list[str], worker: list[str],
                   env: dict) -> list[tuple[list[str], dict]]:
    """One mpirun, in the bridge namespace, with a host per emulated node and the agent that starts
    each node's daemon in its namespace (mpirun: the launcher's own arguments, commbench.run.launch)."""
    nodes, per_node = spec.emulated_layout()
    if any(c.isspace() for c in str(AGENT)):  # mpirun splits its agent's command line at spaces
        raise InputError(f"--emulate with MPI cannot use its launch agent from {str(AGENT)!r}: install commbench "
                         "under a path without spaces")
    for tool in ("unshare", "hostname"):
        if shutil.which(tool) is None:
            raise InputError(f"--emulate with MPI needs {tool!r} (util-linux, hostname), which is not installed")
    env = dict(env, **{LINK_IFACE_ENV: IFACE, NETNS_PREFIX_ENV: f"cb{os.getpid()}n"})
    hosts = ",".join(f"{node_host(i)}:{per_node}" for i in range(nodes))
    # every node's ranks would be bound from core 0 on (Open MPI lays each node out alone): not bound
    args = ["ip", "netns", "exec", bridge_ns(), *mpirun, "--host", hosts, "--bind-to", "none",
            "--map-by", "node" if spec.placement == "round-robin" else "slot",
            "--mca", "plm", "ssh",  # the agent, even inside a Slurm allocation
            "--mca", "plm_ssh_agent", f"{shutil.which('sh') or '/bin/sh'} {AGENT}",
            "--mca", "plm_ssh_no_tree_spawn", "1",  # every daemon started from the bridge, by the agent
            "--mca", "oob_tcp_if_include", f"{SUBNET}.0/24", "--mca", "btl_tcp_if_include", IFACE, "-x", LINK_IFACE_ENV]
    if spec.nprocs > facts().cpus:  # Open MPI counts each node's slots, not the one machine's cores
        args += ["--mca", "mpi_yield_when_idle", "1"]
    return [(args + extra + worker, env)]


def commands(spec: SweepSpec, extra: list[str], worker: list[str], env: dict) -> list[tuple[list[str], dict]]:
    """One torchrun agent per emulated node, started inside the node's namespace."""
    nodes, per_node = spec.emulated_layout()
    env = dict(env, GLOO_SOCKET_IFNAME=IFACE, **{LINK_IFACE_ENV: IFACE, PLACEMENT_ENV: spec.placement})
    env.setdefault("OMP_NUM_THREADS", "1")  # what torchrun would set, without its banner
    env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # no hostname warnings: the namespaces share one hostname
    return [(["ip", "netns", "exec", node_ns(i), worker[0], "-m", "torch.distributed.run",
              "--nnodes", str(nodes), "--node-rank", str(i), "--nproc-per-node", str(per_node),
              "--master-addr", node_addr(0), "--master-port", str(MASTER_PORT)] + extra + worker[1:], env)
            for i in range(nodes)]
