"""Background load per point: the cores' worth of CPU time that anything but the job's own ranks
took on the ranks' machines while the point was measured (`background_cores`), and the flags
that make a row say it is not to be trusted (`unreliable`).

A machine's busy time comes from /proc/stat (user, nice, system, irq, softirq and steal: a VM's
neighbours count too), read by one rank per machine (machines told apart by the kernel's boot id,
so emulated nodes sharing one kernel are one machine); every rank's own CPU time (all its
threads: process_time) and the reader's ancestors' (the launcher's daemon, the launcher,
commbench's parent) are taken off, and a row keeps the busiest machine's figure. The window is the
point's whole measurement (warm-up, timed samples, check), read without extra barriers, or where
that is shorter than MIN_WINDOW_S, the window back to the start of an earlier point that makes it
long enough: /proc/stat counts in ticks (10 ms), so a quarter of a second reads to about +-0.1 cores.

A point is flagged (commbench.machine.load.reasons) when
  * the machine was busy: at least BUSY_CORES of other work and, with the job's ranks, more work
    than the machine has cores (the ranks then wait for a core: a 1 KB all-reduce took 8000 µs
    beside a busy process where it takes 0.3 µs), or
  * the samples do not pin the median down: its 95 % interval (sign test) is wider than SPREAD of
    it, or too few samples bound it.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from commbench.machine.facts import facts

BUSY_CORES = 0.25  # other work, in cores, that can flag a point (a spinning process beside 2 spinning ranks on 2 cores reads 0.5)
MIN_WINDOW_S = 0.25  # the shortest window read (shorter points are read with the points before them)
ANCHORS = 32  # point starts kept to reach back that far
SPREAD = 0.2  # the median's 95 % interval wider than this share of it flags the point
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def machine_id() -> str:
    """The running kernel's boot id (ranks on one kernel share /proc/stat), else the host name."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return os.uname().nodename


def busy_seconds() -> float | None:
    """CPU seconds the whole machine has been busy since boot; None where /proc/stat is unreadable."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields + [0] * (8 - len(fields))
    return (user + nice + system + irq + softirq + steal) * _TICK_S


def machinery_seconds(levels: int = 4) -> float:
    """CPU seconds of this process's ancestors, up to `levels` of them (the launcher's daemon, the
    launcher, commbench's parent process): the job's own machinery, which is no other work."""
    total, pid = 0.0, os.getppid()
    for _ in range(levels):
        if pid <= 1:
            break
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid ... utime stime
        except (OSError, IndexError):
            break
        total += (int(fields[11]) + int(fields[12])) * _TICK_S
        pid = int(fields[1])
    return total


@dataclass
class LoadMeter:
    """One rank's readings; `reader`: this rank reads its machine's /proc/stat (and its ancestors'
    CPU time), `machine`: its machine's index of `machines`. ranks, cores: the job's most ranks on
    one machine, and the fewest cores of a machine (what crowds first). The starts of the last
    ANCHORS points are kept: a point shorter than MIN_WINDOW_S is read over the shortest window back
    to one of them that is long enough (the load around it)."""
    reader: bool
    ranks: int
    cores: int
    machine: int = 0
    machines: int = 1
    starts: deque = field(default_factory=lambda: deque(maxlen=ANCHORS))

    def oversubscribed(self) -> str:
        """The run's warning where the machines' ranks outnumber their cores."""
        return (f"oversubscribed: {self.ranks} ranks on a machine of {self.cores} cores take turns on them, so the "
                "times include waiting for a core (fewer ranks, or more machines, measure the collective alone)")

    def _now(self) -> tuple[float, float, float]:
        if not self.reader:
            return 0.0, time.process_time(), time.monotonic()
        busy = busy_seconds()
        return (float("nan") if busy is None else busy), time.process_time() + machinery_seconds(), time.monotonic()

    def start(self) -> None:
        self.starts.appendleft(self._now())

    def stop(self) -> list[float]:
        """machines x ANCHORS x [machine busy s (readers; NaN if unreadable), own CPU s, window s
        (readers)], zero but at this rank's machine: per kept start, newest first (the oldest repeated)."""
        busy, own, wall = self._now()
        starts = list(self.starts) + [self.starts[-1]] * (ANCHORS - len(self.starts))
        out = np.zeros((self.machines, ANCHORS, 3))
        out[self.machine] = [[busy - b, own - o, (wall - w) if self.reader else 0.0] for b, o, w in starts]
        return out.reshape(-1).tolist()


