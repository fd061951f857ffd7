"""The watchdog: the parent follows rank 0's events (and every rank's "enter"), enforces the
start-up and per-point timeouts, and turns a failed job into one line that says where it failed
and which rank: a launcher's report of a dead rank (Open MPI, torchrun), a local rank's exit
code, or the ranks that never reached the point in flight."""

from __future__ import annotations

import re
import signal
import time
from collections import deque
from typing import Iterator

from commbench import events
from commbench.errors import JobError
from commbench.run.launch import Job, LauncherHung
from commbench.spec import SweepSpec

STARTUP_TIMEOUT_S = 300.0
KILL_DRAIN_S = 5.0  # after a hung launcher is killed: how long its last lines may take to arrive


def describe_point(point: dict) -> str:
    mode = "in-place" if point.get("in_place") else "out-of-place"
    op = f" {point['op']}" if point.get("op") else ""
    return (f"{point['collective']} {point['algorithm']} on {point['backend']}, {point['dtype']}{op}, "
            f"{mode}, {point['size']} B")


# how launchers report a rank that died: (pattern over the joined output, rank group, signal or code group)
_DEATH_REPORTS = (
    (re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on\s+signal (\d+)"), "signal"),
    (re.compile(r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s+exitcode\s*:\s*(-\d+)"), "negative code"),
    # Open MPI 5's prterun: "... exited with non-zero status ... Process name: [prterun-host-PID@1,RANK] Exit code: N"
    (re.compile(r"exited with non-zero status.{0,200}?Process name:\s*\[[^\]@]*@\d+,(\d+)\]\s*Exit code:\s*(\d+)"),
     "code"),
)
_BOX = re.compile(r"^-{20,}$")  # the rule around an Open MPI / PRRTE help message


def _ranks(ranks) -> str:
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def how_it_ended(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class Monitor:
    """What the parent knows about the job: the point in flight, which ranks entered it, the
    first error a rank reported, and the launcher's recent output (for rank deaths)."""

    def __init__(self):
        self.world: int | None = None
        self.point: dict | None = None
        self.entered: set[int] = set()
        self.error: str | None = None
        self.tail: deque[str] = deque(maxlen=400)

    def observe(self, event: dict) -> None:
        kind = event["event"]
        if kind == "ready":
            self.world = event["world_size"]
        elif kind == "enter":
            if self.point is None or event["point"]["index"] != self.point["index"]:
                self.point, self.entered = event["point"], set()
            self.entered.add(event["rank"])
        elif kind == "error" and self.error is None:
            self.error = f"rank {event.get('rank')}: {event.get('message')}"

    def where(self) -> str:
        return f"in {describe_point(self.point)}" if self.point else "during start-up (before the first point)"

    def stragglers(self) -> str:
        """Which ranks never reached the point in flight."""
        if self.point is None or self.world is None:
            return ""
        missing = set(range(self.world)) - self.entered
        if missing:
            return f"; {_ranks(missing)} never reached it ({_ranks(self.entered) if self.entered else 'no rank'} waited in it)"
        return f"; every rank entered it ({_ranks(self.entered)}), none finished"

    def launcher_message(self) -> str:
        """The first line of the launcher's first help message in its recent output (Open MPI and PRRTE put
        each between rules of dashes), "" where there is none: the one-line cause of a failed start-up."""
        lines = [t.strip() for t in self.tail]
        for i, text in enumerate(lines):
            if _BOX.match(text):
                words = []
                for t in lines[i + 1:]:
                    if _BOX.match(t) or (words and not t):
                        break
                    words += t.split()
                if not words or words[0].upper().startswith("WARNING"):  # (a harmless notice's box: the next one)
                    continue
                said = re.split(r"(?<=\.)\s", " ".join(words), maxsplit=1)[0].rstrip(":")  # its first sentence
                return said if len(said) <= 200 else said[:199] + "…"
        return ""

    def reported_deaths(self) -> dict[int, int]:
        """rank -> exit code (negative: signal) of ranks the launcher's output says died."""
        dead: dict[int, int] = {}
        text = " ".join(self.tail)
        for pattern, kind in _DEATH_REPORTS:
            for m in pattern.finditer(text):
                dead.setdefault(int(m.group(1)), -int(m.group(2)) if kind == "signal" else int(m.group(2)))
        return dead

    def deaths(self, job: Job) -> dict[int, int]:
        """rank -> exit code (negative: signal) of ranks that died, as the launcher reports them."""
        dead = {}
        if len(job.procs) > 1:  # local launcher: one process per rank
            dead = {r: p.returncode for r, p in enumerate(job.procs) if p.returncode not in (None, 0)}
            dead = {r: c for r, c in dead.items() if c < 0} or dead
        for rank, code in self.reported_deaths().items():
            if code < 0 or not self.error:  # (a rank's own error says more than the exit code it then ended with)
                dead.setdefault(rank, code)
        return dead

    def failure(self, job: Job, code: int) -> str:
        dead = self.deaths(job)
        if dead:
            return "; ".join(f"rank {r} {how_it_ended(c)}" for r, c in sorted(dead.items())) + f" {self.where()}"
        if self.error:
            return f"{self.error} ({self.where()})"
        said = self.launcher_message()
        return (f"the launcher exited with code {code} {self.where()}{self.stragglers()}"
                + (f"; its message: {said}" if said else ""))


def iter_events(job: Job, spec: SweepSpec, relay, monitor: Monitor) -> Iterator[dict]:
    """Rank 0's events (and every rank's "enter"), relaying every other line; enforces the
    start-up and per-point timeouts."""
    limit = max(STARTUP_TIMEOUT_S, spec.timeout or 0)  # the one in force, for the message
    deadline = time.monotonic() + limit
    try:
        for line in job.lines(lambda: deadline):
            event = events.parse(line.text) if line.stream == "stdout" else None
            if event is None:
                monitor.tail.append(line.text)
                relay(line)
                continue
            monitor.observe(event)
            if event["event"] == "done":
                job.finished = True  # (ranks that end now are no hung launcher's: Job._launcher_hung)
            limit = spec.point_timeout(monitor.point["size"] if monitor.point else 0)
            deadline = time.monotonic() + limit
            if event["event"] != "enter":
                yield event
    except LauncherHung:
        job.kill()  # (prterun writes what it held back as it ends: its report of the rank, its message)
        for line in job.drain(KILL_DRAIN_S):
            event = events.parse(line.text) if line.stream == "stdout" else None
            if event is None:
                monitor.tail.append(line.text)
                relay(line)
            else:
                monitor.observe(event)  # (a rank's error said as it ended)
        dead = monitor.deaths(job)
        said = monitor.launcher_message()
        ended = (monitor.error or "; ".join(f"rank {r} {how_it_ended(c)}" for r, c in sorted(dead.items()))
                 or "every rank here ended")
        raise JobError(f"{ended} {monitor.where()}, and the launcher did not end the job: it was killed"
                       + (f"; its message: {said}" if said else "")) from None
    except TimeoutError:
        job.kill()
        raise JobError(f"timed out after {limit:g} s {monitor.where()}{monitor.stragglers()}; "
                       "the job was killed") from None
