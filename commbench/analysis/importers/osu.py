"""OSU Micro-Benchmarks' collective latency tests (commbench.analysis.importers): osu_allreduce & co.,
default and `-f` output. OSU does not print the number of ranks: it is given (--nprocs)."""

from __future__ import annotations

import re

from commbench.folder import limits
from commbench.analysis.importers.base import (ITEMSIZE, MAX_IMPORT_RANKS, MAX_LINE, Imported, Lines, bad, integer,
                                               lines, looks_like_result, number, once, show, too_many, word)
from commbench.collectives import COLLECTIVES
from commbench.errors import InputError
from commbench.options import MAX_SIZE_BYTES

OSU_TYPES = {"MPI_CHAR": "int8", "MPI_INT": "int32", "MPI_FLOAT": "float32", "MPI_DOUBLE": "float64"}


def _osu_titles() -> dict[str, str]:
    """OSU's test title, lower-cased -> collective."""
    return {c.osu_title.lower(): name for name, c in COLLECTIVES.items() if c.osu_title}


def _osu_columns(line: str, where: str) -> list[str]:
    columns = [c.strip() for c in re.split(r"\s{2,}|\t", line[2:].strip())]
    if not {"Size", "Avg Latency(us)"} <= set(columns):
        raise bad(where, f"header {line.strip()!r:.80} lacks the Size and Avg Latency(us) columns")
    if len(set(columns)) < len(columns):
        raise bad(where, f"header {line.strip()!r:.80} names a column twice")
    return columns


def parse_osu(text: str, path: str = "<input>", world: int | None = None, lenient: bool = False) -> Imported:
    title, titles = re.search(r"^# OSU MPI ([\w-]+(?: [\w-]+){0,3}) Latency Test", text, re.M), _osu_titles()
    if not title or title.group(1).lower() not in titles:
        raise bad(path, f"not OSU {' / '.join(n.replace('_', '-') for n in titles.values())} latency output "
                         f"(no '# OSU MPI {'|'.join(COLLECTIVES[n].osu_title for n in titles.values())} Latency Test' line)")
    if world is None:
        raise bad(path, "OSU output does not record the number of ranks: give --nprocs")
    if isinstance(world, bool) or not isinstance(world, int) or not 1 <= world <= MAX_IMPORT_RANKS:
        raise InputError(f"--nprocs {world!r}: give the OSU run's number of ranks, 1 to {MAX_IMPORT_RANKS}")
    collective = titles[title.group(1).lower()]
    coll = COLLECTIVES[collective]
    dtype_m = re.search(r"^# Datatype: (\w+)", text, re.M)
    osu_type = word(dtype_m.group(1), "Datatype", path) if dtype_m else None
    # OSU before 7.0 printed no Datatype line: its reductions summed MPI_FLOAT, the other tests moved MPI_CHAR
    dtype = OSU_TYPES.get(osu_type) if osu_type else "float32" if coll.reduces else "int8"
    if dtype is None:
        raise bad(path, f"Datatype {osu_type}: expected one of {', '.join(OSU_TYPES)}")
    imp = Imported("osu", collective, world, "mpi", meta={"osu_datatype": osu_type})
    columns, titles_seen, check, seen = None, 0, Lines(lenient), {}
    for lineno, line, at in lines(text):
        where = f"{path} line {lineno}"
        if line is None:
            raise bad(where, f"longer than {MAX_LINE} characters: not OSU output")
        if re.match(r"# OSU MPI", line):
            titles_seen += 1
            if titles_seen > 1:
                raise bad(where, f"a second test's output ({line[2:].strip()!r:.60}): import each test on its own")
        if line.startswith("# Size"):
            if columns is not None:
                raise bad(where, "a second result table: a second test's output? import each on its own")
            columns = _osu_columns(line, where)
            continue
        parts = line.split()
        if not parts or line.startswith("#") or not looks_like_result(parts[0]):
            continue  # a comment, or a launcher's line
        try:
            point = _osu_point(parts, columns, coll, world, dtype, line, where)
        except InputError as exc:
            check.bad(exc)
            continue
        once(seen, point["size_bytes"], where, f"line {lineno}", f"Size {parts[0]} measured")
        if len(imp.points) >= limits.IMPORT_POINTS.value():
            raise too_many(path)
        imp.points.append(point)
    imp.meta.update(check.meta())
    if not imp.points:
        raise bad(path, "no result lines found in the OSU output"
                         + (f" ({check.skipped} left out)" if check.skipped else ""))
    return imp


def _osu_point(parts: list[str], columns, coll, world: int, dtype: str, line: str, where: str) -> dict:
    """One OSU result line, checked."""
    if columns is None or len(parts) != len(columns):
        raise bad(where, f"result line does not match the header: {line.strip()!r:.80}")
    values = dict(zip(columns, parts, strict=True))
    size = integer(values["Size"], "Size", where, 1, MAX_SIZE_BYTES)
    if size % ITEMSIZE[dtype]:
        raise bad(where, f"Size {size} is not whole {dtype} elements ({ITEMSIZE[dtype]} B each)")
    size = integer(coll.size_of_osu(size, world), f"Size x {world} ranks", where, 1, MAX_SIZE_BYTES)
    avg = number(values["Avg Latency(us)"], "Avg Latency(us)", where)
    validation = values.get("Validation")
    if validation is not None and validation.lower() not in ("pass", "fail"):
        raise bad(where, f"Validation is {show(validation)}: expected Pass or Fail")
    point = {"size_bytes": size, "count": size // ITEMSIZE.get(dtype, 1), "dtype": dtype,
             "op": "sum" if coll.reduces else "none", "in_place": 0, "time_us": avg,
             "wrong": None if validation is None else int(validation.lower() == "fail"), "samples": [avg],
             "iterations": integer(values["Iterations"], "Iterations", where, 1, 2**40)
             if "Iterations" in values else None}
    if "Min Latency(us)" in values or "Max Latency(us)" in values:  # over ranks of each rank's average
        point["rank_min_us"] = number(values.get("Min Latency(us)"), "Min Latency(us)", where)
        point["rank_max_us"] = number(values.get("Max Latency(us)"), "Max Latency(us)", where)
        if not point["rank_min_us"] <= avg <= point["rank_max_us"]:
            raise bad(where, f"Avg Latency(us) {avg:g} is not between Min {point['rank_min_us']:g} and Max "
                             f"{point['rank_max_us']:g}")
    return point
