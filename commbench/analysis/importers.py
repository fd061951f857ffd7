"""Other benchmarks' output -> commbench's results layout, so report and compare show
nccl-tests, OSU and commbench numbers side by side.

* nccl-tests text output (the table printed by all_reduce_perf & co.) and its JSON report
  (`-J FILE`): one row per size and buffer mode; per-iteration times become samples when the
  JSON holds them, else the reported average is the one sample.
* OSU Micro-Benchmarks collective latency tests (osu_allreduce & co.), default and `-f`
  output. OSU does not print the number of ranks: give it (--nprocs).

The collectives say which names the tools give them (Collective.nccl_tests_name, osu_title).
Sizes follow commbench's (nccl-tests') semantics: OSU's size is what each rank contributes
(Collective.size_for_input: all-gather's is multiplied by the number of ranks).

The files are data from elsewhere, checked like command-line input before anything is written:
times > 0 and at most MAX_TIME_US, bandwidths finite and >= 0 (nccl-tests prints 0.00 for small
sizes), sizes 1 B .. MAX_SIZE_BYTES (commbench.options: the largest size a run takes), ranks
1 .. MAX_IMPORT_RANKS, names plain words. A result of size 0 (all-gather, reduce-scatter and
all-to-all print them where -b is below ranks x element size) measured nothing and is left out.
nccl-tests' correctness column is its #wrong (elements, "%5g") or, in older versions, its `error`
(the largest |result - expected|, "%5.0le": an error beyond its tolerance counts as 1 wrong), or
N/A (not checked). A file, its points and its samples are bounded (commbench.analysis.limits:
IMPORT_BYTES, IMPORT_POINTS, IMPORT_SAMPLES) so a huge or hostile file costs a bounded time and
memory; a FIFO or device is refused before it is opened.

Strict by line: a line that starts like a result (a digit, a sign, a point, any Unicode digit) is
one, and must read as one (sizes plain ASCII digits, times 1e-6 .. MAX_TIME_US µs); a second run or
test in the file (a second device list, '# nThread' line, result table or OSU title), a rank listed
twice or a result measured twice is refused, never merged. Other lines (a log's noise) are left.
Anything else is one InputError, "<file> line N: <problem>" (a JSON report: "<file> result N:
<problem>"). lenient: result lines that do not read are left out and counted (meta
"skipped_lines"); a second run or a repeated result is refused all the same.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from commbench.analysis import limits
from commbench.backends import BACKENDS
from commbench.errors import InputError
from commbench.metrics import summarize
from commbench.options import MAX_SIZE_BYTES
from commbench.collectives import COLLECTIVES
from commbench.schema import build_row
from commbench.run.folder import RunFolder

NCCL_TYPES = {"float": "float32", "half": "float16", "double": "float64", "bfloat16": "bfloat16", "int8": "int8",
              "uint8": "uint8", "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
              "int": "int32", "char": "int8", "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2"}
ITEMSIZE = {"float32": 4, "float16": 2, "float64": 8, "bfloat16": 2, "int8": 1, "uint8": 1, "int32": 4,
            "uint32": 4, "int64": 8, "uint64": 8, "float8_e4m3": 1, "float8_e5m2": 1}
OSU_TYPES = {"MPI_CHAR": "int8", "MPI_INT": "int32", "MPI_FLOAT": "float32", "MPI_DOUBLE": "float64"}

# The importers' own bounds (the file's size, points and samples: commbench.analysis.limits; a run's:
# commbench.options'; the largest size is shared)
MAX_IMPORT_RANKS = 2**20  # import osu --nprocs, and the ranks an nccl-tests report lists
MAX_TIME_US = 1e10  # almost 3 hours for one call: no collective; a sample past it is no measurement
MIN_TIME_US = 1e-6  # a picosecond: below any call (and above the subnormals that divide to infinity)
MAX_LINE = 4096  # characters: a longer line is no benchmark's (nccl-tests: left out; OSU: an error)
_WORD = re.compile(r"[A-Za-z0-9_]{1,32}")  # a type, reduction or datatype name
_DIGITS = re.compile(r"[0-9]{1,20}")


def _nccl_tests_collective(text: str) -> str | None:
    """The collective whose nccl-tests binary (<nccl_tests_name>_perf) `text` names, if any."""
    names = {c.nccl_tests_name: name for name, c in COLLECTIVES.items() if c.nccl_tests_name}
    found = re.search(r"\b(" + "|".join(map(re.escape, names)) + r")_perf\b", text) if names else None
    return names[found.group(1)] if found else None


def _osu_titles() -> dict[str, str]:
    """OSU's test title, lower-cased -> collective."""
    return {c.osu_title.lower(): name for name, c in COLLECTIVES.items() if c.osu_title}


