"""The facts of this machine that change what commbench does or records: its CPUs (all of them, and
those this process may run on), the CPU's model and feature flags, and its last-level cache. Every
module reads them here, so one seam sets them all: `pretend` makes the process see another machine
(tests/conftest.py's --machine runs a whole test tier as a 1-core, a 64-core, a 300 MB-L3 or a 4 MB-L3
machine). Read from Linux (/proc/cpuinfo, /sys/devices/system/cpu) once per process; elsewhere what
Python knows."""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True)
class Facts:
    cpus: int  # logical CPUs of the machine (os.cpu_count)
    usable_cpus: int  # of those, the ones this process may run on (its affinity, a container's limit)
    cpu_model: str
    cpu_flags: frozenset  # as Linux lists them (avx2, ...); empty where unknown
    llc_bytes: int | None  # the largest cache level's size (one socket's L3 on x86), None where unknown


_pretended: Facts | None = None


def facts() -> Facts:
    """This machine's facts (or those `pretend` gave)."""
    return _pretended or _real()


def pretend(fake: Facts | None) -> None:
    """Make this process see another machine's facts (None: its own again)."""
    global _pretended
    _pretended = fake


@functools.lru_cache(maxsize=None)
def _real() -> Facts:
    cpus = os.cpu_count() or 1
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = cpus
    first: dict[str, str] = {}  # the first CPU's "model name" and "flags"
    try:
        for line in CPUINFO.read_text().splitlines():
            key, _, value = line.partition(":")
            first.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    model = first.get("model name") or platform.processor() or platform.machine()
    return Facts(cpus, usable, model, frozenset(first.get("flags", "").split()), _llc_bytes())


def _llc_bytes() -> int | None:
    best = None
    for index in sorted(CACHES.glob("index[0-9]*")) if CACHES.is_dir() else []:
        try:
            level = int((index / "level").read_text())
            text = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
        digits = text[:-1] if scale != 1 else text
        if digits.isdigit() and (best is None or level > best[0]):
            best = (level, int(digits) * scale)
    return None if best is None else best[1]
