"""The run's tables as text, in nccl-tests' layout: one line per size with the out-of-place and the
in-place measurement side by side (`size count type redop | time algbw busbw #wrong iters | ...`),
then `# Avg bus bandwidth` and the unreliable points under each table. Pure formatting: the
Renderer (commbench.presentation.console) decides when a line is complete; texts from outside are escaped there.

A mode that is not measured leaves its half out; one measured for some sizes only shows `-` in the
other half. A point flagged unreliable (the row's `unreliable`: its reasons) ends its line with `!`.
Aggregated tables (--repeat: the median of the jobs per point) show the jobs' spread instead of
the iterations: (slowest - fastest) / median time, in %."""

from __future__ import annotations

import re
import statistics

MODES = {False: "out-of-place", True: "in-place"}
LEFT = f"{'size':>10} {'count':>10} {'type':>8} {'redop':>5}"
LEFT_UNITS = f"{'(B)':>10} {'(elements)':>10} {'':>8} {'':>5}"
MARK = " !"  # the last, narrow column of a line holding an unreliable point


def _last(kind: str) -> tuple[str, str]:
    return ("iters", "") if kind == "run" else ("spread", "(%)")


def header(modes: tuple[bool, ...], kind: str = "run") -> list[str]:
    """The table's header lines (each starts with '#'): with both modes, a line naming each half."""
    last, unit = _last(kind)
    names = "".join(f" {'time':>9} {'algbw':>8} {'busbw':>8} {'#wrong':>6} {last:>6}" for _ in modes)
    units = "".join(f" {'(us)':>9} {'(GB/s)':>8} {'(GB/s)':>8} {'':>6} {unit:>6}" for _ in modes)
    lines = []
    if len(modes) > 1:
        lines.append(("#" + " " * (len(LEFT) - 1) + "".join(f" {MODES[m]:^41}" for m in modes)).rstrip())
    lines += ["#" + (LEFT + names)[1:], ("#" + (LEFT_UNITS + units)[1:]).rstrip()]
    return lines


def _half(row: dict | None, kind: str) -> str:
    if row is None:
        return f" {'-':>9} {'-':>8} {'-':>8} {'-':>6} {'-':>6}"
    last = row["iterations"] if kind == "run" else f"{row['spread_pct']:.1f}"
    return (f" {row['time_us']:>9.2f} {row['algbw_gbps']:>8.3f} {row['busbw_gbps']:>8.3f} {int(row['wrong']):>6} "
            f"{last:>6}")


def line(halves: list[dict | None], kind: str = "run", escape=str) -> str:
    """One size: the left columns from the first row present, then one half per mode (None: not
    measured). escape: applied to the texts from outside (dtype, op)."""
    first = next(r for r in halves if r is not None)
    text = (f"{first['size_bytes']:>10} {first['count']:>10} {escape(first['dtype']):>8} {escape(first['op']):>5}"
            + "".join(_half(r, kind) for r in halves))
    return text + MARK if any(r is not None and r.get("unreliable") for r in halves) else text


def is_wrong(halves: list[dict | None]) -> bool:
    return any(r is not None and int(r["wrong"]) for r in halves)


def footer(rows: list[dict]) -> list[str]:
    """`# Avg bus bandwidth` (the mean busbw of the table's rows, every mode) and, where some are
    flagged, one line of the unreliable points with their reasons (unescaped: the caller escapes)."""
    if not rows:
        return []
    modes = sorted({bool(r["in_place"]) for r in rows})
    which = " and ".join(MODES[m] for m in modes)
    mean = statistics.fmean(float(r["busbw_gbps"]) for r in rows)
    lines = [f"# Avg bus bandwidth    : {mean:.3f} GB/s (mean busbw of the {len(rows)} points above, {which})"]
    lines += against_floor(rows)
    flagged = [r for r in rows if r.get("unreliable")]
    if flagged:
        lines.append(f"# ! {len(flagged)} point(s) unreliable: {_reasons(flagged)} (the rows' `unreliable` "
                     "column says how much)")
    return lines


