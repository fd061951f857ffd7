"""The α-β-γ cost model: fit it to measured sweeps (fit.py), predict any scale (predict.py),
from each algorithm's own cost() (costs.py dispatches to them)."""

from __future__ import annotations

import pandas as pd

from commbench.algorithms.base import SEGMENT_BYTES


def load_rows(paths: list[str]) -> pd.DataFrame:
    """Rows of result folders, each with the segment size its run used. A run found twice (given
    twice, or a copy of its folder) is refused: its points would count twice, and the fit's intervals
    would narrow as if they had been measured twice."""
    from commbench.folder.load import load_runs, refuse_repeats

    rows, metas = load_runs(paths)
    refuse_repeats([(m["run_id"], d) for d, m in metas if m.get("run_id") is not None],
                   "its points would count twice in the fit")
    segment = {m.get("run_id"): (m.get("spec") or {}).get("segment_bytes") for _, m in metas}
    rows["segment_bytes"] = rows.run_id.map(segment).fillna(SEGMENT_BYTES).astype(int)
    return rows
