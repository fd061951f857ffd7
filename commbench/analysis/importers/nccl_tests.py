"""nccl-tests' output (commbench.analysis.importers): the text table all_reduce_perf & co. print,
and the JSON report (`-J FILE`) with its per-iteration times."""

from __future__ import annotations

import json
import math
import re

from commbench.folder import limits
from commbench.folder.files import unique_keys
from commbench.analysis.importers.base import (ITEMSIZE, MAX_IMPORT_RANKS, MAX_LINE, Imported, Lines, bad, integer,
                                               lines, looks_like_result, max_json_values, number, once, show,
                                               too_many, word)
from commbench.collectives import COLLECTIVES
from commbench.errors import InputError
from commbench.options import MAX_SIZE_BYTES
from commbench.folder.schema import EXACT_INTEGERS

NCCL_TYPES = {"float": "float32", "half": "float16", "double": "float64", "bfloat16": "bfloat16", "int8": "int8",
              "uint8": "uint8", "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
              "int": "int32", "char": "int8", "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2"}


def _named(given: str | None, named: str | None, path: str) -> str | None:
    """The collective of a file: the one it names (its <name>_perf), else --collective's; both, differing: refused."""
    if given and named and given != named:
        raise bad(path, f"the file is nccl-tests' {COLLECTIVES[named].nccl_tests_name}_perf, not {given} "
                        "(--collective)")
    return named or given


def _nccl_tests_collective(text: str) -> str | None:
    """The collective whose nccl-tests binary (<nccl_tests_name>_perf) `text` names, if any."""
    names = {c.nccl_tests_name: name for name, c in COLLECTIVES.items() if c.nccl_tests_name}
    found = re.search(r"\b(" + "|".join(map(re.escape, names)) + r")_perf\b", text) if names else None
    return names[found.group(1)] if found else None


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
    if not (math.isfinite(x) and 0 <= x < EXACT_INTEGERS):
        raise bad(where, f"{what} is {show(value)}: expected a count of wrong elements, nccl-tests' older error "
                          "(a number >= 0) or N/A")
    if error_column or not x.is_integer():
        return int(x > _ERROR_TOLERANCE.get(dtype, 0.0) * (ranks - 1))
    return int(x)


