"""Hostile inputs, class 14 (issue 67's shared paths): another user's files where commbench caches its
built libraries or hands files off (its build cache, the shared temporary folder). Nothing they
planted is loaded, believed or followed: a run goes on without it (the C timing loop refused, in one
warning, the Python loop timing the points) and never runs their code; what commbench makes there is
this user's alone whatever the umask (the contract: tests/hostile_contract.py; besides it, no planted
library loaded, and the shared temporary folder left with only private folders of ours in it)."""

import os
import stat
from pathlib import Path

import pytest

from hostile_contract import Outcome, case, meets_contract
from hostile_fixtures import no_marker, params
from other_user import OTHER, planted_cache, private_places, shared_tmp, skip_unless_root
from commbench.errors import OK

RUN = "run -n 2 --backend mpi -c all_reduce --sizes 8 --iters 5 --warmup 1 --out R"
# the cache under scratch, the shared temporary folder under scratch too, no home to fall back on
CACHE_ENV = {"COMMBENCH_CACHE": "{S}/cache", "XDG_CACHE_HOME": None, "TMPDIR": "{S}/tmp"}
NO_HOME_ENV = {"COMMBENCH_CACHE": None, "XDG_CACHE_HOME": None, "HOME": "", "TMPDIR": "{S}/tmp"}
NO_HOME_CACHE = f"tmp/commbench-cache-{os.getuid()}"  # where a run with no home caches (a predictable name)
REFUSED = "is not a library this user built"


def warned(words: str):
    """A check: the run said, on stderr, why it did without the cache (a refusal is never silent)."""
    def check(s: Path, out: Outcome) -> list[str]:
        said = (out.stdout + out.stderr).decode(errors="replace")
        return [] if words in said else [f"no warning saying {words!r}"]
    return check


def private_cache(rel: str):
    """A check: the cache's folders are this user's, 0700, its libraries writable by this user only."""
    def check(s: Path, out: Outcome) -> list[str]:
        problems, root = [], s / rel
        for p in (root, *root.rglob("*")):
            st = os.lstat(p)
            if st.st_uid != os.getuid():
                problems.append(f"{p.relative_to(s)} belongs to uid {st.st_uid}")
            elif stat.S_ISDIR(st.st_mode) and st.st_mode & 0o077:
                problems.append(f"{p.relative_to(s)} is a folder of mode {oct(st.st_mode & 0o777)}, not 0700")
            elif stat.S_ISREG(st.st_mode) and st.st_mode & 0o022:
                problems.append(f"{p.relative_to(s)} is writable by others ({oct(st.st_mode & 0o777)})")
        return problems or ([] if (root / "kernels").is_dir() else [f"no cache was made in {rel}"])
    return check


def folders_private(rel: str):
    """A check: the cache's folders are 0700 again (what another user left in them is theirs)."""
    def check(s: Path, out: Outcome) -> list[str]:
        return [f"{p.relative_to(s)} is still {oct(p.stat().st_mode & 0o777)}" for p in (s / rel, s / rel / "kernels")
                if p.stat().st_mode & 0o077]
    return check


def dangling_link(rel: str, target: str):
    """Another user's link at scratch/rel to scratch/target, which does not exist yet."""
    def step(s: Path):
        (s / rel).symlink_to(s / target)
        os.lchown(s / rel, OTHER, OTHER)
    return step


def nothing_at(rel: str):
    def check(s: Path, out: Outcome) -> list[str]:
        return [f"{rel} was created through another user's link"] if os.path.lexists(s / rel) else []
    return check


def mk(name, *steps, env=CACHE_ENV, checks=(), note="", umask=None):
    return case(14, name, RUN, shared_tmp(), *steps, expect=(OK,), outputs=("R", "cache", "tmp"), env=env,
                checks=(no_marker, private_places(), *checks), note=note, umask=umask)


CASES = [
    mk("control-a-new-cache", checks=(private_cache("cache"),),
       note="control: a cache made now is private, and the run uses it"),
    mk("new-cache-under-umask-000", umask=0, checks=(private_cache("cache"),),
       note="umask 000: the folders are still 0700, the libraries 0755"),
    mk("cache-folder-of-another-user", *planted_cache("cache"), checks=(warned("is not this user's folder"),)),
    mk("library-of-another-user-in-own-cache", *planted_cache("cache", folder_owner=os.getuid()),
       checks=(warned(REFUSED),)),
    mk("library-writable-by-others", *planted_cache("cache", owner=os.getuid(), mode=0o666),
       checks=(warned(REFUSED),), note="this user's library, but anyone could have written it"),
    mk("library-a-link-to-another-users-file", *planted_cache("cache", folder_owner=os.getuid(), link=True),
       checks=(warned(REFUSED),)),
    mk("own-cache-folder-writable-by-others", *planted_cache("cache", folder_owner=os.getuid()),
       lambda s: [os.chmod(p, 0o777) for p in (s / "cache", s / "cache" / "kernels")],
       checks=(warned(REFUSED), folders_private("cache")),
       note="another user put a library in this user's open folder: refused, and the folder made 0700 again"),
    mk("no-home-cache-name-taken-by-another-user", *planted_cache(NO_HOME_CACHE), env=NO_HOME_ENV,
       checks=(warned("is not this user's folder"),),
       note="no HOME: the cache is commbench-cache-<uid> in the temporary folder, a name another user can take"),
    mk("no-home-cache-name-a-link", *planted_cache("elsewhere"), dangling_link(NO_HOME_CACHE, "elsewhere"),
       env=NO_HOME_ENV, checks=(warned("is not this user's folder"),),
       note="another user's link to their folder of libraries, named as the ones a run loads"),
    mk("no-home-cache-name-a-dangling-link", dangling_link(NO_HOME_CACHE, "victim"), env=NO_HOME_ENV,
       checks=(nothing_at("victim"), warned("is not this user's folder")),
       note="root must not create the folder another user's link names"),
]


AS_ANOTHER_USER = {"cache-folder-of-another-user", "library-of-another-user-in-own-cache",
                   "library-a-link-to-another-users-file", "own-cache-folder-writable-by-others",
                   "no-home-cache-name-taken-by-another-user", "no-home-cache-name-a-link",
                   "no-home-cache-name-a-dangling-link"}


@pytest.mark.parametrize("c", params(CASES, launching=True))
def test_shared_places(c, tmp_path, job):
    skip_unless_root(c, AS_ANOTHER_USER)
    meets_contract(c, tmp_path)
