"""The own algorithms of broadcast, reduce and all-to-all (chain.py, tree.py, pairwise.py) with threads
as ranks on a communicator with NCCL's point-to-point rules (tests/algorithm_ranks.py): bound as the
harness binds them (Collective.bind_algorithm), 2-8 ranks, every root, in place and out of place,
twice back to back, exact; and each algorithm's messages() is what its ranks really sent."""

import numpy as np
import pytest

from algorithm_ranks import CountingWorld
from commbench.dtypes import DTYPES
from commbench.algorithms import ALGORITHMS, Context
from commbench.collectives import COLLECTIVES

INT64 = DTYPES["int64"]
CASES = [("chain", "broadcast"), ("chain", "reduce"), ("tree", "broadcast"), ("tree", "reduce"),
         ("pairwise", "all_to_all")]


def _input(rank, count):
    return (rank + 1) * (np.arange(count) % 7 + 1)


def _run(comm, name, collective, count, in_place, root):
    ctx = Context(comm, [0] * comm.size, segment_elems=4, root=root)  # several segments in the chain's pipe
    n = comm.size
    in_count = count * (n if collective == "all_to_all" else 1)
    send = comm.alloc(in_count, INT64)
    recv = send if in_place else comm.alloc(in_count, INT64)
    fn, out = COLLECTIVES[collective].bind_algorithm(ALGORITHMS[name], ctx, send, recv, "sum", in_place, in_count,
                                                     in_count)
    results = []
    for _ in range(2):
        send[...] = _input(comm.rank, in_count)
        fn()
        results.append(out.copy())
    return results


def _expected(collective, n, r, root, count):
    if collective == "broadcast":
        return _input(root, count)
    if collective == "reduce":
        return sum(_input(q, count) for q in range(n)) if r == root else None
    return np.concatenate([_input(q, count * n)[r * count:(r + 1) * count] for q in range(n)])


@pytest.mark.parametrize("world", [2, 3, 5, 8])
@pytest.mark.parametrize("name,collective", CASES)
def test_exact_from_every_root(name, collective, world):
    roots = range(world) if COLLECTIVES[collective].rooted else [0]
    for root in roots:
        for count, in_place in ((1, True), (37, False), (37, True)):
            outputs = CountingWorld(world).run(lambda comm: _run(comm, name, collective, count, in_place, root))
            for r, results in enumerate(outputs):
                want = _expected(collective, world, r, root, count)
                for got in results:
                    if want is not None:  # (a reduce's output off the root is undefined)
                        np.testing.assert_array_equal(got, want, err_msg=f"{name} {collective} rank {r} root {root}")


@pytest.mark.parametrize("world", [2, 4, 7])
@pytest.mark.parametrize("name,collective", CASES)
def test_messages_are_what_the_ranks_send(name, collective, world):
    root = world - 1 if COLLECTIVES[collective].rooted else 0
    count = 40
    world_ = CountingWorld(world)
    world_.run(lambda comm: _run(comm, name, collective, count, False, root)[:0])
    rooted = {"root": root} if COLLECTIVES[collective].rooted else {}
    elems = count * (world if collective == "all_to_all" else 1)
    once = ALGORITHMS[name].messages(collective, elems, [0] * world, 4, **rooted)
    assert world_.sent == {edge: 2 * e for edge, e in once.items()}  # two calls


def test_chain_reduce_of_more_segments_than_segments_cuts():
    """segments() cuts at most 4096 pieces: a longer buffer's pieces are longer than --segment-bytes,
    and the chain's scratch must hold one of those (20,000 elements of 4: pieces of 5)."""
    outputs = CountingWorld(2).run(lambda comm: _run(comm, "chain", "reduce", 20000, False, 0))
    np.testing.assert_array_equal(outputs[0][0], _input(0, 20000) + _input(1, 20000))
