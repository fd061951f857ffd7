"""The text of a run's options, read: sizes (8, 64K, 1G; a -b/-e/-f range), comma lists, and names
as other tools spell them (collectives, backends, algorithms, dtypes, ops). Each refusal is one
InputError line naming what is accepted. SweepSpec (commbench.spec) reads its options through these;
so do the commands that take sizes or names without a spec (model, workload, import)."""

from __future__ import annotations

import math
import re

from commbench.collectives import COLLECTIVES
from commbench.errors import InputError
from commbench.options import MAX_SIZE_BYTES, MAX_SIZES

_SUFFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE_RE = re.compile(r"^\s*(\d{1,20})\s*([KMGT]?)(I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'8' -> 8, '64K' -> 65536, '1G' / '1GB' / '1GiB' -> 2**30 (binary, as nccl-tests); at most
    MAX_SIZE_BYTES."""
    m = _SIZE_RE.match(str(text))
    if not m:
        raise InputError(f"invalid size {str(text)[:40]!r} (expected a byte count such as 8, 64K, 4M or 1G)")
    value = int(m.group(1)) * _SUFFIX[m.group(2).upper()]
    if value < 1:
        raise InputError(f"invalid size {text!r}: sizes must be at least 1 byte")
    if value > MAX_SIZE_BYTES:
        raise InputError(f"size {str(text).strip()!r} is larger than {format_size(MAX_SIZE_BYTES)}, the largest size accepted")
    return value


def format_size(n: int) -> str:
    """Inverse of parse_size for display: 65536 -> '64K', 1000 -> '1000'."""
    for suffix in ("T", "G", "M", "K"):
        unit = _SUFFIX[suffix]
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def size_range(min_bytes: int, max_bytes: int, factor: float) -> list[int]:
    """Geometric sweep min, min*f, ... up to max inclusive (nccl-tests -b/-e/-f)."""
    if min_bytes > max_bytes:
        raise InputError(f"min bytes {format_size(min_bytes)} is larger than max bytes {format_size(max_bytes)}")
    if not factor > 1 or not math.isfinite(factor):
        raise InputError(f"invalid step factor {factor}: it must be greater than 1")
    if math.log(max_bytes / min_bytes) / math.log(factor) > MAX_SIZES:
        raise InputError(f"step factor {factor} gives more than {MAX_SIZES} sizes from {min_bytes} to {max_bytes} B")
    sizes, size = [], float(min_bytes)
    while round(size) <= max_bytes:
        if not sizes or round(size) != sizes[-1]:
            sizes.append(round(size))
        size *= factor
    return sizes


def _check_size_count(count: int) -> None:
    if count > MAX_SIZES:
        raise InputError(f"{count} sizes is more than a run takes (at most {MAX_SIZES})")


def _parse_sizes(items: list[str]) -> list[int]:
    """An explicit list of sizes, its length checked before any is parsed."""
    _check_size_count(len(items))
    return [parse_size(s) for s in items]


def split_list(text: str | list[str] | None) -> list[str]:
    """'a,b' or ['a', 'b,c'] -> ['a', 'b', 'c'] (blank items dropped)."""
    if text is None:
        return []
    parts = [text] if isinstance(text, str) else list(text)
    return [p.strip() for part in parts for p in str(part).split(",") if p.strip()]


def _key(name: str) -> str:
    """How names are compared: case, '-' and '_' do not count (all-reduce, AllReduce, all_reduce)."""
    return str(name).lower().replace("-", "").replace("_", "")


def collective_aliases() -> dict[str, str]:
    """Other tools' names for the registered collectives -> commbench's: nccl-tests' (all_reduce,
    all_reduce_perf), NCCL's (AllReduce) and OSU's (osu_allreduce), from each collective's own facts."""
    aliases = {}
    for c in COLLECTIVES.values():
        osu = c.osu_name()
        for alias in (c.nccl_tests_name, c.nccl_tests_name and f"{c.nccl_tests_name}_perf", c.nccl_function,
                      osu, osu and osu.removeprefix("osu_")):  # osu_bcast and bcast
            if alias:
                aliases[alias] = c.name
    return aliases


def resolve_names(kind: str, values, accepted, aliases: dict[str, str] | None = None) -> list[str]:
    """Names as given (a list, or comma text) -> the accepted names they mean, in order, without
    repeats. Case, '-' and '_' do not count, and `aliases` (other tools' spellings) map to their
    accepted name; anything else is an InputError listing the accepted names, with "did you mean"
    for a near miss."""
    import difflib

    accepted = list(accepted)
    values = split_list(values)
    if not values:
        raise InputError(f"no {kind} given (accepted: {', '.join(accepted)})")
    spelled = {_key(a): a for a in (aliases or {})} | {_key(a): a for a in accepted}  # key -> a name as written
    meaning = {_key(a): c for a, c in (aliases or {}).items()} | {_key(a): a for a in accepted}
    chosen = []
    for v in values:
        key = _key(v)
        if key not in meaning:
            near = difflib.get_close_matches(key, list(meaning), n=1, cutoff=0.75)
            hint = ""
            if near:
                name, canonical = spelled[near[0]], meaning[near[0]]
                hint = f"; did you mean {name}{f' ({canonical})' if canonical != name else ''}?"
            raise InputError(f"unknown {kind} {str(v)[:40]!r} (accepted: {', '.join(accepted)}){hint}")
        if meaning[key] not in chosen:
            chosen.append(meaning[key])
    return chosen
