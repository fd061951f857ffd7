"""Which Python may serve a side of `commbench ab` (--python-a / --python-b): it runs a commbench whose ab
turns speak this one's protocol, imported from its own environment, not from the current folder."""

from __future__ import annotations

import os
import subprocess

from commbench.errors import InputError
from commbench.rank.turns import PROTOCOL
from commbench.run.launch import SAFE_PATH


def check_python(python: str, flag: str, emulated: bool = False) -> dict:
    """What the Python `python` runs ({"commbench": version, "path": where it imports commbench
    from}), once it is shown to serve ab's turns in the protocol this commbench speaks, with its
    own commbench (not one that the current folder would shadow it with), and on an emulated
    cluster to reach the parent's Unix socket (an older commbench connects by TCP only); an
    InputError naming `flag` otherwise."""
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        raise InputError(f"{flag} {python!r} is not a program (give the python of a virtual environment, "
                         "e.g. base/.venv/bin/python)")
    probe = ("import sys, commbench, commbench.rank.turns as t; "
             "print(t.PROTOCOL, commbench.__version__, sys.flags.safe_path if hasattr(sys.flags, 'safe_path') else 0); "
             "print(commbench.__file__); import commbench.runinfo as r; "
             "print(getattr(r, 'git_revision', lambda: None)() or '-')"
             + ("; print(int(hasattr(t, 'connect')))" if emulated else ""))
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, **SAFE_PATH))
    except (OSError, subprocess.SubprocessError) as exc:
        raise InputError(f"{flag} {python!r} cannot be run ({exc})") from None
    lines = out.stdout.splitlines()
    words = lines[0].split() if lines else []
    if out.returncode != 0 or len(words) != 3 or not words[0].isdigit() or len(lines) != 3 + emulated:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise InputError(f"{flag} {python!r} cannot serve commbench ab's turns ({last[:200]}): install commbench "
                         "with ab (this version or newer) into it")
    if int(words[0]) != PROTOCOL:
        raise InputError(f"{flag} {python!r} runs commbench {words[1]}, whose ab turns speak protocol {words[0]}, "
                         f"not {PROTOCOL}: install the same commbench into both sides")
    if emulated and lines[3] != "1":
        raise InputError(f"{flag} {python!r} runs commbench {words[1]}, whose ranks cannot reach ab on an emulated "
                         "cluster (they connect by TCP, which an emulated node has no route for): install the same "
                         "commbench into both sides")
    where = os.path.dirname(os.path.dirname(os.path.abspath(lines[1])))
    if words[2] == "0" and os.path.abspath(os.getcwd()) == where:  # a Python before 3.11 ignores PYTHONSAFEPATH
        raise InputError(f"{flag} {python!r} would import commbench from the current folder ({where}), not from its "
                         "own environment: run commbench ab from another folder")
    return {"commbench": words[1], "path": lines[1], "git_revision": None if lines[2] == "-" else lines[2]}