@dataclass
class Imported:
    source: str
    collective: str
    world: int
    backend: str
    points: list[dict] = field(default_factory=list)  # size_bytes, count, dtype, op, in_place, time_us, samples, wrong, ...
    meta: dict = field(default_factory=dict)


def _bad(where, why) -> InputError:
    return InputError(f"{where}: {why}")


def max_json_values() -> int:
    """Separators counted before a report is parsed (memory): its samples and about 100 per point."""
    return limits.IMPORT_SAMPLES.value() + 100 * limits.IMPORT_POINTS.value()


def read_input(path) -> str:
    """An import file's text: a regular file (a FIFO or device is refused, not waited on), UTF-8,
    within IMPORT_BYTES (its size from stat, before it is read)."""
    from commbench.analysis.load import regular_file

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


def _lines(text: str):
    """(number, line, where it starts) per line of text, lazily (a file of many short lines is no list of them); a
    line longer than MAX_LINE is None, never copied."""
    start, number = 0, 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        number += 1
        yield number, text[start:end] if end - start <= MAX_LINE else None, start
        start = end + 1


# --- values read from a file ----------------------------------------------------------------------

def _show(value) -> str:
    if value is None:
        return "missing"
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _number(value, what: str, where: str, zero_ok: bool = False) -> float:
    """A time in µs (> 0, at most MAX_TIME_US) or, zero_ok, a bandwidth (finite, >= 0)."""
    try:
        x = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError, OverflowError):
        x = math.nan
    if zero_ok and not (math.isfinite(x) and x >= 0):
        raise _bad(where, f"{what} is {_show(value)}: expected a finite number >= 0")
    if not zero_ok and not MIN_TIME_US <= x <= MAX_TIME_US:  # NaN fails too
        raise _bad(where, f"{what} is {_show(value)}: expected a time in µs from {MIN_TIME_US:g} to {MAX_TIME_US:g}")
    return x


def _integer(value, what: str, where: str, low: int, high: int) -> int:
    """A whole number low .. high, written as one (8, "8", 8.0)."""
    n = None
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str) and _DIGITS.fullmatch(value):
        n = int(value)
    if n is None or not low <= n <= high:
        raise _bad(where, f"{what} is {_show(value)}: expected a whole number from {low} to {high}")
    return n


def _word(value, what: str, where: str) -> str:
    if not (isinstance(value, str) and _WORD.fullmatch(value)):
        raise _bad(where, f"{what} is {_show(value)}: expected a name of letters, digits and _")
    return value


def _too_many(path) -> InputError:
    return limits.IMPORT_POINTS.refusal(str(path))


def _looks_like_result(token: str) -> bool:
    """A line's first word starts like a number: a digit (any script's), a sign or a point."""
    return bool(token) and (token[0] in "+-." or token[0].isdigit() or token[0].isnumeric())


class _Lines:
    """Result lines that do not read: an InputError (strict), or left out and counted (lenient)."""

    def __init__(self, lenient: bool):
        self.lenient, self.skipped = lenient, 0

    def bad(self, error: InputError) -> None:
        if not self.lenient:
            raise error
        self.skipped += 1

    def meta(self) -> dict:
        return {"skipped_lines": self.skipped} if self.lenient else {}


def _once(seen: dict, key, where: str, first: str, what: str) -> None:
    """A result measured once: the same key a second time is an InputError naming both places."""
    if key in seen:
        raise _bad(where, f"{what} again (first at {seen[key]}): two runs in one file? import each on its own")
    seen[key] = first


# --- nccl-tests ---------------------------------------------------------------------------------

_DEVICE = re.compile(r"#[ \t]+Rank[ \t]+([0-9]{1,9})[ \t]+(?:Group[ \t]+[0-9]+[ \t]+)?"  # older versions: no Group
                     r"Pid[ \t]+[0-9]+[ \t]+on[ \t]+(\S+)[ \t]+device[ \t]+[0-9]+[ \t]+\[[^\]]*\][ \t]+(.*)")
