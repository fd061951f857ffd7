"""What a fit's points determine (issue 42, item 7): each parameter's 95 % interval from the
least-squares Jacobian, and the verdict "not determined" for a parameter whose interval is
unbounded (or spans more than MAX_SPAN), whose value no machine has (RANGES), or that no point
informs, with the reason and the data that would determine it.

The interval: the fit is over log parameters, so σ² (JᵀJ)⁻¹ is the variance of log p and the
95 % interval p·exp(±1.96 σ). It is computed with the columns scaled to unit norm and a
direction that the points do not constrain (a zero singular value) counted as infinite variance:
a pseudo-inverse drops such a direction, which gave the "± 0 %" of an unbounded bandwidth.
"""

from __future__ import annotations

import math

import numpy as np

from commbench.analysis.model.costs import MEMORY

Z95 = 1.96  # the 95 % interval: exp(±Z95 σ) around the fitted value
UNBOUNDED = 20.0  # Z95 σ beyond this (a factor e^20 either side): the interval counts as unbounded
MAX_SPAN = 10.0  # a parameter whose 95 % interval's ends are further apart than this factor is not determined
SINGULAR = 1e-9  # a scaled singular value below this (relative to the largest) constrains nothing
SMALL_SHARE = 0.05  # a term under this share of every point's time: the points cannot see it
# (low, high) of a parameter a machine can have, in its own unit
RANGES = {
    "alpha_intra": (1e-9, 1.0),  # 1 ns .. 1 s per message
    "alpha_inter": (1e-9, 1.0),
    "beta_intra": (1e-13, 1e-3),  # s/B: 10 TB/s .. 1 KB/s
    "beta_inter": (1e-13, 1e-3),
    "gamma": (1e-13, 1e-3),  # s per reduced byte: 10 TB/s .. 1 KB/s
    "mem_factor": (1e-6, 100.0),  # relative extra cost of a byte from memory
    "cache_bytes": (1e3, 1e12),
}
NOT_INFORMED = {  # name -> (why no point informs it, what would)
    "alpha_intra": ("no point has more than one rank per node", "a run with more than one rank per node"),
    "beta_intra": ("no point has more than one rank per node", "a run with more than one rank per node"),
    "alpha_inter": ("no point has more than one node", "a run with more than one node"),
    "beta_inter": ("no point has more than one node", "a run with more than one node"),
    "gamma": ("no point reduces", "points of a reducing collective (all_reduce, reduce_scatter)"),
    "mem_factor": ("no working set exceeds the cache", "sizes whose buffers on a node exceed its last-level cache"),
    "cache_bytes": ("no working set exceeds the cache", "sizes whose buffers on a node exceed its last-level cache"),
}


def _size(n: float) -> str:
    from commbench.spec import format_size

    n = int(n)
    for unit, suffix in ((1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if n >= unit and n % unit:
            return f"{n / unit:.3g}{suffix}"
    return format_size(n)


def _rate(bytes_per_s: float) -> str:
    for unit, name in ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "KB/s")):
        if bytes_per_s >= unit:
            return f"{bytes_per_s / unit:.4g} {name}"
    return f"{bytes_per_s:.4g} B/s"


def shown(name: str, value: float) -> str:
    """A parameter in the unit people read it in: µs, GB/s, a factor, bytes."""
    if name.startswith("alpha"):
        return f"{value * 1e6:.4g} µs" if value < 1e-3 else f"{value * 1e3:.4g} ms" if value < 1 else f"{value:.4g} s"
    if name == "mem_factor":
        return f"+{100 * value:.3g} %"
    if name == "cache_bytes":
        return f"{value / 1e6:.4g} MB"
    return _rate(1 / value) if value > 0 else "an unbounded rate"


def interval(name: str, value: float, log_sigma: float | None) -> str | None:
    """The 95 % interval as text ("16.2 GB/s to 25.5 GB/s"), low end first; None where unbounded."""
    if not bounded(log_sigma):
        return None
    ends = [shown(name, value * math.exp(s * Z95 * log_sigma)) for s in (-1, 1)]
    if name.startswith(("beta", "gamma")):
        ends.reverse()  # s/B -> B/s: the larger β, the lower rate
    return " to ".join(ends)


