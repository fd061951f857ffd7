"""The topology comparison: per size, the library's own call, the flat ring in rank order, the
ring in topology order and the two-level algorithm (its steps library calls inside the nodes too,
or the ring kernel there: hierarchical_kernel) side by side, with speedups over the flat ring and
the inter-node bytes each moved (measured, and the analytical count).

Reads rows only (results files, or the rows a run returned), like report and compare.
"""

from __future__ import annotations

import pandas as pd

REFERENCE = "ring"  # the flat ring in rank order, which the speedups are over
TOPOLOGY_AWARE = ("ring_topology", "hierarchical", "hierarchical_kernel")  # the report's chart of them too
VARIANTS = ("native", REFERENCE, *TOPOLOGY_AWARE)
GROUP = ["label", "collective", "backend", "dtype", "op", "in_place", "placement", "nodes", "ranks_per_node"]


def topology_comparison(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per GROUP + size with, per variant present: time_us:<v>, speedup:<v> (time of the
    flat ring / time of v) and the inter-node bytes per call (measured and expected). Empty
    when the rows hold no multi-node points of at least two variants."""
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
    wide = rows.drop_duplicates(keys + ["algorithm"]).set_index(keys + ["algorithm"])[values].unstack("algorithm")
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


def table_rows(comparison: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Header and text cells for a terminal or HTML table."""
    variants = [c.split(":", 1)[1] for c in comparison.columns if c.startswith("time_us:")]
    header = ["collective", "placement", "nodes×G", "size"] + [f"{v} ms" for v in variants]
    header += [f"{v} ×" for v in variants if v != REFERENCE and f"speedup:{v}" in comparison]
    header += [f"{v} MB" for v in variants]
    body = []
    for _, r in comparison.iterrows():
        cells = [r.collective, r.placement or "-", f"{int(r.nodes)}×{_int(r.ranks_per_node)}", _size(r.size_bytes)]
        cells += [_num(r[f"time_us:{v}"] / 1e3, 2) for v in variants]
        cells += [_num(r[f"speedup:{v}"], 2) for v in variants if v != REFERENCE and f"speedup:{v}" in comparison]
        for v in variants:
            measured = r.get(f"internode_bytes_measured:{v}", float("nan"))
            expected = r.get(f"internode_bytes_expected:{v}", float("nan"))
            cells.append(f"{_num(measured / 1e6, 1)} ({_num(expected / 1e6, 1)})")
        body.append(cells)
    return header, body


def _num(x, digits):
    return "-" if x is None or pd.isna(x) else f"{x:.{digits}f}"


def _int(x):
    return "?" if x is None or pd.isna(x) or x == "" else str(int(x))


def _size(n):
    from commbench.spec import format_size

    return format_size(int(n))
