"""A Communicator with NCCL's point-to-point semantics, for CPU tests (tests/algorithms/test_nccl_semantics.py).

Ranks are threads of this process working on numpy buffers. It enforces what NCCL through
torch.distributed does, where MPI and gloo are forgiving:
* A lone isend / irecv runs on its pair's stream: a rank's calls to one peer complete strictly in
  issue order, so a receive blocks every later call to that peer until the peer's matching send
  (and a send waits for its receive: nothing is buffered eagerly).
* The first lone call to a peer creates the pair's communicator, together with the peer: the
  call itself blocks until the peer makes a lone call to this rank too.
* A group (`exchange`, torch's batch_isend_irecv) runs on the communicator's own stream: its calls
  progress together, once every earlier group of this rank on this communicator has completed.
* Matching is by order, not by tag (NCCL has none): the k-th send from a to b meets the k-th
  receive at b from a, and their lengths and dtypes must agree.
* A deadlock (nothing able to progress for DEADLOCK_S while a rank waits) raises Deadlock in
  every waiting rank, with what each rank waits on, instead of hanging.
Collectives (barrier, allgather_object, reduce_host, split) simply meet; they are not ordered
against the point-to-point calls.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from commbench.backends.base import Communicator, NumpyBuffers, Request
from commbench.kernels.reducers import NumpyReducer

DEADLOCK_S = 1.0


class Deadlock(RuntimeError):
    pass


@dataclass(eq=False)
class _Op:
    kind: str  # "send" | "recv"
    comm: tuple  # the communicator's id
    rank: int  # the issuing rank, in comm
    peer: int
    buf: np.ndarray
    stream: list  # the ops of its stream, in issue order (it included)
    group: object = None  # the group it belongs to (None: a lone call)
    done: bool = False
    partner: _Op | None = None

    def __str__(self):
        where = "in a group" if self.group is not None else "alone"
        return f"{self.kind} {'to' if self.kind == 'send' else 'from'} rank {self.peer} ({len(self.buf)} elements, {where})"


class World:
    """The shared state of one job's ranks: streams, matching queues, collectives, deadlock watch."""

    def __init__(self, size: int, buffers: str = "numpy", reducer=NumpyReducer, on_thread=None):
        """buffers: "numpy" arrays or "torch" (CPU) tensors, reduced by reducer(rank) (a class or
        factory); on_thread(rank): what comm.enter_thread does (nothing by default)."""
        self.size, self.buffers, self.make_reducer, self.on_thread = size, buffers, reducer, on_thread
        self.cond = threading.Condition()
        self.streams: dict[tuple, list[_Op]] = {}
        self.sends: dict[tuple, list[_Op]] = {}  # (comm, src, dst) -> sends in issue order
        self.recvs: dict[tuple, list[_Op]] = {}
        self.pending: list[_Op] = []  # sends not yet matched and done
        self.pairs_wanted: set[tuple] = set()  # (comm, rank, peer): a lone call asked for the pair
        self.pairs: set[tuple] = set()  # (comm, rank, peer): created
        self.meetings: dict[tuple, dict[int, object]] = {}  # (comm, call index) -> rank -> value
        self.calls: dict[tuple, int] = {}  # (comm, rank) -> collectives called
        self.waiting: dict[int, str] = {}  # thread id -> what it waits on
        self.last_progress = self.last_check = time.monotonic()
        self.deadlock: str | None = None

    def comm(self, rank: int) -> NcclSemanticsComm:
        return NcclSemanticsComm(self, ("world",), rank, self.size)

    def run(self, fn, timeout: float = 120.0) -> list:
        """fn(comm) on every rank, each in its thread; the results, or the first rank's error."""
        results, errors = [None] * self.size, [None] * self.size

        def body(rank):
            try:
                results[rank] = fn(self.comm(rank))
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors[rank] = exc

        threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(self.size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout)
            assert not t.is_alive(), "a rank is still running: the deadlock watch missed a hang"
        for exc in errors:
            if exc is not None:
                raise exc
        return results

    # --- under self.cond ----------------------------------------------------------------------
    def _progressed(self):
        self.last_progress = time.monotonic()
        self.cond.notify_all()

    def _eligible(self, op: _Op) -> bool:
        for earlier in op.stream:
            if earlier is op:
                return True
            if not earlier.done and (op.group is None or earlier.group is not op.group):
                return False
        raise AssertionError("an op outside its stream")

    def _progress(self) -> None:
        moved = True
        while moved:
            moved = False
            for send in list(self.pending):
                recv = send.partner
                if recv is None or not (self._eligible(send) and self._eligible(recv)):
                    continue
                if len(send.buf) != len(recv.buf) or send.buf.dtype != recv.buf.dtype:
                    raise RuntimeError(f"rank {send.rank} sends {len(send.buf)} x {send.buf.dtype} to rank {recv.rank}, "
                                       f"which receives {len(recv.buf)} x {recv.buf.dtype}: NCCL matches by order")
                recv.buf[...] = send.buf
                send.done = recv.done = True
                self.pending.remove(send)
                moved = True
        for stream in self.streams.values():  # drop the completed head of every stream
            while stream and stream[0].done:
                stream.pop(0)
        self._progressed()

    def _issue(self, op: _Op) -> None:
        src, dst = (op.rank, op.peer) if op.kind == "send" else (op.peer, op.rank)
        mine = (self.sends if op.kind == "send" else self.recvs).setdefault((op.comm, src, dst), [])
        theirs = (self.recvs if op.kind == "send" else self.sends).setdefault((op.comm, src, dst), [])
        if len(theirs) > len(mine):  # the k-th of one kind meets the k-th of the other
            op.partner = theirs[len(mine)]
            op.partner.partner = op
        mine.append(op)
        op.stream.append(op)
        if op.kind == "send":
            self.pending.append(op)
        self._progress()

    def _wait_until(self, ready, what: str) -> None:
        me = threading.get_ident()
        self.waiting[me] = what
        try:
            while not ready():
                now = time.monotonic()
                if now - self.last_check > DEADLOCK_S / 4:  # no waiter ran for a while: the process stalled,
                    self.last_progress = now                 # which is no evidence against the ranks
                self.last_check = now
                if self.deadlock is None and now - self.last_progress > DEADLOCK_S:
                    self.deadlock = "deadlock: " + "; ".join(sorted(self.waiting.values()))
                if self.deadlock is not None:
                    raise Deadlock(self.deadlock)
                self.cond.wait(0.05)
        finally:
            del self.waiting[me]