_VERSION = re.compile(r"# nccl-tests version (\S+).*nccl-library=([0-9]+)")
# Older nccl-tests: a result's `error` is beyond tolerance when above DeltaMaxValue(type) x (ranks - 1)
# (common.cu CheckData); integer types' 1e-200 is any difference
_ERROR_TOLERANCE = {"float16": 1e-2, "bfloat16": 1e-2, "float32": 1e-5, "float64": 1e-12}


def _zero_size(value) -> bool:
    """A result of size 0, which nccl-tests prints where -b is below ranks x element size (all-gather,
    reduce-scatter, all-to-all): it measured nothing."""
    if isinstance(value, str):
        return value.isascii() and value.isdigit() and not value.strip("0")
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


def _nccl_wrong(value: str, dtype: str, ranks: int, error_column: bool, where: str) -> int | None:
    """nccl-tests' correctness column of one text result: None for N/A (not checked), else the wrong
    elements. #wrong is a count ("%5g": 12, 1e+06); the older `error` column ("%5.0le": 0e+00,
    1e-07) the largest difference from the expected values, 1 wrong when beyond nccl-tests'
    tolerance for the type and ranks, else 0. Without the header, a fraction is such an error."""
    if value == "N/A":
        return None
    what = "error" if error_column else "#wrong"
    x = math.nan
    if len(value) <= 32 and value.isascii() and re.fullmatch(r"[0-9.][0-9.eE+-]*", value):
        try:
            x = float(value)
        except ValueError:
            pass
    if not (math.isfinite(x) and 0 <= x < 2**63):
        raise _bad(where, f"{what} is {_show(value)}: expected a count of wrong elements, nccl-tests' older error "
                          "(a number >= 0) or N/A")
    if error_column or not x.is_integer():
        return int(x > _ERROR_TOLERANCE.get(dtype, 0.0) * (ranks - 1))
    return int(x)


def _nccl_point(where: str, size, count, dtype, op, in_place: int, time_us, wrong, samples=None) -> dict:
    """One nccl-tests result, checked."""
    size = _integer(size, "size", where, 1, MAX_SIZE_BYTES)
    dtype = _word(dtype, "type", where)
    time_us = _number(time_us, "time", where)
    return {"size_bytes": size, "count": _integer(count, "count", where, 0, size),
            "dtype": NCCL_TYPES.get(dtype, dtype), "op": _word(op, "redop", where), "in_place": in_place,
            "time_us": time_us,
            "wrong": None if wrong in (None, "N/A") else _integer(wrong, "#wrong", where, 0, 2**63 - 1),
            "samples": [_number(t, "per-iteration time", where) for t in samples] if samples else [time_us]}


def _table_header(parts: list[str]) -> tuple[tuple[str, ...], bool] | None:
    """The columns before the times and whether the correctness column is the older `error`, from
    the header of nccl-tests' table ("# size count type [redop] [root] time algbw busbw #wrong time
    algbw busbw #wrong"; older versions and collectives leave out redop or root); None for any
    other line."""
    if parts[:1] != ["#"] or "time" not in parts:
        return None
    at = parts.index("time")
    prefix, rest = tuple(parts[1:at]), parts[at:]
    if (prefix[:3] != ("size", "count", "type") or not set(prefix[3:]) <= {"redop", "root"} or len(rest) != 8
            or not rest[:3] == rest[4:7] == ["time", "algbw", "busbw"] or rest[3] != rest[7]
            or rest[3] not in ("#wrong", "error")):
        return None
    return prefix, rest[3] == "error"


_NO_HEADER = {12: (("size", "count", "type", "redop"), False), 13: (("size", "count", "type", "redop", "root"), False)}


