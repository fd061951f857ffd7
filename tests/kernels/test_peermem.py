"""cuda/peer_flags.cu's barrier on the CPU: built by the host compiler (tests/host_cuda.py) and run
by one host thread per rank at once, on flag words laid out as peermem lays them out (one 64-byte
line per rank). What the GPU's memory model adds is for tests/gpu/test_peer_cuda.py."""

import random
import threading
import time

import numpy as np
import pytest

import host_cuda
from commbench.kernels.peermem import FLAG_BYTES, raise_if_timed_out
from commbench.sources import CUDA_DIR

pytestmark = pytest.mark.skipif(host_cuda.missing() is not None, reason=str(host_cuda.missing()))
WORDS = FLAG_BYTES // 8


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    return host_cuda.build(CUDA_DIR / "peer_flags.cu", tmp_path_factory.mktemp("host-flags"))


class Flags:
    def __init__(self, size, timeout_s=60.0):
        self.size, self.timeout_ns = size, int(timeout_s * 1e9)
        self.words = np.zeros(size * WORDS, dtype=np.int64)
        self.error = np.zeros(2, dtype=np.int64)  # the record of a peer that never arrived
        self.table = np.array([self.words[r * WORDS:].ctypes.data for r in range(size)], dtype=np.uint64)

    def barrier(self, kernels, rank, epoch):
        kernels("peer_barrier", 1, 1, (np.uint64(self.table.ctypes.data), np.int32(rank), np.int32(self.size),
                                       np.int64(epoch), np.int64(self.timeout_ns), np.uint64(self.error.ctypes.data)))

    def epochs(self):
        return list(self.words[::WORDS])


def _start(target, *args):
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def test_nobody_passes_until_every_rank_arrived(kernels):
    flags, passed = Flags(4), []
    threads = [_start(lambda r: (flags.barrier(kernels, r, 1), passed.append(r)), r) for r in range(3)]
    time.sleep(0.5)
    assert passed == [] and flags.epochs() == [1, 1, 1, 0]  # three raised their flag and wait
    flags.barrier(kernels, 3, 1)
    for t in threads:
        t.join(timeout=30)
    assert sorted(passed) == [0, 1, 2] and flags.epochs() == [1, 1, 1, 1]


def test_ranks_stay_in_step_over_many_barriers(kernels):
    """Each rank marks its round, then meets the others; after barrier e every mark is >= e. Random
    pauses before arriving make a barrier that let anyone through early show."""
    size, rounds = 4, 300
    flags, marks, errors = Flags(size), [0] * size, []

    def rank(r):
        rng = random.Random(r)
        for e in range(1, rounds + 1):
            if rng.random() < 0.2:
                time.sleep(rng.random() * 1e-3)
            marks[r] = e
            flags.barrier(kernels, r, e)
            if min(marks) < e:
                errors.append((r, e, list(marks)))

    threads = [_start(rank, r) for r in range(size)]
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads) and errors == []
    assert flags.epochs() == [rounds] * size


def test_a_rank_ahead_does_not_hold_the_others(kernels):
    """Flags only grow: a rank already past epoch e (it has raised e + 1) satisfies e's wait."""
    flags = Flags(2)
    flags.words[WORDS] = 2
    done = _start(flags.barrier, kernels, 0, 1)
    done.join(timeout=30)
    assert not done.is_alive() and flags.epochs() == [1, 2]


def test_a_dead_peer_ends_the_wait_with_its_rank(kernels):
    """Rank 2 never arrives: after the timeout the kernel returns (the stream does not hang) with a
    record naming rank 2, which the host turns into one line; a wait that completes leaves none."""
    flags = Flags(3, timeout_s=0.2)
    t0 = time.monotonic()
    waiters = [_start(flags.barrier, kernels, r, 1) for r in range(2)]
    for t in waiters:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in waiters) and 0.2 <= time.monotonic() - t0 < 20
    assert list(flags.error) == [1, 2]
    with pytest.raises(TimeoutError, match="rank 2 never arrived"):
        raise_if_timed_out(flags.error, 1)
    whole = Flags(2, timeout_s=0.2)
    both = [_start(whole.barrier, kernels, r, 1) for r in range(2)]
    for t in both:
        t.join(timeout=30)
    assert list(whole.error) == [0, 0]
    raise_if_timed_out(whole.error, 1)  # nothing recorded: no error