def _nccl_point(where: str, size, count, dtype, op, in_place: int, time_us, wrong, samples=None) -> dict:
    """One nccl-tests result, checked."""
    size = integer(size, "size", where, 1, MAX_SIZE_BYTES)
    name = word(dtype, "type", where)
    dtype = NCCL_TYPES.get(name, name)
    if dtype not in ITEMSIZE:
        raise bad(where, f"type is {show(name)}: expected one of nccl-tests' {', '.join(NCCL_TYPES)}")
    time_us = number(time_us, "time", where)
    return {"size_bytes": size, "count": integer(count, "count", where, 0, size), "dtype": dtype,
            "op": word(op, "redop", where), "in_place": in_place, "time_us": time_us,
            "wrong": None if wrong in (None, "N/A") else integer(wrong, "#wrong", where, 0, EXACT_INTEGERS - 1),
            "samples": [number(t, "per-iteration time", where) for t in samples] if samples else [time_us]}


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
    check, seen = Lines(lenient), {}
    for lineno, line, at in lines(text):
        where = f"{path} line {lineno}"
        if line is None:  # a log's long line is left; a result line is never that long
            head = text[at:at + 64].lstrip()
            if head.split()[:1] and looks_like_result(head.split()[0]):
                check.bad(bad(where, f"a result line longer than {MAX_LINE} characters: {head!r:.40}"))
            continue
        line = line.strip()
        device = _DEVICE.fullmatch(line)
        if device:
            if results:
                raise bad(where, "a device list after the results: a second run's output? import each on its own")
            once(ranks, device.group(1), where, f"line {lineno}", f"rank {device.group(1)} listed")
            hosts.add(device.group(2))
            gpus.add(device.group(3).strip())
        elif line.startswith("# nThread "):
            if "nccl_tests_config" in meta:
                raise bad(where, "a second '# nThread' line: a second run's output? import each on its own")
            meta["nccl_tests_config"] = line[2:]
        elif _VERSION.match(line) and "nccl_tests_version" not in meta:
            meta["nccl_tests_version"], meta["nccl_version"] = _VERSION.match(line).groups()
        else:
            parts = line.split()
            found = _table_header(parts)
            if found and results:
                raise bad(where, "a second result table: a second run's output? import each on its own")
            header = found or header
            if not parts or parts[0].startswith("#") or " NCCL " in f" {line} " or not looks_like_result(parts[0]):
                continue  # a comment, or a log's line (NCCL INFO, a launcher's)
            # the header's columns (without one: size count type redop [root]) then 2 x (time algbw busbw #wrong)
            layout = header or _NO_HEADER.get(len(parts))
            if not (layout and len(parts) == len(layout[0]) + 8 and parts[0].isascii() and parts[0].isdigit()):
                check.bad(bad(where, f"not a result line of the table ({len(parts)} fields): {line!r:.80}"))
                continue
            if _zero_size(parts[0]):
                zero_sizes += 1
                continue
            if len(results) >= limits.IMPORT_POINTS.value() // 2:
                raise too_many(path)
            results.append((lineno, parts, layout))
    if not ranks:
        raise bad(path, "no '#  Rank N [Group N] Pid N on HOST device' lines: not nccl-tests output, or cut short")
    collective = _named(collective, _nccl_tests_collective(text), path)
    if collective is None:
        raise bad(path, "cannot tell which collective this nccl-tests output measured (give --collective)")
    imp = Imported("nccl-tests", collective, len(ranks), "nccl",
                   meta={"hosts": sorted(hosts), "gpus": sorted(gpus), **meta})
    for lineno, parts, (prefix, error_column) in results:
        where = f"{path} line {lineno}"
        columns, body = dict(zip(prefix, parts)), parts[len(prefix):]
        try:
            points = []
            for in_place, (t, algbw, busbw, wrong) in ((0, body[0:4]), (1, body[4:8])):
                number(algbw, "algbw", where, zero_ok=True)
                number(busbw, "busbw", where, zero_ok=True)
                point = _nccl_point(where, columns["size"], columns["count"], columns["type"],
                                    columns.get("redop", "none"), in_place, t, None)
                point["wrong"] = _nccl_wrong(wrong, point["dtype"], len(ranks), error_column, where)
                if COLLECTIVES[imp.collective].rooted and columns.get("root", "-1") != "-1":  # nccl-tests' -r
                    point["root"] = integer(columns["root"], "root", where, 0, len(ranks) - 1)
                points.append(point)
        except InputError as exc:
            check.bad(exc)
            continue
        once(seen, tuple(columns.get(k) for k in ("size", "type", "redop", "root")), where, f"line {lineno}",
              f"size {columns['size']} ({columns['type']}) measured")
        imp.points += points
    imp.meta.update(check.meta())
    if not imp.points:
        raise bad(path, "no result lines found in the nccl-tests output"
                         + (f" (only {zero_sizes} of size 0, which measure nothing)" if zero_sizes else "")
                         + (f" ({check.skipped} left out)" if check.skipped else ""))
    return imp


