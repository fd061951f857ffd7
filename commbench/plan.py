"""The ordered list of points a sweep measures. Every rank builds the same plan from the spec,
and a point's index in it identifies the point in results (resume runs the missing indexes)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import product
from typing import Callable

from commbench.collectives import COLLECTIVES
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
    for backend, coll, algo, dtype in product(spec.backends, spec.collectives, spec.algorithms, spec.dtypes):
        ops = spec.ops if COLLECTIVES[coll].reduces else [None]
        for op, in_place, size in product(ops, spec.in_place, spec.sizes):
            points.append(Point(len(points), backend, coll, algo, dtype, op, in_place, size))
    return points


def measured_before(plan: list[Point], point: Point, counts_of: Callable[[int], object]) -> Point | None:
    """The earlier point of `point`'s table (backend, collective, algorithm, dtype, op, buffers) whose
    requested size measures as point's does, counts_of(size) telling (nccl-tests' rounding: `--sizes
    8,9,10` is 8 B three times), or None: such a point is measured once."""
    table, mine = _table(point), counts_of(point.size)
    return next((p for p in plan[:point.index]
                 if _table(p) == table and p.size != point.size and counts_of(p.size) == mine), None)


def _table(p: Point) -> tuple:
    return p.backend, p.collective, p.algorithm, p.dtype, p.op, p.in_place
