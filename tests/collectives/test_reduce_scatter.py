"""reduce_scatter (commbench/collectives/reduce_scatter.py): counts and nccl-tests' size
rounding (size = one rank's input), the bus factor (n-1)/n, the expected output against the
reduction's blocks computed here, the in-place offset, and the binding of commbench's algorithms."""

from fractions import Fraction

import numpy as np
import pytest
from nccl_semantics import World

from commbench.dtypes import DTYPES
from commbench.algorithms import Context
from commbench.collectives import COLLECTIVES
from commbench.collectives.patterns import PERIOD, Pattern

RS = COLLECTIVES["reduce_scatter"]


@pytest.mark.parametrize("world", [1, 2, 3, 4, 8, 16])
def test_bus_factor_is_nccl_tests(world):
    """nccl-tests' doc/PERFORMANCE.md: reduce-scatter busBw = algBw · (n-1)/n."""
    assert Fraction(RS.bus_factor(world)).limit_denominator(1000) == Fraction(world - 1, world)
    assert RS.bus_factor(8) == 0.875


@pytest.mark.parametrize("size,itemsize,world,want", [
    (1000, 4, 3, (249, 83, 996)),  # 250 input elements: blocks of 83, the size shrinks to 996
    (4096, 2, 4, (2048, 512, 4096)),
    (12, 4, 4, (0, 0, 0)),  # 3 elements over 4 ranks: less than one per rank
    (10, 1, 3, (9, 3, 9)),
])
def test_counts_round_down_to_whole_blocks(size, itemsize, world, want):
    counts = RS.counts(size, itemsize, world)
    assert (counts.in_count, counts.out_count, counts.size_bytes) == want
    assert counts.count == counts.in_count and counts.size_bytes == counts.in_count * itemsize


def test_layout_and_names():
    counts = RS.counts(4 * 4 * 7, 4, 4)
    assert [RS.in_place_offset(r, counts) for r in range(4)] == [0, 7, 14, 21]  # the output inside the input
    assert RS.message_elems(counts) == 7 and RS.size_of_osu(28, 4) == 28
    assert RS.reduces and RS.nccl_function == "ReduceScatter" and RS.nccl_tests_name == "reduce_scatter"
    assert RS.native["mpi"].name == "Reduce_scatter_block" and "reduce_scatter_tensor" in RS.native["torch"].function


@pytest.mark.parametrize("op", ["sum", "prod", "min", "max", "avg"])
def test_expected_is_the_ranks_block_of_the_reduction(op):
    """Blocks of 400 over 3 ranks: rank 2's block starts at 800 and wraps the period at 1021."""
    world, block = 3, 400
    pattern = Pattern(op, DTYPES["float64"], world)
    counts = RS.counts(world * block * 8, 8, world)
    inputs = np.stack([[pattern.values(r)[i % PERIOD] for i in range(world * block)] for r in range(world)])
    total = {"sum": inputs.sum(0), "avg": inputs.sum(0) / world, "prod": inputs.prod(0), "min": inputs.min(0),
             "max": inputs.max(0)}[op]
    for rank in range(world):
        mine = total[rank * block:(rank + 1) * block]
        assert RS.expected(pattern, rank, counts, 0, block).tolist() == mine.tolist()
        assert RS.expected(pattern, rank, counts, 390, 10).tolist() == mine[390:].tolist()


class Recorder:
    def __init__(self, reads_source):
        self.reads_source, self.calls = reads_source, []

    def reduce_scatter(self, ctx, buf, op, block, src=None):
        self.calls.append((buf, buf.copy(), op, block, src))
        buf[...] = 10 + np.arange(len(buf))  # block r is 10 + r·block ..


def _bind(in_place, reads_source, rank=1):
    ctx = Context(World(3).comm(rank), [0] * 3)
    algorithm, send = Recorder(reads_source), np.arange(6.0)
    recv = send[rank * 2:rank * 2 + 2] if in_place else np.full(2, -7.0)
    fn, out = RS.bind_algorithm(algorithm, ctx, send, recv, "min", in_place, 6, 2)
    return algorithm, send, recv, fn, out


def test_bind_in_place_reduces_the_input_buffer():
    algorithm, send, recv, fn, out = _bind(True, False)
    fn()
    buf, before, op, block, src = algorithm.calls[0]
    assert buf is send and before.tolist() == list(range(6)) and (op, block, src) == ("min", 2, None)
    assert out is recv and recv.tolist() == [12.0, 13.0]  # the rank's block, in place


@pytest.mark.parametrize("reads_source", [True, False])
def test_bind_out_of_place_works_in_a_buffer_of_its_own(reads_source):
    algorithm, send, recv, fn, out = _bind(False, reads_source)
    fn()
    buf, before, op, block, src = algorithm.calls[0]
    assert buf is not send and len(buf) == 6 and (op, block) == ("min", 2)
    if reads_source:
        assert src is send and before.tolist() == [0.0] * 6  # read from send, no copy
    else:
        assert src is None and before.tolist() == list(range(6))  # a copy of the input first
    assert send.tolist() == list(range(6))  # the input is never written
    assert out is recv and recv.tolist() == [12.0, 13.0]  # rank 1's block copied out
    fn()
    assert algorithm.calls[1][0] is buf  # the work buffer is allocated once, at bind