def _plain_meta(value):
    """A report's version or time, kept as written when it is a string or an integer."""
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def parse_nccl_tests_json(text: str, path: str = "<json>", collective: str | None = None,
                          lenient: bool = False) -> Imported:
    if sum(map(text.count, ",[{")) > max_json_values():  # before parsing: bounded memory
        raise bad(path, f"more than {max_json_values()} JSON values: not one nccl-tests report")
    try:
        doc = json.loads(text, object_pairs_hook=unique_keys)  # a second "results" would replace the first
        if not isinstance(doc, dict):
            raise TypeError("its top level is not the report's object")
        results, config, args = doc["results"], doc.get("config") or {}, doc.get("args") or []
        if not (isinstance(results, list) and all(isinstance(r, dict) for r in results) and isinstance(config, dict)
                and isinstance(args, list) and isinstance(config.get("devices") or [], list)):
            raise TypeError("results, config, args or devices have the wrong type")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:  # ValueError: 5000 digits
        raise bad(path, f"not an nccl-tests JSON report ({exc.__class__.__name__}: {str(exc)[:120]})") from None
    if len(results) > limits.IMPORT_POINTS.value() // 2:
        raise too_many(path)
    program = " ".join(map(str, args))
    collective = _named(collective, _nccl_tests_collective(
        program + " " + json.dumps([r.get("experiment_name", "") for r in results])), path)
    if collective is None:
        raise bad(path, "cannot tell which collective this report measured (give --collective)")
    devices = config.get("devices") or []
    if not devices:
        raise bad(path, "the report lists no devices")
    if not all(isinstance(d, dict) for d in devices) or len(devices) > MAX_IMPORT_RANKS:
        raise bad(path, f"the report's devices are not up to {MAX_IMPORT_RANKS} objects")
    seen_ranks: dict = {}
    for i, d in enumerate(devices, 1):
        rank = d.get("rank", i - 1)
        once(seen_ranks, json.dumps(rank) if isinstance(rank, int) else repr(rank), f"{path} device {i}",
              f"device {i}", f"rank {show(rank)} listed")
    imp = Imported("nccl-tests", collective, len(devices), "nccl",
                   meta={"hosts": sorted({str(d.get("hostname", "?")) for d in devices}),
                         "gpus": sorted({str(d.get("device_info", "?")) for d in devices}),
                         "nccl_version": _plain_meta(doc.get("nccl_version")), "command_line": [str(a) for a in args],
                         "start_time": _plain_meta(doc.get("start_time")), "end_time": _plain_meta(doc.get("end_time"))})
    per_process = _gpus_per_process(config, path)
    processes = max(1, len(devices) // per_process)
    imp.meta["rank_hosts"] = [str(devices[p * per_process].get("hostname", "?")) for p in range(processes)]
    imp.meta["rank_unit"] = "process" if per_process > 1 else "rank"
    samples, zero_sizes, seen = 0, 0, {}
    for i, r in enumerate(results, 1):
        where = f"{path} result {i}"
        if _zero_size(r.get("size")):
            zero_sizes += 1
            continue
        once(seen, json.dumps([r.get(k) for k in ("size", "type", "redop", "root")], default=str)[:200], where,
              f"result {i}", f"size {show(r.get('size'))} ({show(r.get('type'))}) measured")
        for in_place, key in ((0, "out_of_place"), (1, "in_place")):
            body, per_iter = r.get(key), r.get(f"{key}_per_iter") or {}
            if not body:
                continue
            if not isinstance(body, dict) or not isinstance(per_iter, dict):
                raise bad(where, f"{key if not isinstance(body, dict) else key + '_per_iter'} is not an object")
            times = per_iter.get("times_us")
            if times is not None and not isinstance(times, list):
                raise bad(where, f"{key}_per_iter times_us is not a list")
            samples += len(times or ())
            if samples > limits.IMPORT_SAMPLES.value():
                raise limits.IMPORT_SAMPLES.refusal(str(path))
            for bw in ("alg_bw", "bus_bw"):
                if bw in body:
                    number(body[bw], bw, where, zero_ok=True)
            point = _nccl_point(where, r.get("size"), r.get("count"), r.get("type"), r.get("redop"),
                                in_place, body["time"] if "time" in body else body.get("cpu_time"),
                                body.get("nwrong"), times)
            rows = per_iter.get("per_process_max_times_us")
            if rows is not None:
                point["ranks"] = _process_rows(rows, point["samples"], processes, f"{where} {key}_per_iter")
                samples += len(point["ranks"]) * len(point["samples"])
                if samples > limits.IMPORT_SAMPLES.value():
                    raise limits.IMPORT_SAMPLES.refusal(str(path))
            imp.points.append(point)
    if not imp.points:
        raise bad(path, "the report holds no results"
                         + (f" (only {zero_sizes} of size 0, which measure nothing)" if zero_sizes else ""))
    return imp


def _gpus_per_process(config: dict, path: str) -> int:
    """GPUs a process drives (-t threads x -g GPUs): the devices of one row of per-process times."""
    n = 1
    for key in ("nthreads", "ngpus"):
        if config.get(key) is not None:
            n *= integer(config[key], key, f"{path} config", 1, MAX_IMPORT_RANKS)
    return n


def _process_rows(rows, times: list[float], processes: int, where: str) -> list[list[float]]:
    """nccl-tests 2.19's per_process_max_times_us (-I 1 -J): one list per process of its µs per iteration
    (the maximum over its own GPUs), as many as times_us, whose maximum over the processes times_us is."""
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows) or len(rows) != processes:
        raise bad(where, f"per_process_max_times_us is not {processes} lists (one per process)")
    out = [[number(t, "per-process time", where) for t in row] for row in rows]
    if any(len(row) != len(times) for row in out):
        raise bad(where, f"per_process_max_times_us rows are not {len(times)} iterations long, as times_us is")
    for i, t in enumerate(times):
        top = max(row[i] for row in out)
        if abs(top - t) > 1e-3 + 1e-9 * t:
            raise bad(where, f"iteration {i}: times_us is {t:g}, the processes' maximum {top:g}: not one report's")
    return out


def parse_nccl_tests(text: str, path: str = "<input>", collective: str | None = None,
                     lenient: bool = False) -> Imported:
    stripped = text.strip()
    if stripped.startswith("{") or stripped.startswith("[") and stripped.endswith("]"):  # (a JSON array: refused)
        return parse_nccl_tests_json(text, path, collective, lenient)
    return parse_nccl_tests_text(text, path, collective, lenient)