def bounded(log_sigma: float | None) -> bool:
    """Whether a σ of a log parameter gives an interval with finite ends (UNBOUNDED)."""
    return log_sigma is not None and math.isfinite(log_sigma) and Z95 * log_sigma <= UNBOUNDED


def log_sigma(jac: np.ndarray, s2: float) -> tuple[np.ndarray, list[int | None], list[np.ndarray | None]]:
    """σ of each log parameter (columns of jac) from σ² (JᵀJ)⁻¹, infinite along a direction the
    points do not constrain; for each, the column it trades off against most (None) and that weak
    direction (a change of the log parameters, largest entry ±1, along which the points barely move)."""
    k = jac.shape[1]
    sigma = np.full(k, np.inf)
    partner: list[int | None] = [None] * k
    direction: list[np.ndarray | None] = [None] * k
    norms = np.linalg.norm(jac, axis=0)
    cols = np.flatnonzero(norms > 0)
    if not len(cols):
        return sigma, partner, direction
    _, s, vt = np.linalg.svd(jac[:, cols] / norms[cols], full_matrices=True)
    s = np.concatenate([s, np.zeros(len(cols) - len(s))])  # fewer points than columns: null directions
    with np.errstate(divide="ignore", over="ignore"):  # 1/s^2 of a null direction: inf, which where() keeps as such
        inv = np.where(s > SINGULAR * s.max(), 1 / np.maximum(s, 1e-300) ** 2, np.inf)
    weight = vt ** 2  # weight[j, i]: column i's share of direction j
    with np.errstate(invalid="ignore"):  # inf x 0 where a column has no share of a null direction
        contrib = np.where(weight > 1e-12, weight * inv[:, None], 0.0)
    var = contrib.sum(axis=0) * s2 / norms[cols] ** 2
    for i, c in enumerate(cols):
        sigma[c] = math.sqrt(var[i]) if math.isfinite(var[i]) else math.inf
        j = int(np.argmax(contrib[:, i]))
        others = [(weight[j, m], m) for m in range(len(cols)) if m != i]
        if others and s[j] < 0.3 * s.max() and max(others)[0] > 0.1:  # a weak direction shared with another column
            partner[c] = int(cols[max(others)[1]])
            step = np.zeros(k)
            step[cols] = vt[j] / norms[cols]
            direction[c] = step / np.abs(step).max()
    return sigma, partner, direction


def log_covariance(jac: np.ndarray, s2: float, keep: list[int]) -> np.ndarray:
    """σ² (JᵀJ)⁺ of the log parameters `keep` (columns of jac with a nonzero norm), the block of the
    full matrix, not the inverse of their own columns: over the directions the points constrain,
    computed as log_sigma does. For a column with a bounded σ its diagonal is σ² (the column has no
    share of a direction they do not constrain); for one that trades off against another it is the
    part the points pin down, which is the variance of any prediction that does not move along the
    weak direction (the predictions predict.undetermined keeps)."""
    cols = np.flatnonzero(np.linalg.norm(jac, axis=0) > 0)
    if not keep or not len(cols):
        return np.zeros((len(keep), len(keep)))
    norms = np.linalg.norm(jac[:, cols], axis=0)
    _, s, vt = np.linalg.svd(jac[:, cols] / norms, full_matrices=False)
    strong = s > SINGULAR * s.max()
    scaled = vt[strong] / s[strong, None] / norms  # rows: constrained directions, in log-parameter units
    cov = s2 * scaled.T @ scaled
    cov = (cov + cov.T) / 2  # exactly symmetric, as a model file's check expects
    at = [int(np.flatnonzero(cols == k)[0]) for k in keep]
    return cov[np.ix_(at, at)]


def _bytes_sizes(span: tuple[float, float]) -> str:
    return f"sizes spanning at least 2 decades above {_size(span[1])}, where bytes, not latency, set the time"