def against_floor(rows: list[dict]) -> list[str]:
    """`# Against the floor`: how near the table's best points come to what the machine can do (the
    rows' latency_efficiency and bandwidth_efficiency: commbench.kernels.floor), where known."""
    from commbench.spec import format_size

    def best(column):
        known = [r for r in rows if _number(r.get(column)) is not None]
        return max(known, key=lambda r: _number(r[column]), default=None)
    fast, wide = best("latency_efficiency"), best("bandwidth_efficiency")
    parts = []
    if fast is not None and _number(fast["latency_efficiency"]) > 0:
        ratio = round(1 / _number(fast["latency_efficiency"]), 2)
        below = ("; below it: the floor was likely measured while the cores were slower (`commbench floor --fresh` "
                 "for later runs)")
        parts.append(f"fastest point {ratio:.2f}x the 8 B exchange floor (at size "
                     f"{format_size(int(fast['size_bytes']))}{below if ratio < 1 else ''})")
    if wide is not None:
        parts.append(f"best busbw {_number(wide['bandwidth_efficiency']):.2f}x the copy rate "
                     f"(at size {format_size(int(wide['size_bytes']))})")
    return [f"# Against the floor    : {', '.join(parts)} (commbench floor)"] if parts else []


def _number(value) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if v == v else None


def _reasons(flagged: list[dict], most: int = 6) -> str:
    """The flagged points by kind of reason (the text before its ':' or '(', less a leading count):
    `busy machine (8, 1K out-of-place; 64K in-place), uncertain median (8 in-place)`; at most `most`
    sizes a kind."""
    from commbench.spec import format_size

    kinds: dict[str, dict[bool, list[str]]] = {}
    for r in flagged:
        for reason in str(r["unreliable"]).split("; "):
            kind = re.sub(r"^\d+ ", "", re.split(r"[:(]", reason, maxsplit=1)[0].strip()) or "unreliable"
            sizes = kinds.setdefault(kind, {}).setdefault(bool(r["in_place"]), [])
            size = format_size(int(r["size_bytes"]))
            if size not in sizes:
                sizes.append(size)
    out = []
    for kind, modes in kinds.items():
        parts, left = [], most
        for mode, sizes in modes.items():
            shown = sizes[:max(left, 0)]
            left -= len(shown)
            if shown:
                more = f" and {len(sizes) - len(shown)} more" if len(sizes) > len(shown) else ""
                parts.append(f"{', '.join(shown)}{more} {MODES[mode]}")
            elif sizes:
                parts.append(f"{len(sizes)} {MODES[mode]}")
        out.append(f"{kind} ({'; '.join(parts)})")
    return ", ".join(out)


def aggregate(rows: list[dict]) -> list[dict]:
    """One row per point (plan order) from its jobs' rows: the median of the jobs' times, algbw and
    busbw of that time (as nccl-tests derives them), wrong elements summed, `spread_pct` = (max - min) / median of the jobs' times, `jobs`, and
    the reasons of every job flagged unreliable ("; "-joined, each once)."""
    points: dict[tuple, list[dict]] = {}
    for r in rows:
        key = (r["backend"], r["collective"], r["algorithm"], r["dtype"], r["op"], bool(r["in_place"]),
               r["size_bytes"])
        points.setdefault(key, []).append(r)
    out = []
    for jobs in points.values():
        times = [float(j["time_us"]) for j in jobs]
        median = statistics.median(times)
        reasons = list(dict.fromkeys(reason for j in jobs if j.get("unreliable")
                                     for reason in str(j["unreliable"]).split("; ")))
        first = jobs[0]
        algbw = float(first["size_bytes"]) / median / 1e3 if median > 0 else 0.0
        factor = float(first["busbw_gbps"]) / float(first["algbw_gbps"]) if float(first["algbw_gbps"]) else 0.0
        out.append({**first, "job": None, "jobs": len(jobs), "time_us": median, "algbw_gbps": algbw,
                    "busbw_gbps": algbw * factor,
                    "wrong": sum(int(j["wrong"]) for j in jobs),
                    "iterations": sum(int(j["iterations"]) for j in jobs),
                    "spread_pct": 100 * (max(times) - min(times)) / median if median > 0 else 0.0,
                    "unreliable": "; ".join(reasons)})
    return out


def pair(rows: list[dict]) -> list[list[dict | None]]:
    """Rows of one table (both modes, any order) as lines: per size in order of first appearance,
    [out-of-place, in-place] (either None where not measured), or one half where only one mode is."""
    modes = sorted({bool(r["in_place"]) for r in rows})
    sizes: dict[int, dict] = {}
    for r in rows:
        sizes.setdefault(r["size_bytes"], {})[bool(r["in_place"])] = r
    return [[by_mode.get(m) for m in modes] for by_mode in sizes.values()]
