"""Finding run folders and opening their files, for the one reader (commbench.folder.load) and
every other reader of a folder's files: nothing is parsed before its size is known to be within
commbench.folder.limits (run_dirs' survey; each reader for its own file), no link is followed out
of a folder, and only regular files are opened (regular_file). Problems are one InputError each,
"<folder>: <problem>"."""

from __future__ import annotations

import csv
from collections import Counter
import errno
import os
import stat
from pathlib import Path

from commbench.folder import limits
from commbench.errors import InputError
from commbench.folder.schema import RESULTS_CSV, SAMPLES_CSV, SAMPLES_PARQUET


def run_dirs(path: str | Path) -> list[Path]:
    """A run folder, or every run folder below a folder (a sweep), found without following a link
    (a link to a folder inside the path is left to the folder itself; one to outside, or a loop, is
    refused) and within the limits (commbench.folder.limits): folder depth, folders walked, run
    folders, and what their files hold (survey), all before a file is parsed."""
    p = Path(path)
    if not p.exists():
        if os.path.lexists(p):
            raise InputError(f"{str(p)!r} is a link that leads nowhere (a loop, or a missing target)")
        raise InputError(f"{str(p)!r} does not exist")
    if not p.is_dir():
        raise InputError(f"{str(p)!r} is not a folder (give a run folder, or a sweep holding runs)")
    found = [p] if os.path.lexists(p / RESULTS_CSV) else _walk(p)
    if not found:
        raise InputError(f"{str(p)!r} holds no results.csv")
    survey(str(p), found)
    return found


def _walk(top: Path) -> list[Path]:
    """The folders below top that hold a results.csv, sorted; no link followed."""
    root, found, todo, walked = os.path.realpath(top), [], [(top, 0)], 0
    depth, folders, runs = limits.DEPTH.value(), limits.FOLDERS.value(), limits.RUNS.value()
    while todo:
        d, level = todo.pop()
        walked += 1
        if walked > folders:
            raise limits.FOLDERS.refusal(str(top))
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except FileNotFoundError:
            if d == top:
                raise InputError(f"{str(d)!r} does not exist (it went while it was read)") from None
            continue  # a folder below that went while the walk was on its way (another program's)
        except OSError as exc:
            raise InputError(f"{str(d)!r}: {exc.strerror or exc}") from None
        for entry in entries:
            if entry.name == RESULTS_CSV and d != top:
                found.append(Path(d))
                if len(found) > runs:
                    raise limits.RUNS.refusal(str(top))
            if entry.is_symlink():
                _link(Path(entry.path), root)
            elif entry.is_dir(follow_symlinks=False):
                if level + 1 > depth:
                    raise limits.DEPTH.refusal(f"{str(top)!r} ({entry.path[:80]!r}...)")
                todo.append((Path(entry.path), level + 1))
    return sorted(found)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _link(link: Path, root: str) -> None:
    """A link met while walking: to a folder inside root, left (the folder is read where it is); to
    outside, or a loop, refused; to nothing or to a file, left."""
    try:
        target = os.stat(link)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"{str(link)!r} is a link loop") from None
        return  # leads nowhere
    if stat.S_ISDIR(target.st_mode) and not _inside(os.path.realpath(link), root):
        raise InputError(f"{str(link)!r} links to a folder outside {root!r}: readers follow no link out of a folder "
                         "(give that folder itself)")


def _count_lines(path: Path, limit: limits.Limit, subject: str) -> int:
    """Line ends in a file, read in 1 MiB pieces, refused as soon as they pass the limit."""
    lines, most = 0, limit.value() + 1  # + 1: the header
    with open(path, "rb") as f:
        while block := f.read(limits.MIB):
            lines += block.count(b"\n")
            if lines > most:
                raise limit.refusal(subject, lines - 1)
    return lines


PARQUET_FOOTER_MAX = 16 << 20  # a samples file's metadata is kilobytes


def parquet_rows(d: Path, name: str) -> tuple[int, int]:
    """(rows, columns) of a Parquet file from its metadata alone (a footer larger than
    PARQUET_FOOTER_MAX is refused before it is read)."""
    import importlib

    pq = read_file(d, name, lambda: importlib.import_module("pyarrow.parquet"))  # not installed: unreadable
    path = d / name
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() < 12:
            raise InputError(f"{d}: unreadable {name} (too short for Parquet)")
        f.seek(-8, os.SEEK_END)
        tail = f.read(8)
    if tail[4:] != b"PAR1" or int.from_bytes(tail[:4], "little") > PARQUET_FOOTER_MAX:
        raise InputError(f"{d}: unreadable {name} (no Parquet footer, or one over {PARQUET_FOOTER_MAX >> 20} MiB)")
    meta = read_file(d, name, lambda: pq.read_metadata(path))
    return meta.num_rows, meta.num_columns


