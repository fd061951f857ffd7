"""The machine's floors: what two of its cores can physically do (floor.cc, a native probe built
like the kernels' host build), measured once per machine and cached, so that every point can be
read against them (`commbench floor` prints them; run.json's `floors`, per host; the rows'
efficiency columns):

* handoff_us: a one-way flag hand-off between two cores (a release, then the peer's acquire);
* exchange_us: the smallest 2-rank exchange-and-add of 8 bytes (each side's value and its sequence
  number in one line): what an 8-byte all-reduce between two ranks cannot beat;
* copy_GBps: one core's copy rate (64 MiB, more than the caches hold: the better of memcpy and a copy
  streamed past the caches as the kernels stream), GB/s of bytes copied.

The copy rate is the best of several batches; the hand-off and the exchange wait three ways (a tight
loop, a clock read every 16 or every 64 looks) and keep the best way's median batch (floor.cc). A
floor is the machine at its best: this VM's cores flip between states for seconds to minutes at a
time, every hand-off 4-5x slower in the slow one. The
cache (floors/ beside commbench.kernels.native_build's kernels/ folder, this user's alone) is keyed by host name, CPU model, the two cores
and the probe's source: `commbench floor --fresh` measures again and keeps each figure the cache
holds better (kept_best; `best_since`: the first probe of those kept); deleting the file forgets them.
On a GPU rank, `device_copy_GBps`: the GPU's own device-to-device copy rate.

Efficiency of a point (commbench.metrics.efficiency): the floor's time / the point's time (the
exchange for the smallest point, as a ratio: 1 is the floor) and busbw / the copy rate.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import math
import os
import platform
import socket
import stat
import tempfile
import time
from pathlib import Path

from commbench.machine.facts import facts
from commbench.machine.load import machine_id
from commbench.kernels.native_build import BuildFailed, build, cache_dir, first_line, private

SOURCE = Path(__file__).with_name("floor.cc")
FLAGS = ("-std=c++17", "-O2", "-shared", "-fPIC", "-pthread")
COPY_BYTES = 64 << 20
KEYS = ("handoff_us", "exchange_us", "copy_GBps")
MOST = {"handoff_us": 1e6, "exchange_us": 1e6, "copy_GBps": 1e5}  # beyond these no machine measures (1 s, 100 TB/s)
TEXTS = ("cpu_model", "host", "measured_at", "source")  # (and best_since where probes were kept together)


class FloorUnavailable(Exception):
    """The probe cannot be built or run here; the message is one line."""


@functools.lru_cache(maxsize=None)
def _library() -> ctypes.CDLL:
    from commbench.kernels.host import arch_flags, compiler

    cxx = compiler()
    if cxx is None:
        raise FloorUnavailable("the floor probe needs a C++ compiler (g++, c++ or clang++ on the PATH, or CXX)")
    try:
        flags = FLAGS + arch_flags()
        lib = ctypes.CDLL(str(build("floor", SOURCE.read_text(), ".cc",
                                    lambda src, out: [cxx, *flags, str(src), "-o", str(out)],
                                    [cxx, first_line([cxx, "--version"]), *flags, platform.machine()],
                                    "the floor probe (commbench/kernels/floor.cc)")))
    except BuildFailed as exc:
        raise FloorUnavailable(str(exc)) from None
    for name in ("cb_floor_handoff", "cb_floor_exchange"):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_int], ctypes.c_double
    lib.cb_floor_copy.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_int]
    lib.cb_floor_copy.restype = ctypes.c_double
    lib.cb_floor_exchange_error.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong]
    lib.cb_floor_exchange_error.restype = ctypes.c_double
    return lib


CGROUP = Path("/sys/fs/cgroup")


def cores() -> tuple[int, int]:
    """The two cores the probe pins its threads to: the first two CPUs this process's cgroup allows
    (its cpuset: a Slurm job's, a container's), whatever its own binding (a rank that mpirun bound
    to one core still measures two), or (-1, -1) where it allows one."""
    allowed = _cpu_list()
    return (allowed[0], allowed[1]) if len(allowed) >= 2 else (-1, -1)


def _cgroup_cpuset_files() -> list[Path]:
    """This process's cgroup's cpuset files, its own first (/proc/self/cgroup: v2's "0::/path", v1's
    "N:cpuset:/path"), then the root's."""
    found = []
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, rel = line.split(":", 2)
            if controllers == "":
                found.append(CGROUP / rel.lstrip("/") / "cpuset.cpus.effective")
            elif "cpuset" in controllers.split(","):
                found.append(CGROUP / "cpuset" / rel.lstrip("/") / "cpuset.effective_cpus")
    except (OSError, ValueError):
        pass
    return found + [CGROUP / "cpuset.cpus.effective", CGROUP / "cpuset" / "cpuset.effective_cpus"]


