"""Who may write a folder. One writer per folder: an exclusive lock (flock) on LOCK_NAME inside a
run or sweep folder, held by the process that writes it for the run's life (a resume's, a sweep's
too). A second writer is refused in one line (InputError) before it launches or writes anything. The kernel drops the lock when its
process ends, however it ends (kill -9 included): a stale lock file is never in the way.

The lock file stays in the folder (removing it would let two writers lock two files of one name);
it is opened without following a link (O_NOFOLLOW) and holds the writer's pid and host, for the
refusal's message only. Within one process the lock is counted, not taken twice: a sweep holding
its folder, or a run whose folder object is made twice, do not refuse themselves. A filesystem
without locks (ENOLCK, EOPNOTSUPP: some NFS or Lustre mounts) is written unlocked, as before.

Only into a folder of its own: a new run is written into a folder that does not exist, is empty,
or holds only what a commbench run that measured nothing leaves (`foreign_entry`: a commbench
run.json, the ranks' spec files, the lock, temporary files); anything else (a run.json that is not
commbench's, a samples.csv, a user's notes) makes the folder not a run's, and it is refused before
anything is launched or written. A resume writes only into the files of the run (OWN_FILES) and
refuses any that is a link or not a regular file (`own_files`): a writer follows no link. The
folder given on the command line may itself be a link to a folder (the user's choice, e.g. a
scratch disk); a link inside a folder (a sweep's run folder, a run's file) is never followed.
A sweep's folder (`sweep_folder`) is new, empty, or a sweep's; its runs' folders are runs' folders.
"""

from __future__ import annotations

import errno
import fcntl
import os
import platform
import stat
from pathlib import Path

from commbench.errors import InputError
from commbench.folder.spec_file import SPEC_FILES
from commbench.folder.schema import RESULTS_CSV, RUN_JSON, SAMPLES_CSV, SAMPLES_PARQUET

LOCK_NAME = ".lock"
OWN_FILES = (RUN_JSON, RESULTS_CSV, SAMPLES_CSV, SAMPLES_PARQUET, LOCK_NAME, *SPEC_FILES, "ab.json")
TEMP_PREFIXES = (".run.json.", ".samples.", *(f"{name}." for name in SPEC_FILES), ".commbench-probe-")
MAX_ENTRIES = 10_000  # entries of a folder looked at for the rules below
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)
_held: dict[tuple[int, int], list[int]] = {}  # (device, inode) of a folder -> [fd of its lock file, count]


def _key(folder: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _refusal(folder: Path, fd: int) -> InputError:
    try:
        owner = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
    except OSError:
        owner = []
    who = f" (pid {owner[0]} on {owner[1]})" if len(owner) >= 2 and owner[0].isdigit() else ""
    return InputError(f"{str(folder)!r} is being written by another commbench{who}: one writer per folder (wait "
                      "for it to end)")


def _open(folder: Path, create: bool) -> int | None:
    """The lock file's descriptor (None: there is none and create is False)."""
    path = folder / LOCK_NAME
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    try:
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:
        if create:
            raise
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"{str(folder)!r}: {LOCK_NAME} is a link; a run folder's files are its own") from None
        raise InputError(f"{str(folder)!r}: cannot open its lock file {LOCK_NAME}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{str(folder)!r}: {LOCK_NAME} is not a regular file")
    return fd


