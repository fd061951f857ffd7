"""The topology comparison: per size, the library's own call, the flat ring in rank order, the
ring in topology order and the two-level algorithm (its steps library calls inside the nodes too,
or the ring kernel there: hierarchical_kernel) side by side, with speedups over the flat ring and
the inter-node bytes each moved (measured, and the analytical count).

Reads rows only (results files, or the rows a run returned), like report and compare.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from commbench.library_calls import LIBRARY_CALLS

REFERENCE = "ring"  # the flat ring in rank order, which the speedups are over
TOPOLOGY_AWARE = ("ring_topology", "hierarchical", "hierarchical_kernel")  # the report's chart of them too
VARIANTS = (*LIBRARY_CALLS, REFERENCE, *TOPOLOGY_AWARE)
# a comparison is within one results folder (a run's variants, side by side; an ab folder's two
# sides), one table per folder, label and the rest
GROUP = ["folder", "label", "collective", "backend", "dtype", "op", "in_place", "placement", "nodes", "ranks_per_node"]


def topology_comparison(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per GROUP + size with, per variant present: time_us:<v>, speedup:<v> (time of the
    flat ring / time of v) and the inter-node bytes per call (measured and expected), each the
    median over the run's jobs (--repeat). Empty when the rows hold no multi-node points of at least
    two variants. Rows without `folder` (not from load_runs) are one folder."""
    if "nodes" not in rows or "algorithm" not in rows:  # rows that do not say it have no multi-node point
        return pd.DataFrame()
    rows = rows[rows.algorithm.isin(VARIANTS) & (pd.to_numeric(rows.nodes, errors="coerce") > 1)].copy()
    if rows.empty or rows.algorithm.nunique() < 2:
        return pd.DataFrame()
    for col in GROUP:
        if col not in rows:
            rows[col] = ""
    rows[GROUP] = rows[GROUP].astype(object).fillna("")  # text and numbers alike: no dtype to upcast
    for col in ("internode_bytes_measured", "internode_bytes_expected"):
        if col not in rows:
            rows[col] = float("nan")
    keys = GROUP + ["size_bytes"]
    values = ["time_us", "internode_bytes_measured", "internode_bytes_expected"]
    for col in values:
        rows[col] = pd.to_numeric(rows[col], errors="coerce")
    wide = rows.groupby(keys + ["algorithm"], sort=False, dropna=False)[values].median().unstack("algorithm")
    out = pd.DataFrame(index=wide.index)
    present = [v for v in VARIANTS if v in rows.algorithm.unique()]
    for v in present:
        out[f"time_us:{v}"] = wide["time_us"][v]
    for v in present:
        if REFERENCE in present:
            out[f"speedup:{v}"] = out[f"time_us:{REFERENCE}"] / out[f"time_us:{v}"]
    for kind in ("measured", "expected"):
        col = f"internode_bytes_{kind}"
        for v in present:
            if v in wide[col]:
                out[f"{col}:{v}"] = wide[col][v]
    return out.reset_index()


def variants_of(comparison: pd.DataFrame) -> list[str]:
    return [c.split(":", 1)[1] for c in comparison.columns if c.startswith("time_us:")]


def group_tables(comparison: pd.DataFrame) -> list[dict]:
    """The comparison as text tables that fit 100 columns, one per group (collective, backend,
    dtype, op, mode, nodes x ranks per node, placement, folder and label): `title` (the label, else
    the folder's name, first); `header` and `body`
    (size, then each variant's time in µs with its speedup over the flat ring as a ratio);
    `bytes_header` and `bytes_body` (inter-node bytes per call, measured (expected)), empty
    where no variant counted any."""
    variants = variants_of(comparison)
    tables = []
    for key, group in comparison.groupby([c for c in GROUP if c in comparison], sort=False, dropna=False):
        g = dict(zip([c for c in GROUP if c in comparison], key if isinstance(key, tuple) else (key,)))
        header = ["size"] + [_wrap(v) for v in variants]
        body, bytes_body = [], []
        for _, r in group.iterrows():
            body.append([_size(r.size_bytes)] + [_time(r, v) for v in variants])
            bytes_body.append([_size(r.size_bytes)] + [_mb(r, v) for v in variants])
        counted = any(pd.notna(r.get(f"internode_bytes_{k}:{v}", float("nan")))
                      for _, r in group.iterrows() for v in variants for k in ("measured", "expected"))
        tables.append({"title": _title(g), "header": header, "body": body,
                       "bytes_header": ["size"] + [_wrap(v) for v in variants] if counted else [],
                       "bytes_body": bytes_body if counted else []})
    return tables


def _wrap(name: str) -> str:
    """A variant's name as a column header, one line per word: hierarchical_kernel -> hierarchical_ / kernel."""
    return name.replace("_", "_\n")


def _title(g: dict) -> str:
    name = g.get("label") or (Path(g["folder"]).name if g.get("folder") else None)  # the folder's, unlabelled
    parts = [name, g.get("collective"), g.get("backend"), g.get("dtype"),
             None if g.get("op") in ("", "none", None) else g.get("op"),
             None if g.get("in_place") in ("", None) else "in-place" if _true(g["in_place"]) else "out-of-place",
             f"{_int(g.get('nodes'))} nodes × {_int(g.get('ranks_per_node'))} ranks", g.get("placement") or None]
    return " · ".join(str(p) for p in parts if p not in (None, ""))


def _true(x) -> bool:
    return str(x).strip().lower() in ("1", "true", "1.0")


def _time(r, v: str) -> str:
    """The variant's time in µs and, but for the flat ring itself, its speedup over it as a ratio:
    `144800 (1.43×)` (above 1: faster than the flat ring)."""
    speedup = r.get(f"speedup:{v}", float("nan")) if v != REFERENCE else float("nan")
    return _us(r[f"time_us:{v}"]) + ("" if pd.isna(speedup) else f" ({speedup:.2f}×)")


def _us(x) -> str:
    """A time in µs with 4 significant figures or more: 0.1235, 12.35, 144.8, 206712."""
    if x is None or pd.isna(x):
        return "-"
    return f"{x:.4f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:.1f}" if x < 10_000 else f"{x:.0f}"


def _mb(r, v: str) -> str:
    measured = r.get(f"internode_bytes_measured:{v}", float("nan"))
    expected = r.get(f"internode_bytes_expected:{v}", float("nan"))
    return f"{_bytes(measured)} ({_bytes(expected)})"


def _bytes(x) -> str:
    """Bytes with a decimal suffix, 3 significant figures: 0, 512, 1.50K, 12.6M, 1.07G."""
    if x is None or pd.isna(x):
        return "-"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            v = x / scale
            return f"{v:.2f}{unit}" if v < 10 else f"{v:.1f}{unit}" if v < 100 else f"{v:.0f}{unit}"
    return f"{x:.0f}"


def _int(x):
    return "?" if x is None or pd.isna(x) or x == "" else str(int(x))


def _size(n):
    from commbench.spec import format_size

    return format_size(int(n))
