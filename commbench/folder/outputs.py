"""Every file or folder a command writes, checked before any work starts (exit 2, one line) and
written whole: `output_file` / `output_folder` up front, `write_text` at the end (a temporary file
renamed into place, so a failed write leaves the old file or none; a device such as /dev/null is
written in place). A command's output is never one of the files it reads."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from commbench.errors import InputError
from commbench.folder.schema import RESULTS_CSV, RUN_JSON, SAMPLES_CSV, SAMPLES_PARQUET

READ_FILES = (RESULTS_CSV, RUN_JSON, SAMPLES_CSV, SAMPLES_PARQUET, "suite.yaml")  # what readers read in a folder


def _strerror(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _probe(folder: Path, what: str, path) -> None:
    """Can a file be created in folder? (Tried, not guessed: root, read-only mounts, /proc.)"""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".commbench-probe-")
    except OSError as exc:
        raise InputError(f"{what} {str(path)!r} cannot be written: {_strerror(exc)}") from None
    os.close(fd)
    os.unlink(tmp)


def _existing_ancestor(p: Path) -> Path:
    for parent in (p, *p.parents):
        if parent.exists() or parent.is_symlink():
            return parent
    return Path(".")


def output_file(path, what: str = "output", inputs=()) -> Path:
    """Check that a file can be written at path: not a folder, its folder exists and takes new
    files, and it is none of the inputs (a file given, or a file the readers read inside a
    folder given). Returns the path."""
    p = Path(path)
    if str(path).strip() == "":
        raise InputError(f"{what}: an empty file name")
    if p.is_dir():
        raise InputError(f"{what} {str(path)!r} is a folder; give a file name")
    parent = p.parent
    if not parent.is_dir():
        raise InputError(f"{what} {str(path)!r}: folder {str(parent)!r} does not exist")
    if p.exists() and not os.access(p, os.W_OK):
        raise InputError(f"{what} {str(path)!r} is not writable")
    if not _special(p):  # a device or a pipe is written in place (write_text), not beside
        _probe(parent, what, path)
    target = Path(os.path.realpath(p))  # realpath, unlike resolve(), does not raise on a link loop
    for given in inputs:
        given = Path(os.path.realpath(given))
        if target == given or (given.is_dir() and target.is_relative_to(given) and target.name in READ_FILES):
            raise InputError(f"{what} {str(path)!r} is one of the inputs; write somewhere else")
    return p


def output_folder(path, what: str = "--out", probe: bool = True) -> Path:
    """Check that a folder can be made (or used) at path: not a file, and the nearest existing
    folder above it takes new entries (probe: tried now; else by `probe_folder` once the caller's
    own checks passed, since a probe writes into that folder). Returns the path."""
    p = Path(path)
    if str(path).strip() == "":
        raise InputError(f"{what}: an empty folder name")
    if p.exists() and not p.is_dir():
        raise InputError(f"{what} {str(path)!r} is a file, not a folder")
    base = _existing_ancestor(p)
    if not base.is_dir():
        raise InputError(f"{what} {str(path)!r} is inside {str(base)!r}, which is a file")
    if probe:
        _probe(base, what, path)
    return p


def probe_folder(path, what: str = "--out") -> None:
    """Can a file be made in path, or in its nearest existing folder (InputError if not)?"""
    _probe(_existing_ancestor(Path(path)), what, path)


def _special(p: Path) -> bool:
    """Is p (links followed) an existing file that is not a regular one (/dev/null, /dev/stdout
    into a pipe, a FIFO)? Renaming over it would replace the device, so it is written in place."""
    try:
        return not stat.S_ISREG(os.stat(p).st_mode)
    except OSError:
        return False


def write_text(path, text: str, what: str = "output") -> Path:
    """Write text to path whole: a temporary file renamed onto the path (onto a link itself,
    never its target); a device or a pipe is written in place. A failure is one InputError line."""
    p = Path(path)
    try:
        if _special(p):
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
            return Path(path)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, p)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        raise InputError(f"cannot write {what} {str(path)!r}: {_strerror(exc)}") from None
    return Path(path)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet takes for a formula


def csv_text(frame) -> str:
    """A DataFrame as CSV text for a spreadsheet: a text cell that would start a formula (a label
    or dtype taken from a hand-edited or foreign results.csv, say "=HYPERLINK(...)") gets a
    leading apostrophe, so it opens as the text it is; numbers are left as they are."""
    from pandas.api.types import is_numeric_dtype

    out = frame.copy()
    for column in out.columns:
        if not is_numeric_dtype(out[column]):
            out[column] = out[column].map(lambda v: "'" + v if isinstance(v, str) and v.startswith(FORMULA_STARTS) else v)
    return out.to_csv(index=False)