def survey(subject: str, folders: list[Path]) -> None:
    """Every limit on what the folders' files hold, checked before one is parsed: each file a regular
    file inside its folder and within FILE_BYTES; together within READ_BYTES, ROWS and SAMPLES
    (a Parquet file's rows from its metadata, a CSV file's by counting line ends)."""
    total, rows, samples = 0, 0, 0
    for d in folders:
        for name in (RESULTS_CSV, SAMPLES_CSV, SAMPLES_PARQUET):
            if not os.path.lexists(d / name):
                continue
            total += file_size(d, name)
            limits.READ_BYTES.check(subject, total)
            if name == SAMPLES_PARQUET:
                samples += parquet_rows(d, name)[0]
            else:
                count = max(_count_lines(d / name, limits.ROWS if name == RESULTS_CSV else limits.SAMPLES,
                                         f"{d}: {name}") - 1, 0)
                rows, samples = (rows + count, samples) if name == RESULTS_CSV else (rows, samples + count)
            limits.ROWS.check(subject, rows)
            limits.SAMPLES.check(subject, samples)


def file_size(d: Path, name: str, limit: limits.Limit = limits.FILE_BYTES) -> int:
    """The size of a file of the folder: a regular file inside it (regular_file), within the limit."""
    return limit.check(f"{d}: {name}", regular_file(d, name).st_size)


def regular_file(d: Path, name: str, inside: bool = True) -> os.stat_result:
    """A file a reader opens must be a regular file (not a folder, a FIFO or a device, which block or
    never end) and, in a result folder (inside), not a link to outside the folder. Its stat. A file
    named on the command line (not inside) is refused as "cannot read '<path>': ..."."""
    p = Path(d) / name
    where = f"{d}: {name}" if inside else f"cannot read {str(p)!r}"
    try:
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            if inside and not _inside(os.path.realpath(p), os.path.realpath(d)):
                raise InputError(f"{d}: {name} links to outside the folder (readers follow no link out of a folder)")
            st = os.stat(p)
    except OSError as exc:  # a loop, a dangling link, no permission
        raise InputError(f"{where}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{d}: {name} is not a regular file" if inside else
                         f"{where}: not a regular file (a FIFO, device or folder is not read)")
    return st


def read_bytes(d: Path, name: str, limit: limits.Limit = limits.FILE_BYTES) -> bytes:
    """A file of the folder, whole: a regular file inside it, its size within the limit before it is read."""
    size = file_size(d, name, limit)
    with open(d / name, "rb") as f:
        return read_file(d, name, lambda: f.read(size + 1))[:size]


def read_named(path: str | Path, most: int, what: str, larger: str) -> bytes:
    """A file the user names (a model, a suite or workload, a trace), whole: a regular file (a FIFO or a
    device would block or never end) read within `most` bytes. It is opened without blocking and then
    checked, so a file swapped for a FIFO meanwhile is refused too. One InputError otherwise: "cannot read
    <what> '<path>': <why>", or "<what> '<path>' is larger than <larger>"."""
    where = f"{what} {str(path)!r}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise InputError(f"cannot read {where}: not a regular file (a FIFO, device or folder is not read)")
        with open(fd, "rb") as f:
            data = f.read(most + 1)
    except OSError as exc:
        raise InputError(f"cannot read {where}: {exc.strerror or exc}") from None
    if len(data) > most:
        raise InputError(f"{where} is larger than {larger}")
    return data


def header_names(d: Path, name: str, data: bytes) -> list[str]:
    """The names of a CSV file's header (its first line), at most COLUMNS of them, in linear time."""
    first = data.split(b"\n", 1)[0]
    limits.COLUMNS.check(f"{d}: {name}", first.count(b",") + 1)
    return read_file(d, name, lambda: next(csv.reader([first.decode("utf-8")]), []))


# what the parsers (csv, json, pandas, pyarrow) raise about their input; pyarrow's own errors as well, whatever
# builtin they subclass (a corrupt Parquet file raises ArrowTypeError, ArrowNotImplementedError, ...)
DATA_ERRORS = (OSError, ValueError, UnicodeError, csv.Error, RecursionError, OverflowError, MemoryError, EOFError,
               ImportError, Warning)  # a warning made an error (frames.read_csv: pandas' ParserWarning of a row too long)


def data_error(exc: BaseException) -> bool:
    """Is exc a parser's verdict on its input (the file is unusable), not a bug of the code reading it?"""
    return isinstance(exc, DATA_ERRORS) or type(exc).__module__.split(".")[0] == "pyarrow"


def read_file(d: Path, name: str, reader):
    """reader(), its failures as the file's: one InputError "<d>: unreadable <name> (...)" where the parser
    refused the data; any other exception is left to rise (commbench's own bug)."""
    try:
        return reader()
    except InputError:
        raise
    except FileNotFoundError as exc:
        raise InputError(f"{d}: {exc}".splitlines()[0]) from None
    except Exception as exc:  # noqa: BLE001 - sorted below: the file's fault, or commbench's
        if not data_error(exc):
            raise  # a bug of commbench's own reader: exit 3 with its traceback, never blamed on the user's file
        raise InputError(f"{d}: unreadable {name} ({type(exc).__name__}: {exc})".splitlines()[0]) from None


class DuplicateKey(ValueError):
    """A JSON object gives one key twice."""


def unique_keys(pairs: list) -> dict:
    """json.loads' object_pairs_hook for files commbench reads: an object whose every key is given once (a
    second value under a key would silently replace the first); a ValueError naming the key otherwise."""
    out = dict(pairs)
    if len(out) != len(pairs):
        twice = next(k for k, n in Counter(k for k, _ in pairs).items() if n > 1)
        raise DuplicateKey(f"key {twice[:40]!r} given twice in one object")
    return out
