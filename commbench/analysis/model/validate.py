"""Held-out validation of the cost model (`commbench model validate`): refit without one size
(then without one algorithm) at a time and predict what was left out, the honest measure of a
model; the error overall and per size band."""

from __future__ import annotations

import pandas as pd

from commbench.analysis.model.costs import Shape
from commbench.analysis.model.fit import NAMES, fit_backend, inter_node, predicted_s, usable_rows
from commbench.analysis.model.predict import needed
from commbench.errors import InputError

HELD_OUT_MIN_BYTES = 64 * 1024  # the docs' (benchmarks/model_accuracy.py) held-out figure: points of 64 KB and up


def held_out(rows: pd.DataFrame, by: str, links_per_node: int = 1) -> pd.DataFrame:
    """Refit without each value of `by` (size_bytes or algorithm) in turn; the left-out points
    with their predictions."""
    rows = usable_rows(rows)
    out = []
    for group in sorted(rows.group.unique()):
        sub = rows[rows.group == group]
        for value in sorted(sub[by].unique()):
            train, test = sub[sub[by] != value], sub[sub[by] == value]
            try:
                lend = inter_node(rows[rows[by] != value], group, links_per_node) if (sub.nodes > 1).any() else None
                model = fit_backend(train, group, links_per_node, borrowed=lend)
            except InputError:
                continue
            if any(model.estimates()[k] is None for k in NAMES if _needs(k, test)):
                continue  # the rest cannot inform a parameter the left-out points need
            pred = predicted_s(model.to_params(), test, links_per_node, model.lanes)
            out.append(test.assign(predicted_us=pred * 1e6, held_out=f"{by}={value}"))
    if not out:
        return pd.DataFrame()
    result = pd.concat(out, ignore_index=True)
    result["error"] = result.predicted_us / result.time_us - 1
    return result


def _needs(name: str, test: pd.DataFrame) -> bool:
    """Whether the left-out points use the parameter, as a prediction at their shapes would
    (uninformed, the memory term is left out: every byte costs the cached β, γ)."""
    shapes = test[["nodes", "ranks_per_node", "collective"]].drop_duplicates().itertuples(index=False)
    return any(needed(name, Shape(int(n), int(r)), [c]) for n, r, c in shapes)


# validate's size bands: (name, its edges in words, sizes in it)
BANDS = (("small", "<= 4 KB", lambda s: s <= 4096), ("medium", "4 KB - 1 MB", lambda s: (s > 4096) & (s < 1 << 20)),
         ("large", ">= 1 MB", lambda s: s >= 1 << 20))


def summary(errors: pd.DataFrame) -> dict:
    """Median and p90 absolute held-out error, all points, points of HELD_OUT_MIN_BYTES and up,
    and per size band (BANDS)."""
    if errors.empty:
        return {}

    def stats(e: pd.DataFrame) -> dict:
        return {"points": len(e), "median_abs_error": float(e.error.abs().median()) if len(e) else None,
                "p90_abs_error": float(e.error.abs().quantile(0.9)) if len(e) else None}

    big = errors[errors.size_bytes >= HELD_OUT_MIN_BYTES]
    return stats(errors) | {"points_64k_up": len(big), "median_abs_error_64k_up": stats(big)["median_abs_error"],
                            "bands": [{"band": name, "edges": edges} | stats(errors[inside(errors.size_bytes)])
                                      for name, edges, inside in BANDS]}