def _cpu_list() -> list[int]:
    for path in _cgroup_cpuset_files():
        try:
            text = path.read_text().strip()
            found: list[int] = []
            for part in filter(None, text.split(",")):
                lo, _, hi = part.partition("-")
                found += range(int(lo), int(hi or lo) + 1)
        except (OSError, ValueError):
            continue
        if found:
            return sorted(found)
    return list(range(facts().cpus))


def cpu_model() -> str:
    return facts().cpu_model


def measure(iters: int = 20000, batches: int = 7) -> dict:
    """The floors of this machine, measured now (about half a second; a second more where its threads
    wait for their cores). FloorUnavailable where a thread cannot be pinned to its core or two cores
    are not to be had."""
    lib = _library()
    a, b = cores()
    if a < 0:
        raise FloorUnavailable("the floor probe needs two cores (this machine shows one)")
    handoff = lib.cb_floor_handoff(a, b, iters, batches)
    exchange = lib.cb_floor_exchange(a, b, iters, batches) if handoff > 0 else handoff
    copy = lib.cb_floor_copy(a, COPY_BYTES, batches)
    if min(handoff, exchange, copy) < 0:
        why = ("its two threads took turns on one core (or other work held both cores for a second)"
               if -2 in (handoff, exchange) else f"its threads could not be pinned to cores {a} and {b}")
        raise FloorUnavailable(f"the floor probe measured nothing: {why}")
    return {"handoff_us": round(handoff * 1e6, 4), "exchange_us": round(exchange * 1e6, 4),
            "copy_GBps": round(copy / 1e9, 2),
            "cores": [a, b], "cpu_model": cpu_model(), "host": socket.gethostname(),
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "source": "probe"}


def cache_path() -> Path:
    key = "\0".join([socket.gethostname(), cpu_model(), repr(cores()), SOURCE.read_text()])
    return cache_dir().parent / "floors" / f"{socket.gethostname()[:64]}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


MAX_CACHE_BYTES = 64 << 10  # a floors file (about 300 B)


