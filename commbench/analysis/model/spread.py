"""How sure a prediction is: the 95 % interval of a predicted time from the fit's parameter
covariance (Fit.log_cov: σ² (JᵀJ)⁺ of the log parameters), by the delta method. With
g = ∂t/∂log p (central differences), var t ≈ gᵀ C g, and as the fit is in logs the interval is
t·exp(±Z95·√(gᵀCg)/t).

What it covers: how well the fit's points pin its parameters down, carried to the shape and size
asked (an extrapolation to many nodes widens it where the points do not pin the terms that grow).
What it does not: the points' own scatter about the model (Fit.median_error, p90_error), and the
model's form. Links given on the command line (--intra, --inter) count as exact. The covariance is
over the directions the fit's points constrain, so it is right for the predictions that do not move
along a direction they leave free (two parameters traded off: the only ones predict.undetermined
keeps). A prediction that moves with a parameter the covariance lacks (not informed by the points,
or borrowed from another group's fit) has no interval, and says which.
"""

from __future__ import annotations

import math
from typing import Callable

from commbench.analysis.model.determined import UNBOUNDED, Z95

STEP = 1e-4  # the change of log p of a central difference
DEPENDS = 1e-6  # |∂ log t / ∂ log p| under this: the prediction does not move with p


def interval(time_of: Callable[[dict], float | None], values: dict, cov: dict,
             exact: set[str] = frozenset()) -> tuple[float, float] | str:
    """(low, high) of time_of(values) (seconds), or why there is none. time_of: the prediction
    under parameter values (name -> value); cov: Fit.log_cov; exact: parameters taken as given."""
    t = time_of(values)
    if t is None or not math.isfinite(t):
        return "no prediction"
    if t == 0:  # nothing to do (one rank): exactly nothing, whatever the parameters
        return 0.0, 0.0
    grad = {}
    for name, value in values.items():
        if name in exact or not value:
            continue
        up, down = (time_of(values | {name: value * math.exp(s * STEP)}) for s in (1, -1))
        if up is None or down is None:
            return f"the prediction has no value when {name} moves"
        g = (up - down) / (2 * STEP)
        if abs(g) > DEPENDS * t:
            if name not in cov:
                return (f"it moves with {name}, whose uncertainty this fit does not have (no point of it informs "
                        "it, or it is borrowed from another group's fit)")
            grad[name] = g
    var = sum(grad[a] * cov[a][b] * grad[b] for a in grad for b in grad)
    half = Z95 * math.sqrt(max(var, 0.0)) / t
    if half > UNBOUNDED:  # a factor beyond e^20 either side: the fit's points do not bound this prediction
        return "its interval is unbounded: the fit's points barely constrain what it depends on"
    return t * math.exp(-half), t * math.exp(half)
