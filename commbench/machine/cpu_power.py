"""CPU packages' and DRAM's energy per point, from RAPL (`--power`, next to the GPUs' NVML).

Two sources, tried in order:
  powercap  /sys/class/powercap (or $COMMBENCH_POWERCAP_ROOT): the intel-rapl zones (Intel, and AMD
            since Zen), each a `name` and an `energy_uj` counter in µJ that wraps at
            `max_energy_range_uj`. Domains read: the top-level zones named package-N, and every zone
            or subzone named dram (memory is outside the package); core and uncore lie inside their
            package, psys contains the packages, intel-rapl-mmio repeats intel-rapl: none is read.
            Since Linux 5.10 `energy_uj` is readable by root only.
  perf      perf's `power` PMU ($COMMBENCH_PERF_POWER_ROOT, default /sys/bus/event_source/devices/
            power): events energy-pkg and energy-ram, opened with perf_event_open on one CPU of each
            package (its cpumask), counts times the event's scale in joules; allowed where
            /proc/sys/kernel/perf_event_paranoid permits system-wide events (or CAP_PERFMON).
One rank per node reads its node's counters (they measure the whole machine, not a rank); the
others read nothing. A window's reading is the energy each domain used over it (wrap-around
handled: at most one wrap, the counters' ranges last minutes at full power), summed over the domains
and, in the row, over the nodes; per domain, summed over nodes of the same name. Where no source can
be read the run says why in one line and the CPU columns stay empty: never a made-up figure.
"""

from __future__ import annotations

import ctypes
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

POWERCAP_ENV = "COMMBENCH_POWERCAP_ROOT"
PERF_ENV = "COMMBENCH_PERF_POWER_ROOT"
POWERCAP_ROOT = "/sys/class/powercap"
PERF_ROOT = "/sys/bus/event_source/devices/power"
PERF_EVENTS = {"energy-pkg": "package", "energy-ram": "dram"}
_ZONE = re.compile(r"^intel-rapl:(\d+)(?::(\d+))?$")


@dataclass
class CpuReading:
    energy_j: float  # over the window, every domain this rank reads
    seconds: float
    domains: dict[str, float] = field(default_factory=dict)  # domain name -> joules over the window

    @property
    def power_w(self) -> float:
        return self.energy_j / self.seconds if self.seconds > 0 else float("nan")


class Unreadable(Exception):
    """No counter can be read here; the message says why, in one line."""


def _read_int(path: Path) -> int:
    text = path.read_text().strip()
    if not text.isdigit():
        raise ValueError(f"{path} holds {text[:40]!r}, not a count")
    return int(text)


class Powercap:
    """The RAPL zones of one powercap tree: name -> (energy_uj file, counter range)."""

    source = "powercap"

    def __init__(self, root: Path):
        if not root.is_dir():
            raise Unreadable(f"no {root} (a VM usually shows no RAPL counters)")
        zones = sorted(((m, root / name) for name in os.listdir(root) if (m := _ZONE.match(name))),
                       key=lambda zone: zone[1].name)
        self.domains: dict[str, tuple[Path, int]] = {}
        for m, zone in zones:
            try:
                name = (zone / "name").read_text().strip()
            except OSError:
                continue
            top = m.group(2) is None
            if not (top and re.fullmatch(r"package-\d+", name)) and name != "dram":
                continue
            if name == "dram":  # one per package: dram-<package>
                name = f"dram-{m.group(1)}"
            try:
                self.domains[name] = (zone / "energy_uj", _read_int(zone / "max_energy_range_uj"))
            except (OSError, ValueError) as exc:
                raise Unreadable(f"{zone}: {exc}") from None
        if not any(name.startswith("package-") for name in self.domains):
            raise Unreadable(f"{root} has no intel-rapl package zone")
        try:
            self.read()
        except PermissionError:
            first = next(iter(self.domains.values()))[0]
            raise Unreadable(f"{first} is readable by root only (Linux 5.10 and later): run as root, or let this "
                             "user read the zones' energy_uj") from None
        except (OSError, ValueError) as exc:
            raise Unreadable(f"cannot read RAPL's counters ({exc})") from None

    def read(self) -> dict[str, int]:
        """Every domain's counter, in µJ."""
        return {name: _read_int(path) for name, (path, _) in self.domains.items()}

    def joules(self, before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
        """Energy per domain between two reads: a counter that went down wrapped once at its range."""
        out = {}
        for name, (_, span) in self.domains.items():
            delta = after[name] - before[name]
            out[name] = (delta if delta >= 0 else delta + span + 1) / 1e6
        return out

    def close(self) -> None:
        pass


class _PerfEventAttr(ctypes.Structure):
    # the first fields of struct perf_event_attr (linux/perf_event.h); `size` says how many the kernel reads
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
                ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
                ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64), ("wakeup_events", ctypes.c_uint32),
                ("bp_type", ctypes.c_uint32), ("config1", ctypes.c_uint64)]


PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}  # the syscall's number


