"""What every importer shares (commbench.analysis.importers): the file read within its bounds, its
lines, the values in it checked like command-line input, a second run in one file refused, and the
imported points written as a run folder."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from commbench.folder import limits
from commbench.backends import BACKENDS
from commbench.dtypes import DTYPES
from commbench.errors import InputError
from commbench.metrics import summarize
from commbench.folder.write import RunFolder
from commbench.folder.schema import RunStatus, build_row

# bytes per element of the types a report may name: commbench's own, and those others sweep that commbench does not
ITEMSIZE = {**{name: d.itemsize for name, d in DTYPES.items()}, "uint32": 4, "uint64": 8, "float8_e4m3": 1, "float8_e5m2": 1}

# The importers' own bounds (the file's size, points and samples: commbench.folder.limits; a run's:
# commbench.options'; the largest size is shared)
MAX_IMPORT_RANKS = 2**20  # import osu --nprocs, and the ranks an nccl-tests report lists
MAX_IMPORTED_US = 1e10  # almost 3 hours for one call: no collective; a sample past it is no measurement
MIN_IMPORTED_US = 1e-4  # 0.1 ns: below any call; samples are written to 1e-4 us, so a smaller one would read back as 0
MAX_LINE = 4096  # characters: a longer line is no benchmark's (nccl-tests: left out; OSU: an error)
_WORD = re.compile(r"[A-Za-z0-9_]{1,32}")  # a type, reduction or datatype name
_DIGITS = re.compile(r"[0-9]{1,20}")


@dataclass
class Imported:
    source: str
    collective: str
    world: int
    backend: str
    points: list[dict] = field(default_factory=list)  # size_bytes, count, dtype, op, in_place, time_us, samples, wrong, ...
    meta: dict = field(default_factory=dict)


def bad(where, why) -> InputError:
    return InputError(f"{where}: {why}")


def max_json_values() -> int:
    """Separators counted before a report is parsed (memory): its samples and about 100 per point."""
    return limits.IMPORT_SAMPLES.value() + 100 * limits.IMPORT_POINTS.value()


def read_input(path) -> str:
    """An import file's text: a regular file (a FIFO or device is refused, not waited on), UTF-8,
    within IMPORT_BYTES (its size from stat, before it is read)."""
    from commbench.folder.files import regular_file

    where = Path(path)
    size = limits.IMPORT_BYTES.check(str(path), regular_file(where.parent, where.name, inside=False).st_size)
    try:
        with open(path, "rb") as f:
            data = f.read(size + 1)
    except OSError as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    limits.IMPORT_BYTES.check(str(path), len(data))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"cannot read {str(path)!r}: not UTF-8 text (byte {exc.start})") from None


def lines(text: str):
    """(number, line, where it starts) per line of text, lazily (a file of many short lines is no list of them); a
    line longer than MAX_LINE is None, never copied."""
    start, lineno = 0, 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        lineno += 1
        yield lineno, text[start:end] if end - start <= MAX_LINE else None, start
        start = end + 1


# --- values read from a file ----------------------------------------------------------------------

def show(value) -> str:
    if value is None:
        return "missing"
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def number(value, what: str, where: str, zero_ok: bool = False) -> float:
    """A time in µs (MIN_IMPORTED_US .. MAX_IMPORTED_US) or, zero_ok, a bandwidth (finite, >= 0)."""
    try:
        x = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError, OverflowError):
        x = math.nan
    if zero_ok and not (math.isfinite(x) and x >= 0):
        raise bad(where, f"{what} is {show(value)}: expected a finite number >= 0")
    if not zero_ok and not MIN_IMPORTED_US <= x <= MAX_IMPORTED_US:  # NaN fails too
        raise bad(where, f"{what} is {show(value)}: expected a time in µs from {MIN_IMPORTED_US:g} to {MAX_IMPORTED_US:g}")
    return x


def integer(value, what: str, where: str, low: int, high: int) -> int:
    """A whole number low .. high, written as one (8, "8", 8.0)."""
    n = None
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str) and _DIGITS.fullmatch(value):
        n = int(value)
    if n is None or not low <= n <= high:
        raise bad(where, f"{what} is {show(value)}: expected a whole number from {low} to {high}")
    return n


def word(value, what: str, where: str) -> str:
    if not (isinstance(value, str) and _WORD.fullmatch(value)):
        raise bad(where, f"{what} is {show(value)}: expected a name of letters, digits and _")
    return value


def too_many(path) -> InputError:
    return limits.IMPORT_POINTS.refusal(str(path))


def looks_like_result(token: str) -> bool:
    """A line's first word starts like a number: a digit (any script's), a sign or a point."""
    return bool(token) and (token[0] in "+-." or token[0].isdigit() or token[0].isnumeric())


class Lines:
    """Result lines that do not read: an InputError (strict), or left out and counted (lenient)."""

    def __init__(self, lenient: bool):
        self.lenient, self.skipped = lenient, 0

    def bad(self, error: InputError) -> None:
        if not self.lenient:
            raise error
        self.skipped += 1

    def meta(self) -> dict:
        return {"skipped_lines": self.skipped} if self.lenient else {}


def once(seen: dict, key, where: str, first: str, what: str) -> None:
    """A result measured once: the same key a second time is an InputError naming both places."""
    if key in seen:
        raise bad(where, f"{what} again (first at {seen[key]}): two runs in one file? import each on its own")
    seen[key] = first


# --- writing ------------------------------------------------------------------------------------

def write_import(imp: Imported, out_dir: str | Path, source_file: str, label: str, run_id: str) -> Path:
    folder = RunFolder(out_dir)
    folder.create({"run_id": run_id, "label": label, "imported_from": imp.source, "source_file": source_file,
                   "world_size": imp.world, **imp.meta})  # holds the folder's lock (one writer) until released
    try:
        _write_points(imp, folder, label, run_id)
    finally:
        folder.release()
    return folder.dir


def _write_points(imp: Imported, folder: RunFolder, label: str, run_id: str) -> None:
    for i, p in enumerate(imp.points):
        stats = {}
        if len(p["samples"]) > 1:  # per-iteration times: the headline is their median, as in commbench
            stats = summarize(np.asarray(p["samples"]) * 1e-6)
            stats["time_us_mean"] = p["time_us"]  # what the tool reported (its average)
        fields = {"run_id": run_id, "label": label, "point": i, "collective": imp.collective, "backend": imp.backend,
                  "algorithm": "native", "device": BACKENDS[imp.backend].devices[0], "dtype": p["dtype"],
                  "op": p["op"], "in_place": p["in_place"], "world_size": imp.world,
                  "nodes": len(imp.meta.get("hosts", [])) or None, "size_bytes": p["size_bytes"], "count": p["count"],
                  "time_us": p["time_us"], "time_us_mean": p["time_us"], "samples": len(p["samples"]),
                  "iterations": p.get("iterations") or len(p["samples"]), "batch": 1,
                  "wrong": "" if p["wrong"] is None else p["wrong"], "root": p.get("root"), **stats}
        ranks = {r: (times, None) for r, times in enumerate(p["ranks"])} if p.get("ranks") else None
        folder.add(build_row(**fields), p["samples"], ranks=ranks)
    folder.finalize()
    folder.update({"status": RunStatus.COMPLETED, "points_measured": len(imp.points),
                   "wrong_total": sum(p["wrong"] or 0 for p in imp.points)})
