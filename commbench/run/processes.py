"""Is a process, or a process group, still there? Signal 0 asks without touching it."""

from __future__ import annotations

import os


def _probe(kill, ident: int) -> bool:
    try:
        kill(ident, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:  # there, but someone else's
        return True


def alive(pid: int) -> bool:
    return _probe(os.kill, pid)


def group_alive(pgid: int) -> bool:
    return _probe(os.killpg, pgid)