def _own(st: os.stat_result, kind) -> bool:
    """A file or folder of this user's that no one else may write to."""
    return kind(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def cached() -> dict | None:
    """This machine's floors from the cache, or None (never measured here, unreadable, or not to be believed:
    a file or folder another user owns or may write to, a link, a file too large: measured again)."""
    path = cache_path()
    try:
        if not _own(os.lstat(path.parent), stat.S_ISDIR):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not _own(st, stat.S_ISREG) or st.st_size > MAX_CACHE_BYTES:
            return None
        data = os.read(fd, MAX_CACHE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        found = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return found if _as_measured(found) else None


def _as_measured(found) -> bool:
    """Whether a cache file's content is what measure() writes: each floor a finite number a machine
    can have, two core numbers, the texts text (a file edited or damaged by hand is measured again)."""
    if not isinstance(found, dict):
        return False
    numbers = all(type(found.get(k)) in (int, float) and math.isfinite(found[k]) and 0 < found[k] < MOST[k]
                  for k in KEYS)
    pair = found.get("cores")
    return (numbers and isinstance(pair, list) and len(pair) == 2 and all(type(c) is int for c in pair)
            and all(isinstance(found.get(k), str) for k in TEXTS) and isinstance(found.get("best_since", ""), str))


def machine_floor(fresh: bool = False) -> dict:
    """This machine's floors: cached, or measured now and cached (fresh: measured now whatever the
    cache holds, each figure kept where the cache's is better: kept_best, whose `slower_now` is said,
    not cached). FloorUnavailable where the probe cannot be built."""
    found = None if fresh else cached()
    if found is None:
        path = cache_path()
        found = kept_best(cached(), measure())
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            private(path.parent)  # this user's alone, as the build cache beside it
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps({k: v for k, v in found.items() if k != "slower_now"}))
            os.replace(tmp, path)
        except (OSError, BuildFailed):  # an unwritable cache, another user's, a folder in the file's place: not kept
            try:
                tmp.unlink()
            except OSError:
                pass
    return found


BETTER = {"handoff_us": min, "exchange_us": min, "copy_GBps": max}


def kept_best(old: dict | None, new: dict) -> dict:
    """A new probe's floors with each figure the cache already holds better kept (a floor is the machine
    at its best, and a probe in the cores' slow state reads 4-5x slower: a run's efficiencies read
    against one came out at 3.6); `best_since`: when the first of the probes kept together measured;
    `slower_now`: the figures this probe read worse, as it read them."""
    if old is None:
        return new
    slower = {k: new[k] for k in KEYS if BETTER[k](old[k], new[k]) != new[k]}
    since = {"best_since": old.get("best_since", old["measured_at"])}
    return new | {k: old[k] for k in slower} | since | ({"slower_now": slower} if slower else {})


def node_floors(comm, device: str = "cpu", wait_s: float = 120.0) -> dict[str, dict | str]:
    """Every host's floors, on every rank (collective): per machine (told apart by the kernel's boot
    id and the /tmp the ranks share: MPI's emulated nodes are hosts of one machine, containers on one
    kernel are machines of their own), its first rank reads the cache or measures
    while the machine's other ranks sleep (not spin: the probe needs their cores) until it is done;
    on a GPU it adds its device's copy rate. host -> floors, or the one-line reason they could not
    be had (the machine's first rank's)."""
    tmp = os.stat(tempfile.gettempdir())  # containers on one kernel: separate machines, as their /tmp are
    machine = f"{machine_id()}:{tmp.st_dev}:{tmp.st_ino}"
    ranks = comm.allgather_object((machine, socket.gethostname(), os.getpid()))
    first_rank = [m for m, _, _ in ranks].index(machine)
    first = first_rank == comm.rank
    have = cached()
    probing = comm.allgather_object(have is None and first)[first_rank]  # the machine's first rank measures
    ended = Path(tempfile.gettempdir()) / f"commbench-floor-{ranks[first_rank][2]}"  # it says when it is done
    mine: dict | str | None = have
    if first and have is None:
        try:
            mine = machine_floor()
        except FloorUnavailable as exc:
            mine = str(exc)
        finally:
            _mark(ended)
    elif probing:  # sleep until the cache holds it, or the measuring rank says it ended without
        deadline = time.monotonic() + wait_s
        while (mine := cached()) is None and not _marked(ended) and time.monotonic() < deadline:
            time.sleep(0.01)
    if first and device == "cuda" and isinstance(mine, dict):
        mine = {**mine, "device_copy_GBps": device_copy_gbps()}
    measured = {ranks[r][0]: f for r, f in enumerate(comm.allgather_object(mine if first else None)) if f is not None}
    if first and _marked(ended):
        ended.unlink()  # (every rank is past its wait: the allgather)
    return {host: measured[m] for m, host, _ in ranks if m in measured}


def _mark(path: Path) -> None:
    """Create the hand-off marker in the shared temporary folder: a new file of this user's, never through
    a link another user planted there (a name taken already: the waiting ranks wait for the cache instead)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except OSError:
        pass


def _marked(path: Path) -> bool:
    """Is the marker there, a regular file of this user's (not anything another user put at its name)?"""
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_uid == os.getuid()


def device_copy_gbps(nbytes: int = 256 << 20, batches: int = 5) -> float | None:
    """The rank's GPU's device-to-device copy rate (GB/s of bytes copied; torch, CUDA events), or
    None where it cannot be measured."""
    try:
        import torch

        src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        best = float("inf")
        for _ in range(batches):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src)
            stop.record()
            stop.synchronize()
            best = min(best, start.elapsed_time(stop) / 1e3)
        del src, dst
        torch.cuda.empty_cache()  # (its cached blocks would stay reserved for the whole run)
        return round(nbytes / best / 1e9, 1)
    except Exception:  # noqa: BLE001 - out of memory, no GPU: the bandwidth efficiency stays empty
        return None


def efficiency(floors: dict | None, time_us: float, busbw_gbps: float, ranks: int, nodes: int, device: str) -> dict:
    """A point's efficiency against its machine's floors: latency_efficiency = the exchange floor's
    time / the point's (1: at the floor), bandwidth_efficiency = busbw / one core's copy rate (on a
    GPU: the device's copy rate). Empty (None) at one rank (nothing crosses between ranks), across
    nodes (the floors are a node's) or where a floor is not known."""
    out = {"latency_efficiency": None, "bandwidth_efficiency": None}
    if not isinstance(floors, dict) or ranks < 2 or nodes > 1 or not time_us or time_us <= 0:
        return out
    copy = floors.get("device_copy_GBps" if device == "cuda" else "copy_GBps")
    if device != "cuda" and floors.get("exchange_us"):
        out["latency_efficiency"] = float(f"{floors['exchange_us'] / time_us:.4g}")
    if copy:
        out["bandwidth_efficiency"] = float(f"{busbw_gbps / copy:.4g}")
    return out