def open_meter(comm) -> LoadMeter:
    """Every rank's meter; the lowest rank on each machine reads its /proc/stat. Collective."""
    seen = comm.allgather_object((machine_id(), facts().cpus))
    ids = [m for m, _ in seen]
    machines = list(dict.fromkeys(ids))
    mine = ids[comm.rank]
    meter = LoadMeter(ids.index(mine) == comm.rank, max(ids.count(m) for m in machines), min(c for _, c in seen),
                      machines.index(mine), len(machines))
    meter.start()  # the first points reach back to here
    return meter


def background(comm, readings: list[float]) -> tuple[float | None, float]:
    """(cores of other work on the busiest machine, its window in s) from every rank's `stop()`,
    each machine read over its newest window of at least MIN_WINDOW_S (else the longest kept); None
    where /proc/stat is unreadable on every machine. Collective."""
    total = np.asarray(comm.reduce_host(np.array(readings, dtype=np.float64), "sum")).reshape(-1, ANCHORS, 3)
    found = []
    for windows in total:
        long_enough = [k for k in range(ANCHORS) if windows[k, 2] >= MIN_WINDOW_S]
        busy, own, wall = windows[long_enough[0] if long_enough else ANCHORS - 1]
        if busy == busy and wall > 0:  # not NaN: readable
            found.append((round(max(0.0, (busy - own) / wall), 2), wall))
    if not found:
        return None, 0.0
    return max(found)


def median_interval(samples: np.ndarray) -> tuple[float, float] | None:
    """The sign test's 95 % interval for the median (order statistics x_(k) .. x_(n-k+1), k the
    largest with P(Binomial(n, 1/2) <= k - 1) <= 2.5 %; a normal approximation above 200 samples),
    or None when too few samples bound it (fewer than 5). At 5 samples (the fewest a point takes
    without --iters) it is their whole range, which holds the median 93.8 % of the time."""
    n = len(samples)
    if n == 5:
        return float(np.min(samples)), float(np.max(samples))
    if n > 200:
        k = int(math.floor(n / 2 - 0.98 * math.sqrt(n)))
    else:
        k, below = 0, 0
        while True:  # below: P(Binomial(n, 1/2) <= k) * 2**n
            below += math.comb(n, k)
            if below * 40 > 2 ** n:
                break
            k += 1
    if k < 1:
        return None
    s = np.sort(samples)
    return float(s[k - 1]), float(s[n - k])


def reasons(meter: LoadMeter, background_cores: float | None, samples_us: np.ndarray) -> str:
    """Why a row is not to be trusted ("; "-joined), or "" when nothing says so."""
    out = []
    if (background_cores is not None and background_cores >= BUSY_CORES
            and meter.ranks + background_cores > meter.cores):
        out.append(f"busy machine: {background_cores:g} cores of other work beside {meter.ranks} ranks "
                   f"on {meter.cores} cores")
    median = float(np.median(samples_us)) if len(samples_us) else 0.0
    bounds = median_interval(samples_us)
    if bounds is None:
        out.append(f"{len(samples_us)} samples cannot bound the median (5 or more can)")
    elif median > 0 and (bounds[1] - bounds[0]) / median > SPREAD:
        out.append(f"uncertain median: 95 % interval {bounds[0]:.3g}..{bounds[1]:.3g} us")
    return "; ".join(out)