def _needs_for_partner(name: str, other: str, span: tuple[float, float]) -> str:
    kinds = {name.split("_")[0], other.split("_")[0]}
    classes = {name.split("_")[-1], other.split("_")[-1]}
    if kinds == {"alpha", "beta"} and len(classes) == 1:
        return f"sizes spanning at least 2 decades (these span {_size(span[0])}-{_size(span[1])})"
    if {name, other} == {"beta_intra", "gamma"}:
        return ("points that copy and reduce in other proportions: all_gather (copies only) beside all_reduce, "
                "or more algorithms")
    if classes >= {"intra", "inter"}:
        return "runs of other shapes: one node and several nodes, or other ranks per node"
    return f"points that weigh {name} and {other} differently"


def verdict(name: str, value: float, sigma: float, partner: str | None, share: float, *, points: int,
            fitted: int, span: tuple[float, float], median_error: float, direction: dict | None = None,
            partner_share: float = 1.0) -> dict | None:
    """None where the fitted value is determined; else {"estimate", "why", "needs"}, and where it
    trades off against another parameter "direction" (log parameter -> change) along which the
    points do not move: a prediction that does not move along it either does not depend on the
    split (commbench.analysis.model.predict.undetermined). share: the largest share of any point's
    modelled time that the parameter's term has; partner_share: the same of the partner's term."""
    low, high = RANGES[name]
    why, needs, trade = [], None, {}
    if not (math.isfinite(value) and low <= value <= high):
        bound = shown(name, high if value > high else low) if math.isfinite(value) else ""
        side = "above" if value > high else "below"
        if name.startswith(("beta", "gamma")):
            side = {"above": "below", "below": "above"}[side]  # s/B -> B/s
        why.append(f"the fit gave {shown(name, value)}, {side} the physical {bound}")
    wide = not math.isfinite(sigma) or 2 * Z95 * sigma > math.log(MAX_SPAN)
    if points <= fitted:
        why.append(f"{points} points for {fitted} parameters")
        needs = "more points than parameters: more sizes or algorithms"
    elif wide:
        what = "its 95 % interval is unbounded" if not bounded(sigma) else \
            f"its 95 % interval spans a factor {math.exp(2 * Z95 * sigma):.3g}"
        if share < SMALL_SHARE:
            why.append(f"{what}: its term is under {max(100 * share, 0.1):.2g} % of every point's time")
            if partner and {name, partner} == {"beta_intra", "gamma"}:  # the fit gave the other one every byte
                why[-1] += f" (it trades off against {partner}, which took the time they share)"
                needs = _needs_for_partner(name, partner, span)
                if partner_share < SMALL_SHARE:  # neither term shows: which took the bytes is the optimiser's
                    needs = f"{_bytes_sizes(span)}, and {needs}"  # accident; first sizes where bytes show at all
                trade = {"direction": direction} if direction else {}
            elif name.startswith("alpha"):
                needs = f"smaller sizes, where latency sets the time (8 B to 1 KB; the smallest here is {_size(span[0])})"
            elif name in MEMORY:
                needs = f"sizes whose buffers on a node exceed its cache several times (above {_size(span[1])})"
            else:
                needs = _bytes_sizes(span)
        elif partner:
            why.append(f"{what}: it trades off against {partner}")
            needs = _needs_for_partner(name, partner, span)
            trade = {"direction": direction} if direction else {}
        else:
            why.append(f"{what}: the points are too noisy (fit error median {100 * median_error:.0f} %)")
            needs = "less noisy points: more samples per point (--min-time, --repeat) or a quieter machine"
    if not why:
        return None
    if needs is None:  # determined, but no machine's
        needs = "a rerun: no machine has this value (check the points for junk)"
    return {"estimate": float(value) if math.isfinite(value) else None, "why": "; ".join(why), "needs": needs} | trade


def not_informed(name: str) -> dict:
    why, needs = NOT_INFORMED[name]
    return {"estimate": None, "why": why, "needs": needs}