def _try_lock(fd: int) -> bool | None:
    """True: locked; False: another process holds it; None: the filesystem has no locks."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno in _NO_LOCKS:
            return None
        raise


def check_free(folder) -> None:
    """Refuse (InputError) a folder another process is writing; writes nothing, creates nothing."""
    folder = Path(folder)
    key = _key(folder)
    if key is None or key in _held:
        return
    fd = _open(folder, create=False)
    if fd is None:
        return
    try:
        if _try_lock(fd) is False:
            raise _refusal(folder, fd)
    finally:
        os.close(fd)  # closing drops the probe's lock


def acquire(folder) -> tuple[int, int]:
    """Lock an existing folder for this process (counted: release once per acquire); returns the
    token release takes. InputError when another process holds it."""
    folder = Path(folder)
    key = _key(folder)
    if key is None:
        raise InputError(f"{str(folder)!r} does not exist")
    if key in _held:
        _held[key][1] += 1
        return key
    for _ in range(3):  # a lock file removed between our open and our lock (a refused run's clean-up): again
        fd = _open(folder, create=True)
        try:
            got = _try_lock(fd)
            if got is False:
                raise _refusal(folder, fd)
        except BaseException:
            os.close(fd)
            raise
        if not got or _same_file(fd, folder / LOCK_NAME):
            break
        os.close(fd)
    else:
        raise InputError(f"{str(folder)!r}: its lock file {LOCK_NAME} keeps being removed; one writer per folder")
    if got:
        try:  # who holds it, for a refusal's message (a full disk only loses the message)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {platform.node()}\n".encode(), 0)
        except OSError:
            pass
    _held[key] = [fd, 1]
    return key


def _same_file(fd: int, path: Path) -> bool:
    """Is the locked descriptor still the file at path (not one removed since it was opened)?"""
    try:
        st, held = os.lstat(path), os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)


def release(key: tuple[int, int] | None) -> None:
    """Undo one acquire (key: what it returned); the last one unlocks (the lock file stays)."""
    entry = _held.get(key) if key else None
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] <= 0:
        del _held[key]
        os.close(entry[0])


def holds(folder) -> bool:
    """Does this process hold folder's lock?"""
    key = _key(Path(folder))
    return key is not None and key in _held


def own_files(folder) -> None:
    """Every file of the run that exists in folder is a regular file, not a link (InputError)."""
    folder = Path(folder)
    for name in OWN_FILES:
        try:
            st = os.lstat(folder / name)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise InputError(f"{folder}: {name}: {exc.strerror or exc}") from None
        if stat.S_ISLNK(st.st_mode):
            raise InputError(f"{folder}: {name} is not a regular file of the folder but a link (to "
                             f"{os.readlink(folder / name)!r}): a writer follows no link out of its folder")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{folder}: {name} is not a regular file of the folder")


def _lock_file(path: Path) -> bool:
    """Is path a lock file commbench wrote (empty, or "pid host")?"""
    try:
        with open(path, "rb") as f:
            text = f.read(300)
    except OSError:
        return False
    parts = text.split()
    return not text or len(text) < 300 and len(parts) == 2 and parts[0].isdigit()


def foreign_entry(folder, is_commbench_run_json) -> str | None:
    """The first entry of an existing folder that a new run there would not own (None: none):
    anything but the lock, the ranks' spec files, temporary files and a run.json commbench wrote
    (is_commbench_run_json(folder)) of a run that measured nothing; each of them a regular file."""
    folder = Path(folder)
    try:
        with os.scandir(folder) as entries:
            for count, entry in enumerate(entries):
                if count >= MAX_ENTRIES:
                    return f"more than {MAX_ENTRIES} entries"
                name = entry.name
                regular = entry.is_file(follow_symlinks=False)
                if not regular:
                    return name
                if name == LOCK_NAME and not _lock_file(folder / name):
                    return name
                if name in (LOCK_NAME, *SPEC_FILES) or name.startswith(TEMP_PREFIXES):
                    continue
                if name == RUN_JSON and is_commbench_run_json(folder):
                    continue
                return name
    except OSError as exc:
        raise InputError(f"{str(folder)!r} cannot be read: {exc.strerror or exc}") from None
    return None


SUITE_YAML = "suite.yaml"  # a sweep folder's copy of its suite


def sweep_folder(out: Path, labels: set[str], resume: bool) -> None:
    """A sweep writes only into a folder of its own: a new one, an empty one, or one holding a sweep
    (its suite.yaml, a regular file: on --resume anything else may lie beside it); else nothing but
    the lock, suite.yaml and folders named by the suite's runs (labels; each then checked as a
    run's). Not a sweep folder another process writes. Nothing written (InputError)."""
    if not out.is_dir():
        return
    check_free(out)
    copy = out / SUITE_YAML
    if copy.is_symlink() or os.path.lexists(copy) and not copy.is_file():
        raise InputError(f"{str(out)!r}: {SUITE_YAML} is not a regular file of the folder (a sweep writes through "
                         "no link)")
    if resume and copy.exists():
        return
    with os.scandir(out) as entries:
        for count, entry in enumerate(entries):
            name = entry.name
            if count >= MAX_ENTRIES or not (name in (LOCK_NAME, SUITE_YAML) or name.startswith(".commbench-probe-")
                                            or name in labels and entry.is_dir(follow_symlinks=False)):
                raise InputError(f"--out {str(out)!r} is not empty and holds no sweep (it holds {name!r}): a sweep "
                                 "is written only into a new or empty folder, or one holding a sweep (--resume)")