class _GroupRequest(Request):
    def __init__(self, world: World, ops: list[_Op], rank: int):
        self._world, self._ops, self._rank = world, ops, rank

    def wait(self) -> None:
        w = self._world
        with w.cond:
            w._progress()
            first = next((op for op in self._ops if not op.done), None)
            if first is not None:
                w._wait_until(lambda: all(op.done for op in self._ops), f"rank {self._rank} waits on {first}")


class NcclSemanticsComm(NumpyBuffers, Communicator):
    backend = "nccl-semantics"

    def __init__(self, world: World, comm_id: tuple, rank: int, size: int):
        self.world, self.id, self.rank, self.size = world, comm_id, rank, size
        self.reducer = world.make_reducer(rank) if world.make_reducer is not NumpyReducer else NumpyReducer()

    def enter_thread(self):
        if self.world.on_thread is not None:
            self.world.on_thread(self.rank)

    # --- buffers ---------------------------------------------------------------------------------
    def alloc(self, count, dtype):
        if self.world.buffers == "torch":
            import torch

            return torch.zeros(count, dtype=getattr(torch, dtype.torch_name))
        return super().alloc(count, dtype)

    def bind(self, collective, send, recv, op, in_place, root=0):
        raise NotImplementedError("the NCCL-semantics communicator models point-to-point calls only")

    # --- point-to-point --------------------------------------------------------------------------
    def _op(self, kind: str, buf, peer: int, group) -> _Op:
        if not 0 <= peer < self.size or peer == self.rank:
            raise ValueError(f"rank {self.rank}: {kind} with peer {peer} in a world of {self.size}")
        key = (self.id, self.rank, "group") if group is not None else (self.id, self.rank, peer)
        return _Op(kind, self.id, self.rank, peer, buf, self.world.streams.setdefault(key, []), group)

    def _lone(self, kind: str, buf, peer: int) -> Request:
        w = self.world
        with w.cond:
            pair, theirs = (self.id, self.rank, peer), (self.id, peer, self.rank)
            if pair not in w.pairs:  # the pair's communicator: created by both ranks' first lone call
                w.pairs_wanted.add(pair)
                w._progressed()
                w._wait_until(lambda: theirs in w.pairs_wanted,
                              f"rank {self.rank} creates its pair communicator with rank {peer} ({kind})")
                w.pairs.add(pair)
            op = self._op(kind, buf, peer, None)
            w._issue(op)
        return _GroupRequest(w, [op], self.rank)

    def isend(self, buf, dst, tag=0):
        return self._lone("send", buf, dst)

    def irecv(self, buf, src, tag=0):
        return self._lone("recv", buf, src)

    def exchange(self, sends, recvs):
        w, group = self.world, object()
        with w.cond:
            ops = ([self._op("recv", b, src, group) for b, src, _ in recvs]
                   + [self._op("send", b, dst, group) for b, dst, _ in sends])
            for op in ops:
                w._issue(op)
        return _GroupRequest(w, ops, self.rank)

    # --- collectives (they meet; no ordering against point-to-point) ----------------------------
    def _meet(self, value) -> list:
        w = self.world
        with w.cond:
            index = w.calls.get((self.id, self.rank), 0)
            w.calls[(self.id, self.rank)] = index + 1
            values = w.meetings.setdefault((self.id, index), {})
            values[self.rank] = value
            w._progressed()
            w._wait_until(lambda: len(values) == self.size, f"rank {self.rank} waits in collective #{index}")
            return [values[r] for r in range(self.size)]

    def barrier(self):
        self._meet(None)

    def allgather_object(self, obj):
        return self._meet(obj)

    def reduce_host(self, values, op):
        stacked = np.array(self._meet(np.asarray(values, dtype=np.float64)))
        return stacked.max(axis=0) if op == "max" else stacked.sum(axis=0)

    def split(self, color, key):
        index = self.world.calls.get((self.id, self.rank), 0)
        members = self.allgather_object((color, key, self.rank))
        ranks = [r for _, _, r in sorted(m for m in members if m[0] == color)]
        sub = NcclSemanticsComm(self.world, self.id + ((index, color),), ranks.index(self.rank), len(ranks))
        sub.reducer = self.reducer  # one rank, one device: the sub-communicators reduce alike
        return sub
