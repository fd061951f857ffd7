"""Fit the cost model (commbench.analysis.model.costs) to measured rows, per group: least squares on
log(predicted / measured), so a 10 % miss weighs the same at 8 B and at 64 MB, over log
parameters, so each stays positive. Uncertainty from the Jacobian at the optimum
(σ² (JᵀJ)⁻¹ of the log parameters, a 95 % interval per parameter). A parameter the rows cannot
inform (no multi-node points: no inter-node α, β; no working set beyond the cache: no memory
term), or whose interval is unbounded, or whose value no machine has, is not determined: left
out of the parameters, with why and what data would determine it (determined.py).

A group is a backend's algorithms of one engine (Algorithm.engine): "mpi" holds the algorithms
whose steps are library calls, "mpi/kernel" the kernels, whose steps are flag hand-offs (an α
about 100x smaller, that one fit of both would average away).

Mixed engines. No kernel crosses a node: between nodes every algorithm's messages are the
backend's point-to-point calls (hierarchical_kernel runs the ring kernel inside each node and the
backend's ring between them). So the inter-node α', β' have one owner, the backend's step group:
the other groups of that backend take them from its fit (Fit.borrowed names the group) and hold
them fixed while fitting their own α, β, γ, which is what the mixed algorithm's intra-node stages
cost. Where the step group has no multi-node points, a kernel group fits α', β' from its own
(hierarchical_kernel's) multi-node points, or leaves them uninformed.

Held-out error, the honest measure of a model: validate.py. The model file (model.json): model_file.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from commbench.analysis.model.costs import MEMORY, Params, Shape, modelled, time_s
from commbench.analysis.model.determined import bounded, log_covariance, log_sigma, not_informed, verdict
from commbench.errors import InputError
from commbench.folder import limits
from commbench.options import MAX_PREDICT_RANKS
from commbench.algorithms import ALGORITHMS
from commbench.algorithms.base import SEGMENT_BYTES
from commbench.algorithms.hierarchical_kernel import IN_ORDER

NAMES = tuple(Params.__dataclass_fields__)
START = {"alpha_intra": 1e-5, "beta_intra": 1e-9, "alpha_inter": 1e-5, "beta_inter": 1e-8, "gamma": 1e-10,
         "mem_factor": 1.0, "cache_bytes": 64e6}
INTER = ("alpha_inter", "beta_inter")  # the backend's point-to-point between nodes, whatever the engine
STEPS = "steps"  # Algorithm.engine of the algorithms whose group is the backend's own name
MAX_PARAM = 1e15  # a parameter a model file holds (seconds, s/B, bytes: far beyond any machine's)


def group_of(backend: str, algorithm: str) -> str:
    """The fit an algorithm's points belong to: "<backend>", or "<backend>/<engine>" for an
    engine other than steps."""
    engine = ALGORITHMS[algorithm].engine
    return backend if engine == STEPS else f"{backend}/{engine}"


def split_group(group: str) -> tuple[str, str]:
    """"mpi" -> ("mpi", "steps"); "mpi/kernel" -> ("mpi", "kernel")."""
    backend, _, engine = group.partition("/")
    return backend, engine or STEPS


@dataclass
class Fit:
    backend: str
    params: dict  # name -> value (None: not determined by these rows: see undetermined)
    rel_std: dict  # name -> σ of its log (about its relative standard error; None: unbounded, or not fitted)
    points: int
    median_error: float  # |predicted / measured - 1| over the fitted points
    p90_error: float
    links_per_node: int
    lanes: int  # intra-node copies/reductions at full speed at once, chosen by the fit
    algorithms: list = field(default_factory=list)
    engine: str = STEPS  # the algorithms' Algorithm.engine
    borrowed: dict = field(default_factory=dict)  # name -> the group whose fit gave it (held fixed here)
    # name -> {"estimate", "why", "needs"}: not determined by the points (commbench.analysis.model.determined);
    # its params entry is None
    undetermined: dict = field(default_factory=dict)
    # name -> name -> covariance of the logs of the informed parameters (σ² (JᵀJ)⁺ over the directions the
    # points constrain: a parameter with an unbounded σ has a finite entry here, right only for predictions
    # that do not move along its weak direction, which predict.undetermined leaves out); what a prediction's
    # interval is made of (commbench.analysis.model.spread); {} in older model files
    log_cov: dict = field(default_factory=dict)

    @property
    def group(self) -> str:
        return self.backend if self.engine == STEPS else f"{self.backend}/{self.engine}"

    def estimates(self) -> dict:
        """Every value the fit found, determined or not (None: not informed); what held-out
        validation predicts with, and `model predict` after judging what depends on which
        (commbench.analysis.model.predict.undetermined)."""
        return self.params | {k: u.get("estimate") for k, u in self.undetermined.items() if u.get("estimate") is not None}

    def to_params(self) -> Params:
        """The estimates as Params (one not informed costs nothing)."""
        return Params.from_values(self.estimates())


def _numbers(rows: pd.DataFrame, name: str) -> pd.Series:
    """rows[name] as numbers, NaN where a cell is not one or the column is missing (a fuzzed or
    hand-edited results.csv)."""
    return pd.to_numeric(rows.get(name, pd.Series(np.nan, index=rows.index)), errors="coerce")


# library choices whose time the cost formulas do not model: a kernel's small call that ran one-shot
# (not the ring's or the tree's cost), hierarchical_kernel's all-reduce run in order (not pipelined)
UNMODELLED = ("oneshot", IN_ORDER)


def usable_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Measured, correct points of modelled algorithms with what the model needs."""
    rows = rows[rows.algorithm.isin(modelled()) & (pd.to_numeric(rows.wrong, errors="coerce").fillna(1) == 0)]
    rows = rows[pd.to_numeric(rows.time_us, errors="coerce") > 0].copy()
    big = pd.to_numeric(rows.world_size, errors="coerce") > MAX_PREDICT_RANKS
    if big.any():  # a row's message pattern is built rank by rank: absurd sizes would take hours and all memory
        raise InputError(f"world_size {rows.world_size[big].iloc[0]} is more than the model takes (at most "
                         f"{MAX_PREDICT_RANKS} ranks, as model predict)")
    if "predicted" in rows:
        rows = rows[pd.to_numeric(rows.predicted, errors="coerce").fillna(0) == 0]
    if "split" in rows:  # --split: groups at once, contending for links: not a collective alone
        rows = rows[rows.split.fillna("").astype(str) == ""]
    if "library_choice" in rows:  # what the formulas do not model: UNMODELLED
        rows = rows[~rows.library_choice.astype(str).isin(UNMODELLED)]
    limits.FIT_RANKS.check("model fit", int(pd.to_numeric(rows.world_size, errors="coerce").fillna(0).sum()))
    rows["nodes"] = _numbers(rows, "nodes").fillna(1).astype(int)
    rows["ranks_per_node"] = _numbers(rows, "ranks_per_node").fillna(rows.world_size // rows.nodes).astype(int)
    rows["placement"] = rows.get("placement", pd.Series("block", index=rows.index)).fillna("").replace("", "block")
    if "segment_bytes" not in rows:
        rows["segment_bytes"] = SEGMENT_BYTES
    rows["in_place"] = pd.to_numeric(rows.get("in_place", pd.Series(1, index=rows.index)), errors="coerce").fillna(1).astype(bool)
    rows["group"] = [group_of(b, a) for b, a in zip(rows.backend, rows.algorithm)]
    return rows[rows.nodes * rows.ranks_per_node == rows.world_size]


def usable(rows: pd.DataFrame) -> pd.DataFrame:
    """usable_rows, refused in one line where there are none."""
    rows = usable_rows(rows)
    if rows.empty:
        raise InputError(f"no usable points: the model fits measured, correct points of {', '.join(modelled())}")
    return rows


CALL = ["algorithm", "collective", "nodes", "ranks_per_node", "placement", "size_bytes", "segment_bytes", "in_place"]


def calls_of(rows: pd.DataFrame, links: int, lanes: int | None = None) -> tuple[list[tuple], np.ndarray]:
    """The distinct modelled calls of rows (time_s's arguments after the parameters; a point measured
    in several jobs is one call) and, for each row, the index of its call: what predicted_s evaluates."""
    index: dict[tuple, int] = {}
    of_row = [index.setdefault((a, c, Shape(int(m), int(g), p, links, lanes), s, int(seg), bool(ip)), len(index))
              for a, c, m, g, p, s, seg, ip in rows[CALL].itertuples(index=False, name=None)]
    return list(index), np.array(of_row, dtype=int)


def predicted_s(params: Params, rows: pd.DataFrame, links: int, lanes: int | None = None,
                calls: tuple[list[tuple], np.ndarray] | None = None) -> np.ndarray:
    """Modelled seconds of each row; calls: calls_of(rows, links, lanes), when evaluated many times."""
    distinct, of_row = calls or calls_of(rows, links, lanes)
    return np.array([time_s(params, *call) for call in distinct])[of_row]


def fit_backend(rows: pd.DataFrame, group: str, links_per_node: int = 1, lanes: int | None = None,
                borrowed: tuple[str, dict] | None = None) -> Fit:
    """Least squares for one group of usable_rows ("mpi": the backend's step algorithms, or
    "mpi/kernel"); lanes (intra-node contention) is tried at every power of two up to the ranks
    per node, and the best kept, unless given. borrowed: (group, parameters) held fixed at
    another group's values (the inter-node ones: see the module)."""
    rows = rows[rows.group == group]
    if len(rows) < 3:
        raise InputError(f"{group!r}: {len(rows)} usable points; the fit needs at least 3 "
                         f"(measured, correct points of {', '.join(modelled())})")
    if lanes is None:
        most = int(rows.ranks_per_node.max())
        candidates = sorted({min(2**k, most) for k in range(most.bit_length() + 1)})
        return min((fit_backend(rows, group, links_per_node, c, borrowed) for c in candidates),
                   key=lambda f: (f.p90_error + f.median_error))
    source, fixed = borrowed or ("", {})
    start = START | fixed
    measured = rows.time_us.to_numpy() / 1e6
    calls = calls_of(rows, links_per_node, lanes)
    base = predicted_s(Params.from_values(start), rows, links_per_node, lanes, calls)
    active = [k for k in NAMES if k not in fixed  # a parameter no point depends on cannot be fitted
              if np.any(np.abs(predicted_s(Params.from_values(start | {k: START[k] * 2}), rows, links_per_node, lanes,
                                           calls) - base) > 1e-15)]

    def residual(x):
        with np.errstate(over="ignore"):  # times of 1e300 s drive a parameter to inf: judged not determined
            values = np.exp(x)
        pred = predicted_s(Params.from_values(fixed | dict(zip(active, values))), rows, links_per_node, lanes, calls)
        return np.log(np.maximum(pred, 1e-15) / measured)

    x0 = np.log([START[k] for k in active])
    best = min((least_squares(residual, x0 + shift, method="trf") for shift in (0.0, 3.0)), key=lambda r: r.cost)
    # a cache larger than every working set leaves the memory term without any effect
    informed = (np.linalg.norm(best.jac, axis=0) > 1e-9) | ~np.isin(active, MEMORY)
    fitted = fixed | {k: float(v) for k, v, used in zip(active, np.exp(best.x), informed) if used}
    dof = len(rows) - len(active)
    sigma, partner, direction = log_sigma(best.jac, 2 * best.cost / max(1, dof))
    share = np.abs(best.jac).max(axis=0)  # d log t / d log p: the largest share of a point's time the term has
    errors = np.abs(np.exp(best.fun) - 1)
    sizes = (float(rows.size_bytes.min()), float(rows.size_bytes.max()))
    undetermined = {}
    for i, k in enumerate(active):
        if k in fitted:
            u = verdict(k, fitted[k], float(sigma[i]), None if partner[i] is None else active[partner[i]],
                        float(share[i]), points=len(rows), fitted=len(active), span=sizes,
                        partner_share=1.0 if partner[i] is None else float(share[partner[i]]),
                        median_error=float(np.median(errors)),
                        direction=None if direction[i] is None else
                        {a: float(d) for a, d in zip(active, direction[i]) if abs(d) > 1e-6})
            if u:
                if u["estimate"] is not None and u["estimate"] > MAX_PARAM:
                    u["estimate"] = None  # beyond what a model file holds
                undetermined[k] = u
    undetermined |= {k: not_informed(k) for k in NAMES if k not in fitted}
    finite = {k: float(sigma[i]) for i, k in enumerate(active) if k in fitted and bounded(sigma[i])}
    # every informed parameter, over the directions the points constrain (determined.log_covariance)
    sure = [i for i, k in enumerate(active) if k in fitted and np.linalg.norm(best.jac[:, i]) > 0]
    cov = log_covariance(best.jac, 2 * best.cost / max(1, dof), sure)
    backend, engine = split_group(group)
    return Fit(backend, {k: fitted[k] if k in fitted and k not in undetermined else None for k in NAMES},
               {k: finite.get(k) for k in NAMES}, len(rows), float(np.median(errors)), float(np.percentile(errors, 90)),
               links_per_node, lanes, sorted(rows.algorithm.unique()), engine, {k: source for k in fixed},
               {k: undetermined[k] for k in NAMES if k in undetermined},
               {active[i]: {active[j]: float(cov[a, b]) for b, j in enumerate(sure)} for a, i in enumerate(sure)})


def lent(steps: Fit | None) -> tuple[str, dict] | None:
    """What a backend's step fit lends its other groups: (its group, its α', β'), if it has them."""
    if steps is None or any(steps.params[k] is None for k in INTER):
        return None
    return steps.group, {k: steps.params[k] for k in INTER}


def inter_node(rows: pd.DataFrame, group: str, links_per_node: int = 1) -> tuple[str, dict] | None:
    """What `group` borrows, from its backend's step group fitted on these rows (None for a step
    group, or where the step group's rows cannot inform α', β')."""
    backend, engine = split_group(group)
    steps = rows[rows.group == backend]
    if engine == STEPS or len(steps) < 3 or not (steps.nodes > 1).any():
        return None
    return lent(fit_backend(steps, backend, links_per_node))


def fit(rows: pd.DataFrame, links_per_node: int = 1) -> list[Fit]:
    """One fit per group (backend and engine) of the rows: the step groups first, whose inter-node
    parameters the backend's other groups borrow (see the module)."""
    rows = usable(rows)
    fits: dict[str, Fit] = {}
    for g in sorted(rows.group.unique(), key=lambda g: (split_group(g)[1] != STEPS, g)):
        backend, engine = split_group(g)
        fits[g] = fit_backend(rows, g, links_per_node, borrowed=None if engine == STEPS else lent(fits.get(backend)))
    return [fits[g] for g in sorted(fits)]
