"""The processes of a command the acceptance suite runs (tests/hostile_contract.py), read from /proc:
its tree (its session and every descendant) with their memory, the processes tagged with a case's
variable (they may have left the session), and a kill of them all."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

TAG_ENV = "COMMBENCH_HOSTILE_TAG"  # a case's processes carry it in their environment


def procs() -> dict[int, tuple[int, int, int, str]]:
    """Every process: pid -> (ppid, session, rss bytes, name)."""
    out, page = {}, os.sysconf("SC_PAGE_SIZE")
    for entry in (e for e in os.scandir("/proc") if e.name.isdigit()):
        try:
            data = Path(f"/proc/{entry.name}/stat").read_bytes()
        except OSError:
            continue
        close = data.rfind(b")")
        fields = data[close + 2:].split()
        out[int(entry.name)] = (int(fields[1]), int(fields[3]), int(fields[21]) * page,
                                data[data.find(b"(") + 1:close].decode(errors="replace"))
    return out


def tree(root: int) -> dict[int, tuple[int, str]]:
    """The command's processes: its session (it leads one) and every descendant; pid -> (rss, name)."""
    found = procs()
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_rest) in found.items():
        children.setdefault(ppid, []).append(pid)
    members = {pid for pid, (_p, sid, _r, _n) in found.items() if sid == root}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in found:
            members.add(pid)
        todo += children.get(pid, [])
    return {pid: (found[pid][2], found[pid][3]) for pid in members if pid in found}


def tagged(tag: str) -> dict[int, str]:
    """Processes whose environment carries this case's tag (they may have left the session)."""
    hits, needle = {}, f"{TAG_ENV}={tag}".encode()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in Path(f"/proc/{entry.name}/environ").read_bytes().split(b"\0"):
                    hits[int(entry.name)] = Path(f"/proc/{entry.name}/comm").read_text().strip()
            except OSError:
                continue
    return hits


def kill_all(pids) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
