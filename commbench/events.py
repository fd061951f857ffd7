"""The one-way channel from rank 0 to the parent: one JSON object per line on stdout, marked
with a prefix so that anything else the ranks or the launcher print passes through untouched."""

from __future__ import annotations

import json
import sys

PREFIX = "@@commbench "
SAMPLES_PER_EVENT = 256  # samples a "samples" or "ranks" event carries at most (each line under 4 KB)


def emit_stdout(kind: str, **data) -> None:
    sys.stdout.write(PREFIX + json.dumps({"event": kind, **data}, default=str) + "\n")
    sys.stdout.flush()


def parse(line: str) -> dict | None:
    """The event on this line, or None for an ordinary line."""
    pos = line.find(PREFIX)
    if pos < 0:
        return None
    try:
        event = json.loads(line[pos + len(PREFIX):])
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and isinstance(event.get("event"), str) else None  # else: no event
