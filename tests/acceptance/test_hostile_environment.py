"""Hostile inputs, class 17 (issue 67's environment): variables and process state a user's shell may
hand commbench. A home that is empty, relative or another user's, cache variables that are relative
paths, a temporary folder that is missing or a file, a strict umask (000: class 14), a closed or full
standard output, a launcher variable that breaks MPI, a limit that is not a number: each one runs or
is refused in one line, and none puts the cache under the current folder or loads what another user
left (the contract: tests/hostile_contract.py, whose check of the scratch folder finds anything written
under the current folder; besides it, where the cache went)."""

import json
import os
from pathlib import Path

import pytest

from hostile_contract import Outcome, case, meets_contract
from hostile_fixtures import copy, no_marker, params
from other_user import OTHER, own, planted_cache, shared_tmp, skip_unless_root
from commbench.errors import BAD_INPUT, FAILED, OK
from commbench.folder.schema import RUN_JSON

RUN = "run -n 2 --backend mpi -c all_reduce --sizes 8 --iters 5 --warmup 1 --out R"
NO_CACHE_VARIABLES = {"COMMBENCH_CACHE": None, "XDG_CACHE_HOME": None, "TMPDIR": "{S}/tmp"}
TEMPORARY_CACHE = f"tmp/commbench-cache-{os.getuid()}"  # where the cache goes with no usable home


def cache_at(rel: str):
    """A check: the build cache was made at scratch/rel, this user's folder, 0700."""
    def check(s: Path, out: Outcome) -> list[str]:
        p = s / rel / "kernels"
        if not p.is_dir():
            return [f"no cache at {rel}"]
        st = os.lstat(s / rel)
        return [] if st.st_uid == os.getuid() and not st.st_mode & 0o077 else [f"{rel} is {oct(st.st_mode)}"]
    return check


def status_says(words: str):
    def check(s: Path, out: Outcome) -> list[str]:
        doc = json.loads((s / "R" / RUN_JSON).read_text())
        return [] if words in str(doc.get("error")) else [f"run.json's error does not say {words!r}: {doc.get('error')!r}"]
    return check


def mk(name, *steps, env, argv=RUN, expect=(OK,), outputs=("R", "tmp"), checks=(), note="", umask=None, stdout=""):
    return case(17, name, argv, shared_tmp(), *steps, expect=expect, outputs=outputs, env=env,
                checks=(no_marker, *checks), note=note, umask=umask, stdout=stdout)


CASES = [
    mk("home-empty", env=NO_CACHE_VARIABLES | {"HOME": ""}, checks=(cache_at(TEMPORARY_CACHE),),
       note="Python reads an empty HOME as '/': root's cache went to /.cache"),
    mk("home-relative", env=NO_CACHE_VARIABLES | {"HOME": "."}, checks=(cache_at(TEMPORARY_CACHE),),
       note="a relative home would put the cache under the current folder"),
    mk("xdg-cache-home-relative", env=NO_CACHE_VARIABLES | {"XDG_CACHE_HOME": "cache"},
       checks=(cache_at(TEMPORARY_CACHE),)),
    mk("commbench-cache-relative", env=NO_CACHE_VARIABLES | {"COMMBENCH_CACHE": "cache"},
       checks=(cache_at(TEMPORARY_CACHE),)),
    mk("home-of-another-user", *planted_cache("home/.cache/commbench"), lambda s: own(s / "home", OTHER),
       env=NO_CACHE_VARIABLES | {"HOME": "{S}/home"},
       note="a home (sudo -E, a shared account) whose cache another user owns: nothing of it loaded"),
    mk("umask-077", env=NO_CACHE_VARIABLES | {"COMMBENCH_CACHE": "{S}/tmp/c"}, umask=0o077,
       checks=(cache_at("tmp/c"),), note="the ranks read what the parent wrote: still theirs"),
    mk("tmpdir-missing", env={"TMPDIR": "{S}/nope"}, expect=(BAD_INPUT,), outputs=(),
       note="refused up front: Open MPI made the folder, under whatever name it was given"),
    mk("tmpdir-a-file", lambda s: (s / "file").write_text("x"), env={"TMPDIR": "{S}/file"}, expect=(BAD_INPUT,),
       outputs=(), note="refused up front: it failed in PMIx's mkdir, exit 1"),
    mk("stdout-closed", env={}, stdout="closed", expect=(BAD_INPUT,), outputs=(),
       note="refused before any work: no results folder"),
    mk("stdout-full", env={}, stdout="full", expect=(BAD_INPUT,), outputs=("R",),
       checks=(status_says("standard output could not be written"),),
       note="what was measured is kept; run.json says why it stopped"),
    mk("mpi-component-that-does-not-exist", env={"OMPI_MCA_btl": "nosuch"}, expect=(FAILED,), outputs=("R",),
       note="a launcher variable that breaks MPI_Init: the job fails at start-up, named, in seconds"),
    mk("limit-not-a-number", copy("SYN"), env={"COMMBENCH_MAX_SAMPLES": "lots"}, argv="report SYN -o r.html",
       expect=(BAD_INPUT,), outputs=()),
]


@pytest.mark.parametrize("c", params(CASES, launching=True))
def test_hostile_environment_launching(c, tmp_path, job):
    skip_unless_root(c, {"home-of-another-user"})
    meets_contract(c, tmp_path)


@pytest.mark.parametrize("c", params(CASES, launching=False))
def test_hostile_environment(c, tmp_path):
    meets_contract(c, tmp_path)