def perf_events(root: Path) -> dict[str, tuple[int, int, float]]:
    """The power PMU's events commbench reads: event name -> (PMU type, config, joules per count),
    from sysfs (type; events/<name> as "event=0x02"; events/<name>.scale)."""
    if not (root / "type").exists():
        raise Unreadable(f"no perf power PMU ({root})")
    kind = _read_int(root / "type")
    out = {}
    for event in PERF_EVENTS:
        spec = root / "events" / event
        if not spec.exists():
            continue
        m = re.fullmatch(r"event=(0x[0-9a-fA-F]+|\d+)", spec.read_text().strip())
        if not m:
            raise Unreadable(f"{spec} holds {spec.read_text().strip()[:40]!r}, not event=N")
        scale = float((root / "events" / f"{event}.scale").read_text().strip())
        out[event] = (kind, int(m.group(1), 0), scale)
    if "energy-pkg" not in out:
        raise Unreadable(f"{root} has no energy-pkg event")
    return out


def cpu_list(text: str) -> list[int]:
    """"0,8-9" -> [0, 8, 9] (sysfs cpumask lists)."""
    out = []
    for part in filter(None, text.strip().split(",")):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


class Perf:
    """RAPL through perf_event_open: one counter per event and package (one CPU of each)."""

    source = "perf"

    def __init__(self, root: Path):
        events = perf_events(root)
        cpus = cpu_list((root / "cpumask").read_text()) if (root / "cpumask").exists() else [0]
        number = PERF_EVENT_OPEN.get(os.uname().machine)
        if number is None:
            raise Unreadable(f"perf_event_open's number on {os.uname().machine} is not known here")
        libc = ctypes.CDLL(None, use_errno=True)
        self.fds: dict[str, tuple[int, float]] = {}
        try:
            for event, (kind, config, scale) in events.items():
                for package, cpu in enumerate(cpus):
                    attr = _PerfEventAttr(type=kind, size=ctypes.sizeof(_PerfEventAttr), config=config)
                    fd = libc.syscall(number, ctypes.byref(attr), -1, cpu, -1, 0)
                    if fd < 0:
                        err = ctypes.get_errno()
                        raise Unreadable(f"perf_event_open({event} on CPU {cpu}): {os.strerror(err)} "
                                         "(/proc/sys/kernel/perf_event_paranoid must be 0 or less, or CAP_PERFMON)")
                    self.fds[f"{PERF_EVENTS[event]}-{package}"] = (fd, scale)
        except Unreadable:
            self.close()
            raise
        self.domains = dict.fromkeys(self.fds)

    def read(self) -> dict[str, int]:
        return {name: int.from_bytes(os.pread(fd, 8, 0), "little") for name, (fd, _) in self.fds.items()}

    def joules(self, before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
        return {name: (after[name] - before[name]) * scale for name, (_, scale) in self.fds.items()}

    def close(self) -> None:
        for fd, _ in self.fds.values():
            os.close(fd)
        self.fds = {}


def open_source():
    """The first source that reads here (Powercap, then Perf); Unreadable with both reasons otherwise."""
    reasons = []
    for make, env, default in ((Powercap, POWERCAP_ENV, POWERCAP_ROOT), (Perf, PERF_ENV, PERF_ROOT)):
        try:
            return make(Path(os.environ.get(env) or default))
        except Unreadable as exc:
            reasons.append(f"{make.source}: {exc}")
        except OSError as exc:
            reasons.append(f"{make.source}: {exc.strerror or exc}")
    raise Unreadable("; ".join(reasons))


class CpuMeter:
    """The energy of this node's CPU packages and DRAM over a window."""

    def __init__(self, source):
        self.source = source
        self.domains = list(source.domains)

    def start(self) -> None:
        self._t0, self._e0 = time.perf_counter(), self.source.read()

    def stop(self) -> CpuReading:
        after, seconds = self.source.read(), time.perf_counter() - self._t0
        by_domain = self.source.joules(self._e0, after)
        return CpuReading(sum(by_domain.values()), seconds, by_domain)


class NullCpuMeter:
    """Stands in on ranks whose node another rank measures."""

    domains: list = []

    def start(self) -> None:
        pass

    def stop(self) -> CpuReading:
        return CpuReading(0.0, 0.0)


def open_meter(comm, hostname: str):
    """(meter, source name, domains, None) on every rank when the node owner of every node can read its
    counters (a NullCpuMeter on the other ranks), else (None, None, [], reason) on every rank. Collective."""
    hosts = comm.allgather_object(hostname)
    owner = hosts.index(hostname) == comm.rank
    meter, reason = None, None
    if owner:
        try:
            meter = CpuMeter(open_source())
        except Unreadable as exc:
            reason = str(exc)
    answers = comm.allgather_object((reason, meter.source.source if meter else None, meter.domains if meter else []))
    reasons = [r for r, _, _ in answers if r]
    if reasons:
        if meter is not None:
            meter.source.close()
        return None, None, [], reasons[0]
    source = next(s for _, s, _ in answers if s)
    domains = sorted({d for _, _, ds in answers for d in ds})
    return (meter or NullCpuMeter()), source, domains, None
