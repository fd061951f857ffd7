"""NCCL's own choice of algorithm and protocol per point (`--nccl-tuning`), read from its log.

NCCL exposes the choice only in its debug log: with NCCL_DEBUG=INFO and the TUNING subsystem,
rank 0 of a communicator writes one line per collective call (NCCL 2.19 and later):

    host:pid:tid [dev] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..31}

Rank 0's log goes to a file of its own (NCCL_DEBUG_FILE; NCCL writes it line-buffered). Before
each point the lines so far are dropped; after it, the point's lines give its choice: the
(algorithm, protocol) pairs of its collective, most frequent first ("RING/LL128"). The bytes
NCCL prints are one rank's count: the whole buffer for all-reduce (the barrier and host-side
reductions between timed loops are all-reduces too, of 4 to 24 bytes: all-reduce lines count
only at the point's size). The file is emptied after each read, so it holds one point at most;
NCCL's warnings, which go to the same file, are passed on to stderr as they are read.

The log line costs rank 0 a formatted write per call, so the timings of a run with
--nccl-tuning include it: small sizes time a little slower than without.
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter

from commbench.collectives import COLLECTIVES

_LINE = re.compile(r"NCCL INFO (\w+): (\d+) Bytes -> Algo (\S+) proto (\S+)")
CONTROL_FUNCTION = "AllReduce"  # what barriers and host-side reductions run as (lines of a few bytes)


def rank0_env(env: dict, path: str) -> dict:
    """The variables that make NCCL log its TUNING choices to `path`, on top of the user's own
    NCCL_DEBUG (kept when it says more, TRACE) and NCCL_DEBUG_SUBSYS (TUNING added to it)."""
    level = env.get("NCCL_DEBUG", "").upper()
    subsys = env.get("NCCL_DEBUG_SUBSYS", "")
    names = [s for s in subsys.lstrip("^").split(",") if s]
    if subsys.startswith("^"):  # every subsystem but those listed
        kept = [s for s in names if s.upper() != "TUNING"]
        subsys = "^" + ",".join(kept) if kept else "ALL"
    elif not any(s.upper() in ("TUNING", "ALL") for s in names):
        subsys = ",".join(names + ["TUNING"])
    return {"NCCL_DEBUG": "TRACE" if level == "TRACE" else "INFO", "NCCL_DEBUG_SUBSYS": subsys,
            "NCCL_DEBUG_FILE": path}


def parse(line: str) -> tuple[str, int, str, str] | None:
    """(function, bytes, algorithm, protocol) of a TUNING line, else None."""
    m = _LINE.search(line)
    return (m.group(1), int(m.group(2)), m.group(3), m.group(4)) if m else None


def choice(lines, collective: str, size_bytes: int) -> str:
    """The point's (algorithm/protocol) pairs, most frequent first, ", "-joined; "" if none
    (also for a collective NCCL logs under no name of its own: Collective.nccl_function)."""
    function = COLLECTIVES[collective].nccl_function
    seen: Counter = Counter()
    for line in lines:
        entry = parse(line)
        if entry is None or entry[0] != function or (function == CONTROL_FUNCTION and entry[1] != size_bytes):
            continue
        seen[f"{entry[2]}/{entry[3]}"] += 1
    return ", ".join(pair for pair, _ in seen.most_common())


class TuningLog:
    """Rank 0's NCCL log file, read point by point."""

    def __init__(self, path: str):
        self.path = path
        self._offset = 0

    def read(self) -> list[str]:
        """The lines written since the last read; the file is emptied behind them. NCCL keeps
        writing at its own offset, so the file turns sparse: its length grows, not its blocks."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:  # NCCL has logged nothing yet
            return []
        self._offset += len(data)
        os.truncate(self.path, 0)
        lines = data.replace(b"\0", b"").decode(errors="replace").splitlines()
        for line in lines:  # NCCL's warnings go to this file too: pass them on
            if " NCCL WARN " in line:
                print(line, file=sys.stderr, flush=True)
        return lines

    def close(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
