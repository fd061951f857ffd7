"""The report's series: the rows that make one line (a run × backend × algorithm × dtype × op ×
buffer mode × ranks), the readable name of each, and its style, built once from every row of the
report so that one series has the same name, colour and dash in every chart. Also when an axis
is logarithmic: where the values on it span a decade or more.

Names leave out what every series of the report shares (said once, in `shared`): two `ci` sweeps
read "ci_a/native · ring" rather than "ci_a/native · mpi ring · float32 sum · out-of-place · 2 ranks".
Every string is escaped (page.esc) before it reaches a chart.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from plotly.colors import qualitative

from commbench.analysis.report.page import esc

SERIES = ["run", "backend", "algorithm", "dtype", "op", "mode", "world_size"]
OP = SERIES.index("op")
SMALL_PALETTE = qualitative.Plotly  # plotly's own 10 colours, in its order
LARGE_PALETTE = qualitative.Dark24  # past 10 series: 24 colours that stay apart on white
DASHES = ("solid", "dash", "dot", "dashdot")  # past the palette: the colours again, dashed
WRONG_COLOUR = "#d00000"  # a point with wrong elements, in every series (drawn as a cross)


def _plain(value):
    """A key's value as the same Python value whatever column type it was read as (2, 2.0, np.int64(2))."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else value


def key_of(values) -> tuple:
    return tuple(_plain(v) for v in values)


def keys(rows: pd.DataFrame, columns=SERIES) -> list[tuple]:
    """The distinct series keys of the rows, in the report's order (as text, so mixed types sort)."""
    found = {key_of(k) for k in rows[list(columns)].itertuples(index=False, name=None)}
    return sorted(found, key=lambda k: tuple(map(str, k)))


class Series:
    """Name and style of every series of a report, fixed from all its rows before any chart."""

    def __init__(self, rows: pd.DataFrame):
        self.keys = keys(rows)
        # the colour is the series' but for its op, so a run's algorithm has one colour in every collective's
        # charts (all_gather has no op, all_reduce a sum); two ops of one colour differ by dash
        hues = sorted({self._hue(k) for k in self.keys}, key=lambda k: tuple(map(str, k)))
        palette = SMALL_PALETTE if len(hues) <= len(SMALL_PALETTE) else LARGE_PALETTE
        ops: dict[tuple, list] = {}
        for k in self.keys:
            if k[OP] not in ("none", ""):
                ops.setdefault(self._hue(k), []).append(k[OP])
        self._style = {}
        for k in self.keys:
            i = hues.index(self._hue(k))
            shade = ops[self._hue(k)].index(k[OP]) if k[OP] not in ("none", "") else 0
            self._style[k] = (palette[i % len(palette)], DASHES[(i // len(palette) + shade) % len(DASHES)])
        column = {c: {k[i] for k in self.keys} for i, c in enumerate(SERIES)}
        some_without_op = bool(column["op"] & {"none", ""})
        column["op"] -= {"none", ""}  # collectives without an op (all_gather...) say nothing of it
        self.varies = {c for c, values in column.items() if len(values) > 1} | {"run"}
        self.common = {c: next(iter(v)) for c, v in column.items() if len(v) == 1 and c not in self.varies
                       and not (c == "op" and some_without_op)}  # "every series: sum" would not be true

    @staticmethod
    def _hue(key: tuple) -> tuple:
        return key[:OP] + key[OP + 1:]

    def colour(self, key: tuple) -> str:
        return self._style[key_of(key)][0]

    def dash(self, key: tuple) -> str:
        return self._style[key_of(key)][1]

    def line(self, key: tuple) -> dict:
        return {"color": self.colour(key), "dash": self.dash(key)}

    def name(self, key: tuple, versus: str | None = None) -> str:
        """"ci_a/native · ring · in-place": the run and what tells the series apart from the others
        (versus: "ring vs native" in a speedup chart); escaped."""
        run, backend, algo, dtype, op, mode, world = key_of(key)
        algo = f"{algo} vs {versus}" if versus else algo
        parts = [run, " ".join(str(v) for c, v in (("backend", backend), ("algorithm", algo))
                               if c in self.varies or (c == "algorithm" and versus))]
        kind = " ".join(str(v) for c, v in (("dtype", dtype), ("op", op))
                        if c in self.varies and v not in ("none", ""))
        parts += [kind, mode if "mode" in self.varies else "",
                  f"{world} ranks" if "world_size" in self.varies else ""]
        return esc(" · ".join(str(p) for p in parts if p != ""))

    def shared(self) -> str:
        """What every series has in common ("mpi · float32 sum · out-of-place · 2 ranks"), escaped."""
        c = self.common
        parts = [" ".join(str(c[k]) for k in ("backend", "algorithm") if k in c),
                 " ".join(str(c[k]) for k in ("dtype", "op") if k in c),
                 c.get("mode"), f"{c['world_size']} ranks" if "world_size" in c else None]
        return esc(" · ".join(str(p) for p in parts if p not in (None, "")))


def decades(values) -> float:
    """How many decades the positive values span (0 for none or one)."""
    v = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(float)
    v = v[np.isfinite(v) & (v > 0)]
    return float(np.log10(v.max() / v.min())) if len(v) else 0.0


def log_scale(values) -> bool:
    """A logarithmic axis where the positive values span a decade or more (a CPU run's 0.1 GB/s
    next to an imported 440 GB/s would otherwise lie flat at 0)."""
    return decades(values) >= 1
