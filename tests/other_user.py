"""Another user of this machine, for the acceptance suite's shared-machine classes (issue 67): what
they own (files chowned to nobody's uid, as root), what they plant (a library whose constructor writes
{S}/PWNED when it is loaded; Python modules named like commbench's dependencies that write it when
imported) and what they run (a process under `setpriv` as nobody: idle connections to a local server).
The cases that need root to act as another user say so by skipping where the tests do not run as root."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from hostile_contract import SAFE_PATH, Outcome, Step

OTHER = 65534  # nobody
MARKER = "PWNED"
LIBRARY_C = """#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen("%s", "a");
    if (f) { fputs("a planted library was loaded\\n", f); fclose(f); }
}
"""
# every module a rank or the parent imports from outside the standard library, commbench itself, and the
# two site hooks Python looks for on the import path
DEPENDENCIES = ("numpy", "torch", "mpi4py", "yaml", "pandas", "pyarrow", "scipy", "rich", "typer", "psutil",
                "commbench", "sitecustomize", "usercustomize")
MODULE = "open({marker!r}, 'a').write('{name} was imported from a planted file\\n')\nraise ImportError('planted')\n"


def skip_unless_root(c, cases: set) -> None:
    """Skip case c, one of `cases` (those that act as another user: chown, setpriv), where the tests do not
    run as root."""
    if c.name in cases and os.geteuid() != 0:
        pytest.skip("acting as another user (chown, setpriv) needs root")


def own(path: Path, uid: int = OTHER) -> None:
    """Give path (and everything under it, links themselves) to uid."""
    for p in [path, *(path.rglob("*") if path.is_dir() and not path.is_symlink() else ())]:
        os.lchown(p, uid, uid)


def library(so: Path, scratch: Path) -> None:
    """A shared library that writes scratch/PWNED when loaded, at so."""
    src = so.with_name(so.name + ".c")
    src.write_text(LIBRARY_C % (scratch / MARKER))
    subprocess.run([shutil.which("cc") or "gcc", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    src.unlink()


def built_cache(rel: str) -> Step:
    """The build cache a real rank makes (the C timing loop, built by mpicc into scratch/rel), as a step."""
    def step(s: Path):
        subprocess.run([sys.executable, *SAFE_PATH, "-c", "from commbench.kernels import mpi_loop; mpi_loop.library()"],
                       env=os.environ | {"COMMBENCH_CACHE": str(s / rel)}, check=True, cwd=s, capture_output=True)
    return step


def planted_cache(rel: str, *, owner: int = OTHER, folder_owner: int | None = None, mode: int | None = None,
                  link: bool = False) -> tuple[Step, ...]:
    """A build cache at scratch/rel with every library a real build put there replaced by a planted
    one: owned by `owner`, with `mode` if given, or (link) a link to one in another user's folder;
    the folders owned by `folder_owner` (default: as the libraries)."""
    def plant(s: Path):
        kernels = s / rel / "kernels"
        libraries = sorted(kernels.glob("*.so"))
        assert libraries, f"no library was built in {kernels}"
        for so in libraries:
            so.unlink()
            if link:
                target = s / "elsewhere" / so.name
                target.parent.mkdir(exist_ok=True)
                library(target, s)
                own(target.parent, OTHER)
                so.symlink_to(target)
            else:
                library(so, s)
                if mode is not None:
                    os.chmod(so, mode)
            os.lchown(so, owner, owner)
        for folder in (s / rel, kernels, *(p for p in (s / rel).rglob("*") if p.is_dir())):
            os.lchown(folder, folder_owner if folder_owner is not None else owner, -1)
    return built_cache(rel), plant


def planted_modules(rel: str = ".") -> Step:
    """A module or package named like each of DEPENDENCIES in scratch/rel, each writing PWNED when imported."""
    def step(s: Path):
        folder = s / rel
        folder.mkdir(parents=True, exist_ok=True)
        for name in DEPENDENCIES:
            text = MODULE.format(marker=str(s / MARKER), name=name)
            if name in ("commbench", "mpi4py"):  # packages: a folder with an __init__.py
                (folder / name).mkdir(exist_ok=True)
                (folder / name / "__init__.py").write_text(text)
            else:
                (folder / f"{name}.py").write_text(text)
    return step


def shared_tmp(rel: str = "tmp") -> Step:
    """A temporary folder every user may write to (1777, as /tmp), for TMPDIR={S}/rel."""
    def step(s: Path):
        (s / rel).mkdir(exist_ok=True)
        os.chmod(s / rel, 0o1777)
    return step


def private_places(rel: str = "tmp") -> Callable:
    """A check: everything commbench left in the shared temporary folder scratch/rel is a folder of
    this user's that no one else can enter (what another user planted there is theirs, and left alone)."""
    def check(s: Path, out: Outcome) -> list[str]:
        problems = []
        for entry in (s / rel).iterdir() if (s / rel).is_dir() else ():
            st = os.lstat(entry)
            if st.st_uid == OTHER:
                continue
            if not entry.is_dir() or entry.is_symlink() or st.st_mode & 0o077:
                problems.append(f"{entry.name} in the shared temporary folder is {oct(st.st_mode)}, "
                                "not a private folder")
        return problems
    return check


def stranger(script: str) -> subprocess.Popen:
    """A Python script run as nobody (setpriv; the system's Python, which nobody can run where this one
    sits in root's home), or as this user where there is no setpriv."""
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    prefix = ["setpriv", f"--reuid={OTHER}", f"--regid={OTHER}", "--clear-groups"] if shutil.which("setpriv") else []
    return subprocess.Popen([*prefix, python, "-I", "-c", script], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/")
