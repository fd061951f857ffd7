"""The modelled time of one call: the algorithm's own `cost()` (its formula is beside it, in
commbench/algorithms/), with the parameters adjusted to the call's working set. The α-β-γ
machinery (Params, Shape) is commbench.algorithms.cost; the algorithms modelled are those of
the registry that define a cost."""

from __future__ import annotations

from commbench.algorithms import ALGORITHMS
from commbench.algorithms.base import SEGMENT_BYTES
from commbench.algorithms.cost import Params, Shape, footprint
from commbench.collectives import COLLECTIVES

__all__ = ["MEMORY", "Params", "Shape", "footprint", "modelled", "time_s"]

MEMORY = ("mem_factor", "cache_bytes")  # the memory term's parameters: the time is not linear in them


def modelled() -> list[str]:
    """The registered algorithms the model knows (those with a cost), in registry order."""
    return [name for name, algorithm in ALGORITHMS.items() if algorithm.modelled]


def time_s(p: Params, algorithm: str, collective: str, shape: Shape, size_bytes: float,
           segment_bytes: int = SEGMENT_BYTES, in_place: bool = True) -> float | None:
    """Modelled seconds of one call; None where the algorithm has no such collective or no cost."""
    algo = ALGORITHMS.get(algorithm)
    if (algo is None or not algo.modelled or collective not in algo.collectives or shape.n < 1
            or COLLECTIVES[collective].takes_traffic):  # (the model knows no uneven traffic)
        return None
    if shape.n == 1:
        return 0.0
    p = p.in_memory(shape.per_node * footprint(collective, size_bytes, shape.n, in_place))
    return algo.cost(p, shape, collective, float(size_bytes), segment_bytes)
