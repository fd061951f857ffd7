"""`commbench model predict` as a Python API: a request (the shape, a fitted model or given links, the
collectives and sizes) checked whole and answered with one table of predictions per collective, the
notes on what the model left undetermined, and which (collective, algorithm) were left out and why.
The tables are commbench.analysis.model.predict's; the CLI prints them and writes them as a folder.

    from commbench.analysis.model.at_scale import Request, predict_at_scale
    p = predict_at_scale(Request(nodes=64, ranks_per_node=8, model="model.json", inter="50,5",
                                 collectives=["all_reduce"], sizes=[1 << 20, 1 << 30]))
    print(p.source, p.tables["all_reduce"])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from commbench.algorithms.base import SEGMENT_BYTES
from commbench.analysis.model.costs import Params, Shape
from commbench.analysis.model.predict import check_scale, links, predict, predicted, runs_at, undetermined
from commbench.errors import InputError
from commbench.options import MAX_PREDICT_RANKS


@dataclass
class Request:
    nodes: int
    ranks_per_node: int
    collectives: list[str]  # resolved names (commbench.collectives)
    sizes: list[int]
    model: str | None = None  # a model.json from `model fit` ...
    backend: str | None = None  # ... and which of its backends (or one group)
    intra: str | None = None  # links given, "BW_GBPS,LAT_US": they replace the model's
    inter: str | None = None
    reduce_bw: float = 0.0  # without a model: the reduction's speed in GB/s (0: free)
    links_per_node: int | None = None
    segment: int = SEGMENT_BYTES


@dataclass
class Prediction:
    shape: Shape
    source: str  # where the parameters come from
    params: dict[str, Params]  # per engine
    tables: dict[str, pd.DataFrame]  # per collective (predict's columns); empty where nothing runs there
    notes: list[str] = field(default_factory=list)  # what the model left undetermined, and how it was judged
    dropped: dict[tuple[str, str], str] = field(default_factory=dict)  # (collective, algorithm) -> why left out

    def dropped_lines(self) -> list[str]:
        """One line per reason: the (collective, algorithms) it left out."""
        out = []
        for why in dict.fromkeys(self.dropped.values()):
            left = {c: sorted(a for (c2, a), w in self.dropped.items() if c2 == c and w == why) for c in self.tables}
            out.append(f"not predicted, as {why}: " + "; ".join(f"{c} {', '.join(a)}" for c, a in left.items() if a))
        return out


def check_links(value: int | None) -> None:
    """--links-per-node: None, or 1 to MAX_PREDICT_RANKS (every command of the model takes it)."""
    if value is not None and not 1 <= value <= MAX_PREDICT_RANKS:
        raise InputError(f"invalid --links-per-node {value}: it must be from 1 to {MAX_PREDICT_RANKS}")


def check(r: Request) -> None:
    """InputError where the request is not one a prediction can answer (before anything is computed)."""
    if r.nodes < 1 or r.ranks_per_node < 1:
        raise InputError("--nodes and --ranks-per-node must be at least 1")
    check_scale(r.nodes, r.ranks_per_node)
    check_links(r.links_per_node)
    if not (0 <= r.reduce_bw < math.inf):
        raise InputError(f"invalid --reduce-bw {r.reduce_bw}: a reduction speed in GB/s, 0 (free) or more")
    if r.model is not None and r.reduce_bw:
        raise InputError("--reduce-bw sets the reduction speed without --model; the model file has its own")
    check_scale(r.nodes, r.ranks_per_node, len(r.sizes), len(r.collectives))


def parameters(r: Request) -> tuple[dict, str, int, dict]:
    """The parameters per engine (engine -> name -> value): a fitted model's groups of one backend
    (every estimate, determined or not: `undetermined` judges them), the links given replacing theirs
    (without a model: the step algorithms'); where they come from; the default links per node; and
    per engine its fit (None without a model)."""
    from commbench.analysis.model.model_file import load_model

    if r.model is None and (r.intra is None or r.inter is None):
        raise InputError("give --model, or both --intra and --inter")
    if r.model is not None:
        fitted = load_model(r.model, r.backend)
        values = {f.engine: f.estimates() for f in fitted}
        fits = {f.engine: f for f in fitted}
        source = f"{r.model} ({', '.join(f.group for f in fitted)})"
        default_links = fitted[0].links_per_node
    else:
        values = {"steps": {"gamma": 1 / (r.reduce_bw * 1e9) if r.reduce_bw > 0 else 0.0}}
        fits = {"steps": None}
        source, default_links = f"--reduce-bw {r.reduce_bw}", r.ranks_per_node
    for cls, text in (("intra", r.intra), ("inter", r.inter)):  # given links replace the model's
        if text is not None:
            for v in values.values():
                v[f"alpha_{cls}"], v[f"beta_{cls}"] = links(text, f"--{cls}")
            source += f" --{cls} {text}"
    shape = Shape(r.nodes, r.ranks_per_node)
    values = {e: v for e, v in values.items() if any(runs_at(a, shape) for a in predicted(e))}
    if not values:
        raise InputError(f"the model's algorithms do not run on {r.nodes} nodes (the kernels run the ranks of one node)")
    return values, source, default_links, {e: fits[e] for e in values}


def predict_at_scale(r: Request) -> Prediction:
    """Every collective's predictions at the request's shape; InputError where nothing can be predicted."""
    check(r)
    values, source, default_links, fits = parameters(r)
    shape = Shape(r.nodes, r.ranks_per_node, "block", r.links_per_node or default_links)
    given = {f"{k}_{cls}" for cls, text in (("intra", r.intra), ("inter", r.inter)) if text is not None
             for k in ("alpha", "beta")}
    notes, dropped = undetermined(fits, values, shape, r.collectives, r.sizes, r.segment, given)
    params = {engine: Params.from_values(v) for engine, v in values.items()}
    tables = {c: predict(params, shape, c, r.sizes, r.segment) for c in r.collectives}
    tables = {c: t[[(c, a) not in dropped for a in t.algorithm]] if len(t) else t for c, t in tables.items()}
    if all(t.empty for t in tables.values()):
        if dropped:
            (_, a), why = next(iter(dropped.items()))
            raise InputError(f"cannot predict {', '.join(r.collectives)} (e.g. {a}): "
                             f"{why.replace('they depend', 'it depends', 1)}")
        raise InputError(f"the model's algorithms ({', '.join(values)}) have no {', '.join(r.collectives)} at "
                         f"{r.nodes} node(s) x {r.ranks_per_node}")
    return Prediction(shape, source, params, tables, notes, dropped)
