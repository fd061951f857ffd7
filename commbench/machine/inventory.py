"""What one machine offers collectives: CPU cores and NUMA nodes, network interfaces and their
speeds (from /sys), and GPUs with their links (NVML): NVLink links up per GPU, P2P capability
and the PCIe path between every pair, and each GPU's NUMA node. `commbench topo` prints it and
every run records it (run.json "machine", per host).

Without NVML or a GPU the GPU part is empty and says why; the rest is read from the kernel.
"""

from __future__ import annotations

import platform
from pathlib import Path

from commbench.machine.facts import facts

SYS_NET = Path("/sys/class/net")
SYS_NODES = Path("/sys/devices/system/node")


def cpus() -> dict:
    nodes = sorted(p.name for p in SYS_NODES.glob("node[0-9]*")) if SYS_NODES.exists() else []
    found = facts()
    return {"cores": found.cpus, "numa_nodes": len(nodes) or 1, "machine": platform.machine(),
            "cpu_model": found.cpu_model, "llc_bytes": found.llc_bytes}


def nics() -> list[dict]:
    """Interfaces that are up, with link speed (Mbit/s, when the driver reports one) and MTU."""
    out = []
    for dev in sorted(SYS_NET.glob("*")) if SYS_NET.exists() else []:
        state = _read(dev / "operstate")
        if dev.name == "lo" or state not in ("up", "unknown"):
            continue
        speed = _read(dev / "speed")
        out.append({"name": dev.name, "speed_mbps": int(speed) if speed and speed.lstrip("-").isdigit()
                    and int(speed) > 0 else None, "mtu": int(_read(dev / "mtu") or 0) or None,
                    "numa_node": _int_or_none(_read(dev / "device" / "numa_node"))})
    return out


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _int_or_none(text):
    try:
        value = int(text)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


# NVML's answers for the path between two GPUs (nvmlGpuTopologyLevel_t), nearest first
PATHS = {0: "same board", 10: "one PCIe switch", 20: "several PCIe switches", 30: "PCIe host bridge",
         40: "same CPU (NUMA node)", 50: "across CPUs (SMP interconnect)"}
# the P2P capabilities asked of every pair (nvmlGpuP2PCapsIndex_t values, from nvml.h: not
# pynvml's constants, since nvidia-ml-py 13 defines NVML_P2P_CAPS_INDEX_READ as the tuple (0,))
P2P_CAPS = {"p2p_read": 0, "p2p_nvlink": 2}


def gpus() -> tuple[list[dict], list[dict], str | None]:
    """(GPUs, pairs, reason): every GPU NVML lists and every pair's P2P capability and path;
    reason says why there are none."""
    try:
        import pynvml as nvml

        nvml.nvmlInit()
    except ImportError:
        return [], [], "nvidia-ml-py is not installed (pip install 'commbench[cuda]')"
    except Exception as exc:  # noqa: BLE001 - no driver, no GPU: all the same to the user
        return [], [], f"NVML is not usable: {exc}"
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        if not handles:
            return [], [], "NVML sees no GPU"
        devices = [_gpu(nvml, i, h) for i, h in enumerate(handles)]
        pairs = [_pair(nvml, i, j, handles) for i in range(len(handles)) for j in range(i + 1, len(handles))]
        return devices, pairs, None
    finally:
        nvml.nvmlShutdown()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _gpu(nvml, index, h) -> dict:
    links = 0
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            links += int(nvml.nvmlDeviceGetNvLinkState(h, link) == nvml.NVML_FEATURE_ENABLED)
        except nvml.NVMLError:
            break
    info = {"index": index, "name": _text(nvml.nvmlDeviceGetName(h)), "uuid": _text(nvml.nvmlDeviceGetUUID(h)),
            "memory_gib": round(nvml.nvmlDeviceGetMemoryInfo(h).total / 2**30, 1), "nvlinks_up": links}
    pci = nvml.nvmlDeviceGetPciInfo(h)
    info["pci_bus_id"] = _text(pci.busId)
    info["numa_node"] = _int_or_none(_read(Path("/sys/bus/pci/devices") / info["pci_bus_id"].lower()[-12:] / "numa_node"))
    return info


def _pair(nvml, i, j, handles) -> dict:
    a, b = handles[i], handles[j]
    out = {"gpus": [i, j]}
    try:
        out["path"] = PATHS.get(int(nvml.nvmlDeviceGetTopologyCommonAncestor(a, b)), "unknown")
    except nvml.NVMLError as exc:
        out["path"] = f"unknown ({exc})"
    for name, index in P2P_CAPS.items():
        try:
            out[name] = nvml.nvmlDeviceGetP2PStatus(a, b, index) == nvml.NVML_P2P_STATUS_OK
        except nvml.NVMLError:
            out[name] = None
    return out


def describe() -> dict:
    devices, pairs, reason = gpus()
    return {"hostname": platform.node(), "cpu": cpus(), "nics": nics(), "gpus": devices, "gpu_pairs": pairs,
            "gpus_unavailable": reason}