def parse_nccl_tests_text(text: str, path: str = "<text>", collective: str | None = None,
                          lenient: bool = False) -> Imported:
    hosts, gpus, ranks, meta, results, zero_sizes, header = set(), set(), {}, {}, [], 0, None
    check, seen = _Lines(lenient), {}
    for lineno, line, at in _lines(text):
        where = f"{path} line {lineno}"
        if line is None:  # a log's long line is left; a result line is never that long
            head = text[at:at + 64].lstrip()
            if head.split()[:1] and _looks_like_result(head.split()[0]):
                check.bad(_bad(where, f"a result line longer than {MAX_LINE} characters: {head!r:.40}"))
            continue
        line = line.strip()
        device = _DEVICE.fullmatch(line)
        if device:
            if results:
                raise _bad(where, "a device list after the results: a second run's output? import each on its own")
            _once(ranks, device.group(1), where, f"line {lineno}", f"rank {device.group(1)} listed")
            hosts.add(device.group(2))
            gpus.add(device.group(3).strip())
        elif line.startswith("# nThread "):
            if "nccl_tests_config" in meta:
                raise _bad(where, "a second '# nThread' line: a second run's output? import each on its own")
            meta["nccl_tests_config"] = line[2:]
        elif _VERSION.match(line) and "nccl_tests_version" not in meta:
            meta["nccl_tests_version"], meta["nccl_version"] = _VERSION.match(line).groups()
        else:
            parts = line.split()
            found = _table_header(parts)
            if found and results:
                raise _bad(where, "a second result table: a second run's output? import each on its own")
            header = found or header
            if not parts or parts[0].startswith("#") or " NCCL " in f" {line} " or not _looks_like_result(parts[0]):
                continue  # a comment, or a log's line (NCCL INFO, a launcher's)
            # the header's columns (without one: size count type redop [root]) then 2 x (time algbw busbw #wrong)
            layout = header or _NO_HEADER.get(len(parts))
            if not (layout and len(parts) == len(layout[0]) + 8 and parts[0].isascii() and parts[0].isdigit()):
                check.bad(_bad(where, f"not a result line of the table ({len(parts)} fields): {line!r:.80}"))
                continue
            if _zero_size(parts[0]):
                zero_sizes += 1
                continue
            if len(results) >= limits.IMPORT_POINTS.value() // 2:
                raise _too_many(path)
            results.append((lineno, parts, layout))
    if not ranks:
        raise _bad(path, "no '#  Rank N [Group N] Pid N on HOST device' lines: not nccl-tests output, or cut short")
    collective = collective or _nccl_tests_collective(text)
    if collective is None:
        raise _bad(path, "cannot tell which collective this nccl-tests output measured (give --collective)")
    imp = Imported("nccl-tests", collective, len(ranks), "nccl",
                   meta={"hosts": sorted(hosts), "gpus": sorted(gpus), **meta})
    for lineno, parts, (prefix, error_column) in results:
        where = f"{path} line {lineno}"
        columns, body = dict(zip(prefix, parts)), parts[len(prefix):]
        try:
            points = []
            for in_place, (t, algbw, busbw, wrong) in ((0, body[0:4]), (1, body[4:8])):
                _number(algbw, "algbw", where, zero_ok=True)
                _number(busbw, "busbw", where, zero_ok=True)
                point = _nccl_point(where, columns["size"], columns["count"], columns["type"],
                                    columns.get("redop", "none"), in_place, t, None)
                point["wrong"] = _nccl_wrong(wrong, point["dtype"], len(ranks), error_column, where)
                if COLLECTIVES[imp.collective].rooted and columns.get("root", "-1") != "-1":  # nccl-tests' -r
                    point["root"] = _integer(columns["root"], "root", where, 0, MAX_IMPORT_RANKS - 1)
                points.append(point)
        except InputError as exc:
            check.bad(exc)
            continue
        _once(seen, tuple(columns.get(k) for k in ("size", "type", "redop", "root")), where, f"line {lineno}",
              f"size {columns['size']} ({columns['type']}) measured")
        imp.points += points
    imp.meta.update(check.meta())
    if not imp.points:
        raise _bad(path, "no result lines found in the nccl-tests output"
                         + (f" (only {zero_sizes} of size 0, which measure nothing)" if zero_sizes else "")
                         + (f" ({check.skipped} left out)" if check.skipped else ""))
    return imp


