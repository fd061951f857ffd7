"""The ordered list of points a sweep measures. Every rank builds the same plan from the spec,
and a point's index in it identifies the point in results (resume runs the missing indexes)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from commbench.collectives import COLLECTIVES
from commbench.dtypes import DTYPES
from commbench.spec import SweepSpec


@dataclass(frozen=True)
class Point:
    index: int
    backend: str
    collective: str
    algorithm: str
    dtype: str
    op: str | None  # None for collectives that do not reduce
    in_place: bool
    size: int  # requested bytes; the measured size follows nccl-tests rounding

    def as_dict(self) -> dict:
        return asdict(self)


def build_plan(spec: SweepSpec) -> list[Point]:
    points = []
    for backend, coll, algo, dtype, op, in_place in spec.combinations():
        for size in spec.sizes:
            points.append(Point(len(points), backend, coll, algo, dtype, op, in_place, size))
    return points


def rounding_twins(plan: list[Point], world: int, traffic=None) -> dict[int, int]:
    """Point index -> the size of the first point of its table (backend, collective, algorithm,
    dtype, op, buffers) whose size measures as its own over `world` ranks (nccl-tests' rounding:
    `--sizes 8,9,10` is 8 B three times): such a point is measured once. One pass over the plan.
    traffic: the run's uneven all-to-all's (SweepSpec.peer_traffic)."""
    first: dict[tuple, int] = {}
    twins = {}
    for p in plan:
        counts = COLLECTIVES[p.collective].counts_for(p.size, DTYPES[p.dtype].itemsize, world, traffic)
        key = (p.backend, p.collective, p.algorithm, p.dtype, p.op, p.in_place,
               replace(counts, peers=None))  # (an uneven all-to-all's n x n blocks follow from its size: not kept)
        if key in first:
            twins[p.index] = first[key]
        else:
            first[key] = p.size
    return twins
