"""Fakes for commbench.rank.harness's tests (test_harness.py, test_timed_loops.py): ranks are
threads (tests/nccl_semantics.py's World) whose collectives gather every rank's input and compute
the answer in numpy; the timer is a fake that returns chosen seconds per rank, so batch, sample
count and the max over ranks are exact."""

import threading

import numpy as np

from commbench.dtypes import DTYPES
from commbench.collectives import COLLECTIVES
from commbench.rank.harness import measure
from commbench.spec import SweepSpec
from nccl_semantics import NcclSemanticsComm, World

_REDUCE = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}


class FakeComm(NcclSemanticsComm):
    """Collectives computed from every rank's input (meeting in allgather_object), as the
    Communicator contract lays out the buffers. The world's `broken`: (rank, element) that rank's
    output is off by one at, or "silent": no output is written."""

    backend = "fake"

    def bind(self, collective, send, recv, op, in_place, root=0):
        def run():
            inputs = np.stack(self.allgather_object(send.astype(np.float64)))
            if self.world.broken == "silent":
                return
            if collective == "all_gather":
                result = inputs.reshape(-1)
            else:
                reduced = inputs.sum(axis=0) / self.size if op == "avg" else _REDUCE[op](inputs, axis=0)
                n = len(recv)
                result = reduced if collective == "all_reduce" else reduced[self.rank * n:(self.rank + 1) * n]
            recv[:] = result
            if self.world.broken is not None and self.world.broken[0] == self.rank:
                recv[self.world.broken[1]] += 1
            self.world.calls_made[self.rank] += 1
        return run, recv


class FakeWorld(World):
    """A World of FakeComm (or comm_class) ranks; calls_made: completed collective calls per rank."""

    def __init__(self, size, broken=None, comm_class=FakeComm):
        super().__init__(size)
        self.broken, self.calls_made, self.comm_class = broken, [0] * size, comm_class

    def comm(self, rank):
        RANK.value = rank  # this rank's thread: what the fake timer answers for
        return self.comm_class(self, ("world",), rank, self.size)


RANK = threading.local()


class FakeTimer:
    """Stands in for time_cpu: runs fn samples x batch times; returns probe[rank] for the warm-up
    (a measurement's first call) and loop[rank], cycled to the length asked, for the timed loop."""

    def __init__(self, probe, loop):
        self.probe, self.loop, self.calls = probe, loop, {}

    def __call__(self, fn, samples, batch=1):
        rank = RANK.value
        for _ in range(samples * batch):
            fn()
        self.calls.setdefault(rank, []).append((samples, batch))
        values = self.probe[rank] if len(self.calls[rank]) % 2 == 1 else self.loop[rank]
        return np.resize(np.asarray(values, dtype=float), samples)


def measure_ranks(world, collective="all_reduce", dtype="float32", op="sum", in_place=False, size=4096,
             broken=None, **kw):
    """measure() on every rank of a FakeWorld; the measurements, one per rank."""
    args = dict(warmup=2, iters=5, min_time=0.01, min_iters=1, max_iters=1000) | kw
    coll, dt = COLLECTIVES[collective], DTYPES[dtype]

    def rank(comm):
        counts = coll.counts(size, dt.itemsize, comm.size)
        return measure(comm, coll, counts, dt, op if coll.reduces else None, in_place, **args)

    return FakeWorld(world, broken).run(rank)


def small_spec(tmp_path, **kw) -> SweepSpec:
    """A validated 2-rank MPI all-reduce spec of two sizes whose run folder is tmp_path/run; kw
    replaces any field."""
    fields = dict(backends=["mpi"], collectives=["all_reduce"], sizes=[8, 1024], nprocs=2, in_place=[False],
                  run_id="r1", out_dir=str(tmp_path / "run"))
    return SweepSpec(**(fields | kw)).validate()