def _plain_meta(value):
    """A report's version or time, kept as written when it is a string or an integer."""
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def parse_nccl_tests_json(text: str, path: str = "<json>", collective: str | None = None,
                          lenient: bool = False) -> Imported:
    if sum(map(text.count, ",[{")) > max_json_values():  # before parsing: bounded memory
        raise _bad(path, f"more than {max_json_values()} JSON values: not one nccl-tests report")
    try:
        doc = json.loads(text)
        results, config, args = doc["results"], doc.get("config") or {}, doc.get("args") or []
        if not (isinstance(results, list) and all(isinstance(r, dict) for r in results) and isinstance(config, dict)
                and isinstance(args, list) and isinstance(config.get("devices") or [], list)):
            raise TypeError("results, config, args or devices have the wrong type")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:  # ValueError: 5000 digits
        raise _bad(path, f"not an nccl-tests JSON report ({exc.__class__.__name__}: {str(exc)[:120]})") from None
    if len(results) > limits.IMPORT_POINTS.value() // 2:
        raise _too_many(path)
    program = " ".join(map(str, args))
    collective = collective or _nccl_tests_collective(
        program + " " + json.dumps([r.get("experiment_name", "") for r in results]))
    if collective is None:
        raise _bad(path, "cannot tell which collective this report measured (give --collective)")
    devices = config.get("devices") or []
    if not devices:
        raise _bad(path, "the report lists no devices")
    if not all(isinstance(d, dict) for d in devices) or len(devices) > MAX_IMPORT_RANKS:
        raise _bad(path, f"the report's devices are not up to {MAX_IMPORT_RANKS} objects")
    seen_ranks: dict = {}
    for i, d in enumerate(devices, 1):
        rank = d.get("rank", i - 1)
        _once(seen_ranks, json.dumps(rank) if isinstance(rank, int) else repr(rank), f"{path} device {i}",
              f"device {i}", f"rank {_show(rank)} listed")
    imp = Imported("nccl-tests", collective, len(devices), "nccl",
                   meta={"hosts": sorted({str(d.get("hostname", "?")) for d in devices}),
                         "gpus": sorted({str(d.get("device_info", "?")) for d in devices}),
                         "nccl_version": _plain_meta(doc.get("nccl_version")), "command_line": [str(a) for a in args],
                         "start_time": _plain_meta(doc.get("start_time")), "end_time": _plain_meta(doc.get("end_time"))})
    samples, zero_sizes, seen = 0, 0, {}
    for i, r in enumerate(results, 1):
        where = f"{path} result {i}"
        if _zero_size(r.get("size")):
            zero_sizes += 1
            continue
        _once(seen, json.dumps([r.get(k) for k in ("size", "type", "redop", "root")], default=str)[:200], where,
              f"result {i}", f"size {_show(r.get('size'))} ({_show(r.get('type'))}) measured")
        for in_place, key in ((0, "out_of_place"), (1, "in_place")):
            body, per_iter = r.get(key), r.get(f"{key}_per_iter") or {}
            if not body:
                continue
            if not isinstance(body, dict) or not isinstance(per_iter, dict):
                raise _bad(where, f"{key} is not an object")
            times = per_iter.get("times_us")
            if times is not None and not isinstance(times, list):
                raise _bad(where, f"{key}_per_iter times_us is not a list")
            samples += len(times or ())
            if samples > limits.IMPORT_SAMPLES.value():
                raise limits.IMPORT_SAMPLES.refusal(str(path))
            for bw in ("alg_bw", "bus_bw"):
                if bw in body:
                    _number(body[bw], bw, where, zero_ok=True)
            imp.points.append(_nccl_point(where, r.get("size"), r.get("count"), r.get("type"), r.get("redop"),
                                          in_place, body["time"] if "time" in body else body.get("cpu_time"),
                                          body.get("nwrong"), times))
    if not imp.points:
        raise _bad(path, "the report holds no results"
                         + (f" (only {zero_sizes} of size 0, which measure nothing)" if zero_sizes else ""))
    return imp


def parse_nccl_tests(text: str, path: str = "<input>", collective: str | None = None,
                     lenient: bool = False) -> Imported:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return parse_nccl_tests_json(text, path, collective, lenient)
    return parse_nccl_tests_text(text, path, collective, lenient)


# --- OSU ------------------------------------------------------------------------------------------

def _osu_columns(line: str, where: str) -> list[str]:
    columns = [c.strip() for c in re.split(r"\s{2,}|\t", line[2:].strip())]
    if not {"Size", "Avg Latency(us)"} <= set(columns):
        raise _bad(where, f"header {line.strip()!r:.80} lacks the Size and Avg Latency(us) columns")
    return columns


