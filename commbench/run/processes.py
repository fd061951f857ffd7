"""Is a process, or a process group, still there? Signal 0 asks without touching it. And a process's children."""

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


def children(pid: int) -> tuple[int, int] | None:
    """(living, exited) child processes of the process now: an exited one is a zombie its parent has not
    reaped (a rank its launcher has not waited for). Linux's /proc/PID/task/*/children; None where that
    cannot be read (another system, the process gone)."""
    try:
        found = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += f.read().split()
    except OSError:
        return None
    living = sum(_running(child) for child in found)
    return living, len(found) - living


def _running(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False  # gone since it was listed
