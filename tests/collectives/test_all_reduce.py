"""all_reduce (commbench/collectives/all_reduce.py): counts and nccl-tests' size rounding, the
bus factor 2(n-1)/n, the expected output against a reduction computed here, the in-place layout,
and how commbench's algorithms are bound to the harness' buffers."""

from fractions import Fraction

import numpy as np
import pytest
from nccl_semantics import World

from commbench.dtypes import DTYPES
from commbench.algorithms import Context
from commbench.collectives import COLLECTIVES
from commbench.collectives.patterns import PERIOD, Pattern

AR = COLLECTIVES["all_reduce"]


@pytest.mark.parametrize("world", [1, 2, 3, 4, 8, 16])
def test_bus_factor_is_nccl_tests(world):
    """nccl-tests' doc/PERFORMANCE.md: all-reduce busBw = algBw · 2(n-1)/n."""
    assert Fraction(AR.bus_factor(world)).limit_denominator(1000) == Fraction(2 * (world - 1), world)


def test_bus_factor_worked_example():
    """8 ranks at an algbw of 100 GB/s: busbw 175 GB/s; one rank: nothing crosses a bus."""
    assert 100 * AR.bus_factor(8) == 175.0
    assert AR.bus_factor(1) == 0.0


@pytest.mark.parametrize("size,itemsize,world,want", [
    (1000, 4, 3, (250, 250, 1000)),  # one rank's buffer: the world does not divide it
    (1001, 4, 3, (250, 250, 1000)),  # rounded down to whole elements
    (3, 4, 2, (0, 0, 0)),
    (1 << 20, 2, 7, (1 << 19, 1 << 19, 1 << 20)),
])
def test_counts(size, itemsize, world, want):
    counts = AR.counts(size, itemsize, world)
    assert (counts.in_count, counts.out_count, counts.size_bytes) == want
    assert counts.count == want[0]


def test_sizes_and_layout():
    counts = AR.counts(4096, 4, 4)
    assert AR.size_of_osu(4096, 4) == 4096
    assert AR.in_place_offset(3, counts) == 0 and AR.message_elems(counts) == 1024
    assert AR.reduces and AR.nccl_function == "AllReduce" and AR.nccl_tests_name == "all_reduce"
    assert AR.osu_title == "Allreduce"
    assert AR.native["mpi"].name == "Allreduce" and AR.native["torch"].name == "all_reduce"


@pytest.mark.parametrize("op", ["sum", "prod", "min", "max", "avg"])
@pytest.mark.parametrize("world", [2, 3, 5])
def test_expected_is_the_reduction_of_every_ranks_input(op, world):
    """A window that wraps the pattern's period: rank by rank, element by element, in Python."""
    pattern = Pattern(op, DTYPES["float32"], world)
    counts = AR.counts(4 * 3000, 4, world)
    start, length = PERIOD - 5, 12
    inputs = [[pattern.values(r)[(start + i) % PERIOD] for i in range(length)] for r in range(world)]
    fold = {"sum": sum, "avg": lambda xs: sum(xs) / world, "min": min, "max": max, "prod": np.prod}[op]
    want = [fold([inputs[r][i] for r in range(world)]) for i in range(length)]
    for rank in range(world):  # every rank expects the same
        assert AR.expected(pattern, rank, counts, start, length).tolist() == want


class Recorder:
    """An algorithm that records how it is called, and writes 9 where it would put the output."""

    def __init__(self, reads_source):
        self.reads_source, self.calls = reads_source, []

    def all_reduce(self, ctx, buf, op, src=None):
        self.calls.append((buf.copy(), op, None if src is None else src))
        buf[...] = 9


def _bind(in_place, reads_source):
    comm = World(1).comm(0)
    ctx = Context(comm, [0])
    algorithm = Recorder(reads_source)
    send = np.array([1.0, 2.0, 3.0])
    recv = send if in_place else np.full(3, -7.0)
    fn, out = AR.bind_algorithm(algorithm, ctx, send, recv, "max", in_place, 3, 3)
    return algorithm, send, recv, fn, out


def test_bind_in_place_runs_on_the_one_buffer():
    algorithm, send, recv, fn, out = _bind(True, False)
    assert out is recv is send and algorithm.calls == []
    fn()
    (buf, op, src), = algorithm.calls
    assert buf.tolist() == [1.0, 2.0, 3.0] and op == "max" and src is None


def test_bind_out_of_place_reads_the_source_without_a_copy():
    algorithm, send, recv, fn, out = _bind(False, True)
    fn()
    (buf, _, src), = algorithm.calls
    assert out is recv and src is send and buf.tolist() == [-7.0, -7.0, -7.0]  # no copy first
    assert send.tolist() == [1.0, 2.0, 3.0] and recv.tolist() == [9.0] * 3


def test_bind_out_of_place_copies_the_input_first():
    algorithm, send, recv, fn, out = _bind(False, False)
    fn()
    (buf, _, src), = algorithm.calls
    assert buf.tolist() == [1.0, 2.0, 3.0] and src is None  # the copy is part of the timed call
    assert send.tolist() == [1.0, 2.0, 3.0] and out is recv and recv.tolist() == [9.0] * 3