def parse_osu(text: str, path: str = "<input>", world: int | None = None, lenient: bool = False) -> Imported:
    title, titles = re.search(r"^# OSU MPI ([\w-]+(?: [\w-]+){0,3}) Latency Test", text, re.M), _osu_titles()
    if not title or title.group(1).lower() not in titles:
        raise _bad(path, f"not OSU {' / '.join(n.replace('_', '-') for n in titles.values())} latency output "
                         f"(no '# OSU MPI {'|'.join(COLLECTIVES[n].osu_title for n in titles.values())} Latency Test' line)")
    if world is None:
        raise _bad(path, "OSU output does not record the number of ranks: give --nprocs")
    if isinstance(world, bool) or not isinstance(world, int) or not 1 <= world <= MAX_IMPORT_RANKS:
        raise InputError(f"--nprocs {world!r}: give the OSU run's number of ranks, 1 to {MAX_IMPORT_RANKS}")
    collective = titles[title.group(1).lower()]
    coll = COLLECTIVES[collective]
    dtype_m = re.search(r"^# Datatype: (\w+)", text, re.M)
    osu_type = _word(dtype_m.group(1), "Datatype", path) if dtype_m else None
    dtype = OSU_TYPES.get(osu_type, osu_type) if osu_type else "int8"
    imp = Imported("osu", collective, world, "mpi", meta={"osu_datatype": osu_type})
    columns, titles_seen, check, seen = None, 0, _Lines(lenient), {}
    for lineno, line, at in _lines(text):
        where = f"{path} line {lineno}"
        if line is None:
            raise _bad(where, f"longer than {MAX_LINE} characters: not OSU output")
        if re.match(r"# OSU MPI", line):
            titles_seen += 1
            if titles_seen > 1:
                raise _bad(where, f"a second test's output ({line[2:].strip()!r:.60}): import each test on its own")
        if line.startswith("# Size"):
            if columns is not None:
                raise _bad(where, "a second result table: a second test's output? import each on its own")
            columns = _osu_columns(line, where)
            continue
        parts = line.split()
        if not parts or line.startswith("#") or not _looks_like_result(parts[0]):
            continue  # a comment, or a launcher's line
        try:
            point = _osu_point(parts, columns, coll, world, dtype, line, where)
        except InputError as exc:
            check.bad(exc)
            continue
        _once(seen, point["size_bytes"], where, f"line {lineno}", f"Size {parts[0]} measured")
        if len(imp.points) >= limits.IMPORT_POINTS.value():
            raise _too_many(path)
        imp.points.append(point)
    imp.meta.update(check.meta())
    if not imp.points:
        raise _bad(path, "no result lines found in the OSU output"
                         + (f" ({check.skipped} left out)" if check.skipped else ""))
    return imp


def _osu_point(parts: list[str], columns, coll, world: int, dtype: str, line: str, where: str) -> dict:
    """One OSU result line, checked."""
    if columns is None or len(parts) != len(columns):
        raise _bad(where, f"result line does not match the header: {line.strip()!r:.80}")
    values = dict(zip(columns, parts, strict=True))
    size = _integer(values["Size"], "Size", where, 1, MAX_SIZE_BYTES)
    size = _integer(coll.size_for_input(size, world), f"Size x {world} ranks", where, 1, MAX_SIZE_BYTES)
    avg = _number(values["Avg Latency(us)"], "Avg Latency(us)", where)
    validation = values.get("Validation")
    if validation is not None and validation.lower() not in ("pass", "fail"):
        raise _bad(where, f"Validation is {_show(validation)}: expected Pass or Fail")
    point = {"size_bytes": size, "count": size // ITEMSIZE.get(dtype, 1), "dtype": dtype,
             "op": "sum" if coll.reduces else "none", "in_place": 0, "time_us": avg,
             "wrong": None if validation is None else int(validation.lower() == "fail"), "samples": [avg],
             "iterations": _integer(values["Iterations"], "Iterations", where, 1, 2**40)
             if "Iterations" in values else None}
    if "Min Latency(us)" in values or "Max Latency(us)" in values:  # over ranks of each rank's average
        point["rank_min_us"] = _number(values.get("Min Latency(us)"), "Min Latency(us)", where)
        point["rank_max_us"] = _number(values.get("Max Latency(us)"), "Max Latency(us)", where)
    return point


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
        folder.add(build_row(**fields), p["samples"])
    folder.finalize()
    folder.update({"status": "completed", "points_measured": len(imp.points),
                   "wrong_total": sum(p["wrong"] or 0 for p in imp.points)})
