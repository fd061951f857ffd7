"""all_gather (commbench/collectives/all_gather.py): counts and nccl-tests' size rounding (size
= the gathered output), the bus factor (n-1)/n, the expected output against the ranks' blocks
concatenated here, the in-place offset, and the binding of commbench's algorithms."""

from fractions import Fraction

import numpy as np
import pytest
from nccl_semantics import World

from commbench.dtypes import DTYPES
from commbench.algorithms import Context
from commbench.collectives import COLLECTIVES
from commbench.collectives.patterns import PERIOD, Pattern

AG = COLLECTIVES["all_gather"]


@pytest.mark.parametrize("world", [1, 2, 3, 4, 8, 16])
def test_bus_factor_is_nccl_tests(world):
    """nccl-tests' doc/PERFORMANCE.md: all-gather busBw = algBw · (n-1)/n."""
    assert Fraction(AG.bus_factor(world)).limit_denominator(1000) == Fraction(world - 1, world)
    assert AG.bus_factor(4) == 0.75


@pytest.mark.parametrize("size,itemsize,world,want", [
    (1000, 4, 3, (83, 249, 996)),  # 250 elements do not split in 3: 83 each, the size shrinks to 996
    (4096, 8, 4, (128, 512, 4096)),
    (7, 4, 2, (0, 0, 0)),  # less than one element per rank
    (6, 1, 4, (1, 4, 4)),
])
def test_counts_round_down_to_whole_blocks(size, itemsize, world, want):
    counts = AG.counts(size, itemsize, world)
    assert (counts.in_count, counts.out_count, counts.size_bytes) == want
    assert counts.count == counts.out_count and counts.size_bytes == counts.out_count * itemsize


def test_osus_size_is_every_ranks_contribution():
    assert AG.size_of_osu(100, 4) == 400
    counts = AG.counts(AG.size_of_osu(100, 4), 4, 4)
    assert counts.in_count == 25


def test_layout_and_names():
    counts = AG.counts(3 * 4 * 10, 4, 3)
    assert [AG.in_place_offset(r, counts) for r in range(3)] == [0, 10, 20]  # the rank's block in the output
    assert AG.message_elems(counts) == 10
    assert not AG.reduces and AG.nccl_function == "AllGather" and AG.osu_title == "Allgather"
    assert AG.native["mpi"].name == "Allgather" and "all_gather_into_tensor" in AG.native["torch"].function


@pytest.mark.parametrize("world,block", [(3, 5), (2, 1500), (4, 1)])
def test_expected_is_the_blocks_in_rank_order(world, block):
    """Rank q's block is its pattern from element 0: a block longer than the period wraps, and any
    window of the output is that slice of the concatenation, for every rank."""
    pattern = Pattern(None, DTYPES["int32"], world)
    counts = AG.counts(world * block * 4, 4, world)
    assert counts.in_count == block
    whole = np.concatenate([[pattern.values(q)[i % PERIOD] for i in range(block)] for q in range(world)])
    for rank in range(world):
        assert AG.expected(pattern, rank, counts, 0, world * block).tolist() == whole.tolist()
    for start, length in ((block - 1, 2), (1, world * block - 2), (world * block - 1, 1)):
        assert AG.expected(pattern, 1, counts, start, length).tolist() == whole[start:start + length].tolist()


class Recorder:
    def __init__(self):
        self.calls = []

    def all_gather(self, ctx, buf, block):
        self.calls.append((buf.copy(), block))
        buf[...] = np.arange(len(buf))


def test_bind_in_place_gathers_in_the_output():
    ctx = Context(World(3).comm(1), [0] * 3)
    algorithm, recv = Recorder(), np.full(6, -7.0)
    send = recv[2:4]
    fn, out = AG.bind_algorithm(algorithm, ctx, send, recv, None, True, 2, 6)
    fn()
    assert out is recv and algorithm.calls[0][1] == 2 and algorithm.calls[0][0].tolist() == [-7.0] * 6
    assert recv.tolist() == list(range(6))


def test_bind_out_of_place_copies_the_own_block_in_first():
    ctx = Context(World(3).comm(1), [0] * 3)
    algorithm, recv, send = Recorder(), np.full(6, -7.0), np.array([4.0, 5.0])
    fn, out = AG.bind_algorithm(algorithm, ctx, send, recv, None, False, 2, 6)
    assert algorithm.calls == [] and recv.tolist() == [-7.0] * 6  # nothing before the call
    fn()
    buf, block = algorithm.calls[0]
    assert block == 2 and buf.tolist() == [-7.0, -7.0, 4.0, 5.0, -7.0, -7.0]  # rank 1's block at 1·2
    assert out is recv and send.tolist() == [4.0, 5.0]
