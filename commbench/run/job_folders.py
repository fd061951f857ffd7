"""The private folders of the jobs this process starts on this machine: the local launch's torch stores and
Open MPI's shared-memory files, each this user's alone (0700) and removed at exit (commbench.run.launch);
and whether $TMPDIR, where the launcher and the ranks keep their own, can take them."""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import tempfile

from commbench.run import processes
from commbench.runinfo import SHM_ROOT, SM_PREFIX


@functools.lru_cache(maxsize=None)
def sm_folder() -> str | None:
    """This process's folder in /dev/shm for the shared-memory files of the Open MPI jobs it starts on this
    machine: Open MPI names them by a 16-bit hash of the job, and a job killed leaves its files, so among
    thousands of launches (the test tiers, a long ab) a new job met a dead one's file of its name and crashed
    in btl/sm (SIGSEGV at start-up). This user's alone (0700), removed at exit; a SIGKILLed process's is removed
    by the next one (its pid gone). None where /dev/shm cannot take one: Open MPI's default then."""
    root = SHM_ROOT
    try:
        for name in os.listdir(root):
            m = re.fullmatch(re.escape(SM_PREFIX) + r"(\d+)-\w+", name)
            path = os.path.join(root, name)
            if m and not processes.alive(int(m.group(1))) and os.lstat(path).st_uid == os.getuid():
                shutil.rmtree(path, ignore_errors=True)
        folder = tempfile.mkdtemp(prefix=f"{SM_PREFIX}{os.getpid()}-", dir=root)
    except OSError:
        return None
    atexit.register(shutil.rmtree, folder, True)
    return folder


@functools.lru_cache(maxsize=None)
def _store_folder() -> str:
    """This process's folder for the local launches' stores: this user's alone (0700), removed at exit."""
    folder = tempfile.mkdtemp(prefix="commbench-store-")
    atexit.register(shutil.rmtree, folder, True)
    return folder


def local_store() -> str:
    """A new file for torch's FileStore, one per launch, in this process's private folder: the ranks of one
    machine meet through it, so nothing of a local run listens on the network (issue 67, M7)."""
    fd, path = tempfile.mkstemp(prefix="store-", dir=_store_folder())
    os.close(fd)
    os.unlink(path)  # the name is this launch's; FileStore makes the file (and removes it when all ranks are done)
    return path


def unusable_tmpdir() -> str | None:
    """Why $TMPDIR cannot hold the files of ranks started here (Open MPI's session folder, the ranks'
    hand-offs), or None: a missing one was made by mpirun under whatever name it was given, a file
    failed deep in PMIx. Checked only for ranks on this machine: a job's TMPDIR on other nodes (Slurm's
    per-job folder) may not exist where commbench is typed."""
    where = os.environ.get("TMPDIR")
    if not where:
        return None
    if os.path.isdir(where):
        if os.access(where, os.W_OK | os.X_OK):
            return None
        why = "is a folder this user cannot write"
    else:
        why = "is not a folder" if os.path.lexists(where) else "does not exist"
    return (f"TMPDIR={where!r} {why}: the launcher and the ranks keep their files there; point it to a folder "
            "this user can write, or unset it")
