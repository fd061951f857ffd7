"""Every algorithm of the registry that sends messages runs on a communicator with NCCL's
point-to-point semantics (tests/nccl_semantics.py: pair calls in issue order, lone calls create
pair communicators, groups progress together, deadlocks reported), for world sizes 2-8 and every
collective it has, in place and out of place, twice back to back, exactly."""

import numpy as np
import pytest

from commbench.dtypes import DTYPES
from commbench.algorithms import ALGORITHMS, Context
from nccl_semantics import Deadlock, World

SENDING = sorted(name for name, a in ALGORITHMS.items() if a.sends_messages)
CASES = [(name, collective) for name in SENDING for collective in ("all_reduce", "all_gather", "reduce_scatter")
         if hasattr(ALGORITHMS[name], collective)]
INT64 = DTYPES["int64"]


def test_the_registry_is_covered():
    """The peer algorithms move no data through the communicator (no sends to order); every
    other algorithm is here."""
    assert {"ring", "ring_topology", "tree", "dbtree", "rhd", "hierarchical"} <= set(SENDING)
    assert all(not ALGORITHMS[n].sends_messages for n in set(ALGORITHMS) - set(SENDING))


def _input(rank: int, count: int) -> np.ndarray:
    return (rank + 1) * (np.arange(count) % 7 + 1)


def _run_once(comm, algorithm, collective, count, in_place, nodes):
    """Bind as the harness does, run twice (no reset in between), return this rank's outputs."""
    ctx = Context(comm, nodes, segment_elems=4)  # several segments per block, several pipeline chunks
    n, r = comm.size, comm.rank
    if collective == "all_reduce":
        in_count = out_count = count
        send = comm.alloc(count, INT64)
        recv = send if in_place else comm.alloc(count, INT64)
    elif collective == "all_gather":
        in_count, out_count = count, n * count
        recv = comm.alloc(out_count, INT64)
        send = comm.view(recv, r * count, count) if in_place else comm.alloc(count, INT64)
    else:
        in_count, out_count = n * count, count
        send = comm.alloc(in_count, INT64)
        recv = comm.view(send, r * count, count) if in_place else comm.alloc(count, INT64)
    fn, out = algorithm.bind(ctx, collective, send, recv, "sum", in_place, in_count, out_count)
    results = []
    for _ in range(2):
        send[...] = _input(r, in_count)
        fn()
        results.append(out.copy())
    return results


def _expected(collective, n, r, count):
    if collective == "all_reduce":
        return sum(_input(q, count) for q in range(n))
    if collective == "all_gather":
        return np.concatenate([_input(q, count) for q in range(n)])
    return sum(_input(q, n * count) for q in range(n))[r * count:(r + 1) * count]


@pytest.mark.parametrize("world", range(2, 9))
@pytest.mark.parametrize("name,collective", CASES)
def test_algorithm_under_nccl_semantics(name, collective, world):
    algorithm = ALGORITHMS[name]
    nodes = [r // 2 for r in range(world)] if world % 2 == 0 else [0] * world  # two ranks a node where it divides
    for count in (1, 37) if collective != "all_reduce" else (1, world - 1, 37, 101):
        for in_place in (True, False):
            outputs = World(world).run(lambda comm: _run_once(comm, algorithm, collective, count, in_place, nodes))
            for r, results in enumerate(outputs):
                for got in results:
                    np.testing.assert_array_equal(got, _expected(collective, world, r, count),
                                                  err_msg=f"rank {r}, {count} elements, in place {in_place}")


def test_receive_before_send_deadlocks_two_ranks():
    """Lone calls, each rank receiving before it sends (what the ring did): NCCL hangs; the
    double reports it, naming both ranks, within about a second."""
    def step(comm):
        other = 1 - comm.rank
        recv = comm.irecv(np.zeros(4), other)
        send = comm.isend(np.ones(4), other)
        recv.wait()
        send.wait()

    with pytest.raises(Deadlock, match=r"rank 0 waits on recv from rank 1.*rank 1 waits on recv from rank 0"):
        World(2).run(step)


def test_lone_calls_around_a_ring_deadlock_on_pair_creation():
    """Three ranks each receiving from the left first: each blocks creating its left pair's
    communicator, which the left rank is not creating (it creates its own left one)."""
    def step(comm):
        left, right = (comm.rank - 1) % 3, (comm.rank + 1) % 3
        comm.irecv(np.zeros(4), left)
        comm.isend(np.ones(4), right).wait()

    with pytest.raises(Deadlock, match="creates its pair communicator"):
        World(3).run(step)


def test_the_same_step_as_one_group_completes():
    def step(comm):
        other, got = 1 - comm.rank, np.zeros(4)
        comm.exchange([(np.full(4, comm.rank + 1.0), other, 0)], [(got, other, 0)]).wait()
        return got

    assert [list(g) for g in World(2).run(step)] == [[2.0] * 4, [1.0] * 4]


def test_order_not_tags_matches_messages():
    """NCCL has no tags: two sends meet the receives in issue order, whatever their tags say."""
    def step(comm):
        if comm.rank == 0:
            comm.exchange([(np.full(2, 1.0), 1, 7), (np.full(2, 2.0), 1, 8)], []).wait()
            return None
        a, b = np.zeros(2), np.zeros(2)
        comm.exchange([], [(a, 0, 8), (b, 0, 7)]).wait()
        return a[0], b[0]

    assert World(2).run(step)[1] == (1.0, 2.0)
