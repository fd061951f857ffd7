"""Shared libraries built from source at first use and cached, for the C loops a rank calls
through ctypes: the host build of cuda/collectives.cu (kernel_host) and the MPI timing loop
(mpi_loop). One build per source text, compiler and flags, in $COMMBENCH_CACHE (default
~/.cache/commbench); one rank compiles under a file lock, the others wait and load its build.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Sequence


class BuildFailed(Exception):
    """The library cannot be built here; the message is one line for the user."""


def cache_dir() -> Path:
    """$COMMBENCH_CACHE, else $XDG_CACHE_HOME/commbench, else ~/.cache/commbench; where none of them is an
    absolute path (no HOME, a uid without a passwd entry: "~" stays "~"; HOME set empty, which Python
    would read as "/"), this user's own folder in the temporary folder, never one under the current folder."""
    home = os.path.expanduser("~") if os.environ.get("HOME", "~") else ""
    root = os.environ.get("COMMBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), "commbench")
    if not os.path.isabs(root):
        root = os.path.join(tempfile.gettempdir(), f"commbench-cache-{os.getuid()}")
    return Path(root) / "kernels"


def private(folder: Path) -> None:
    """Make the folder (and the cache's folder above it) this user's alone: made 0700; one of this user's
    that others may write to is made 0700; one of another user's is refused (a library loaded from it
    would run whatever they put there)."""
    for level in (folder.parent, folder):
        try:
            level.mkdir(mode=0o700, parents=True)
        except OSError:  # a folder, or a link (a dangling one too) or file in its place, judged below (some
            if not os.path.lexists(level):  # mounts refuse a folder that exists with EACCES or EROFS)
                raise
        found = os.lstat(level)
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
            raise BuildFailed(f"the build cache {level} is not this user's folder: remove it, or set COMMBENCH_CACHE")
        if found.st_mode & 0o022:
            os.chmod(level, 0o700)


def _checked(lib: Path) -> Path:
    """The library, if it is a regular file of this user's that only this user can write; else BuildFailed."""
    found = os.lstat(lib)
    if not stat.S_ISREG(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o022:
        raise BuildFailed(f"{lib} is not a library this user built (another owner, a link, or writable by "
                          "others): remove it, or set COMMBENCH_CACHE")
    return lib


def first_line(program: Sequence[str]) -> str:
    """The first line a program prints when it succeeds (a compiler's version, a wrapper's command
    line), or ''."""
    try:
        out = subprocess.run(list(program), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return "" if out.returncode else (out.stdout.strip() or out.stderr.strip()).split("\n")[0]


def build(stem: str, text: str, suffix: str, command: Callable[[Path, Path], list[str]], key: Sequence[str],
          what: str) -> Path:
    """The cached library built from `text`: `command(source, output)` is the compiler command line,
    `key` everything besides the text that changes the build (compiler, its version, flags);
    `what` names the build in messages ("the host build of cuda/collectives.cu")."""
    digest = hashlib.sha256("\0".join([text, *key]).encode()).hexdigest()[:20]
    folder = cache_dir()
    lib = folder / f"{stem}-{digest}.so"
    try:
        private(folder)
        lock = os.open(folder / f"{stem}-{digest}.lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not os.path.lexists(lib):
                _compile(text, suffix, lib, command, what)
            return _checked(lib)
        finally:
            os.close(lock)
    except OSError as exc:
        raise BuildFailed(f"{what} cannot be written to {folder}: {exc.strerror or exc}") from None


def _compile(text: str, suffix: str, lib: Path, command, what: str) -> None:
    with tempfile.TemporaryDirectory(dir=lib.parent) as tmp:
        src, out = Path(tmp) / f"source{suffix}", Path(tmp) / lib.name
        src.write_text(text)
        argv = command(src, out)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BuildFailed(f"{what} failed ({Path(argv[0]).name}: {exc})") from None
        if proc.returncode or not out.exists():
            message = proc.stderr + proc.stdout
            first = next((ln for ln in message.splitlines() if "error" in ln.lower()), message.strip()[:200])
            raise BuildFailed(f"{what} failed ({Path(argv[0]).name} exited {proc.returncode}"
                              f"{': ' + first.strip() if first.strip() else ', printing nothing'})")
        os.chmod(out, 0o755)  # whatever the umask: only this user writes it
        os.replace(out, lib)
