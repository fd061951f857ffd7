"""What every commbench algorithm shares: the context it runs in (communicator, reducer,
node layout, ring order), block partitions, segmenting for pipelining, and the binding of an
in-place algorithm to the in-place / out-of-place buffer layouts the harness uses.

An algorithm implements, in place, a method named after each collective it supports, called as
that collective's `bind_algorithm` says (e.g. all_reduce(ctx, buf, op): buf is the input and
ends as the reduction).
"""

from __future__ import annotations

import queue
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

# The backends and the collectives are imported when used, not when this package loads: the
# collectives' registry loads the plugins (commbench.plugins), and a plugin algorithm imports this
# package while the backends or the collectives may still be half-imported.
if TYPE_CHECKING:
    from commbench.backends.communicators import Communicator

MAX_SEGMENTS = 4096  # per block, so tags stay small


def bounds(count: int, parts: int) -> list[int]:
    """Boundaries of `parts` nearly equal blocks of `count` elements (uneven counts allowed)."""
    return [i * count // parts for i in range(parts + 1)]


def reduce_op(op: str) -> str:
    """Intermediate steps of avg add; the division happens once, at the end (Reducer.finish)."""
    return "sum" if op == "avg" else op


SEGMENT_BYTES = 1 << 20  # the pipelining unit of the own algorithms (--segment-bytes): messages are at most this long
SEGMENT_ELEMS = SEGMENT_BYTES // 4  # the same in float32 elements, where a count of messages is asked without a size


@dataclass
class Context:
    comm: Communicator
    node_of_rank: list[int]  # node index of every rank of comm
    segment_elems: int = SEGMENT_ELEMS
    cache: dict = field(default_factory=dict)  # sub-communicators etc., built once per job
    timeout_s: float = 120.0  # a wait inside a kernel gives up after this (the point's timeout, less a margin)
    channels: int | None = None  # the kernels' channels per call (None: by size; commbench.kernels.abi)
    notes: list = field(default_factory=list)  # one-line warnings for the run (rank 0's are shown once)
    arena: Any = None  # commbench ab: the memory both sides' buffers lie in (commbench.rank.arena), or None
    root: int = 0  # where a rooted collective starts or ends (--root: broadcast, reduce)
    peers: tuple[tuple[int, ...], ...] | None = None  # the uneven all-to-all's elements [i][j] from i to j (Counts.peers)

    @property
    def reducer(self):
        return self.comm.reducer

    def ring(self, order: str = "rank") -> list[int]:
        """Ranks in ring order: rank order, or "topology": node by node, so the ring leaves each
        node once."""
        return ring_order(self.node_of_rank, order)


def ring_order(node_of_rank: list[int], order: str = "rank") -> list[int]:
    ranks = list(range(len(node_of_rank)))
    if order == "topology":
        ranks.sort(key=lambda r: (node_of_rank[r], r))
    return ranks


def segments(comm: Communicator, views: list, seg: int) -> list:
    """Split views into pieces of at most `seg` elements (empty views give none)."""
    if len(views) == 1 and 0 < len(views[0]) <= seg:
        return views  # the common small case, kept cheap: it runs every step
    out = []
    for v in views:
        n = len(v)
        seg_n = max(seg, -(-n // MAX_SEGMENTS))
        out += [comm.view(v, o, min(seg_n, n - o)) for o in range(0, n, seg_n)]
    return out


class Pipeline:
    """The pipelined stages' second thread, started once per communicator (as NCCL's proxy thread) and
    kept in the algorithm context's cache, so that no thread is created or joined inside a timed call.

    `run` sends every item through before, across and after, in that order, overlapping the items:
    across runs in this thread (which first entered comm's device: comm.enter_thread), before and
    after in the calling thread: before of items 0 and 1, then, as each item k has crossed, after of
    item k and before of item k+2, so while across does item k the calling thread does after of item
    k-1 and before of item k+1. Where across is the slowest, the whole takes before(first) + every
    across + after(last), and only two threads of the rank are ever busy (a thread per stage made the
    ranks of a host with fewer cores than threads wait for their turns: docs, Emulated clusters).
    across must use a communicator of its own; before and after, one after the other in one thread,
    may share one. The thread is a daemon that waits between calls and ends with the process."""

    def __init__(self, comm: Communicator):
        self._ready: queue.SimpleQueue = queue.SimpleQueue()  # (call, across, item) whose before is done; None: stop
        self._crossed: queue.SimpleQueue = queue.SimpleQueue()  # per task: None (crossed) or its exception
        self._call = 0  # the current call's number
        self._failed = -1  # the call whose crossing raised: its later items are skipped (the others' steps too)
        self._thread = threading.Thread(target=self._serve, args=(comm,), daemon=True, name="commbench-pipeline")
        self._thread.start()

    def _serve(self, comm: Communicator) -> None:
        entered: BaseException | None = None
        try:
            comm.enter_thread()
        except BaseException as exc:  # noqa: BLE001 - every call then raises it in the caller's thread
            entered = exc
        while (task := self._ready.get()) is not None:
            call, across, item = task
            if entered is not None or call == self._failed:
                self._crossed.put(entered or _SKIPPED)
                continue
            try:
                across(item)
                self._crossed.put(None)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the caller's thread
                self._failed = call
                self._crossed.put(exc)

    def run(self, before: Callable[[Any], None], across: Callable[[Any], None], after: Callable[[Any], None],
            items: list) -> None:
        self._call += 1
        pending, error = 0, None
        try:
            for k in range(min(2, len(items))):
                before(items[k])
                self._ready.put((self._call, across, items[k]))
                pending += 1
            for k in range(len(items)):
                result = self._crossed.get()
                pending -= 1
                if result is not None:
                    error = result
                    break
                after(items[k])
                if k + 2 < len(items):
                    before(items[k + 2])
                    self._ready.put((self._call, across, items[k + 2]))
                    pending += 1
        finally:  # the items already handed over cross (as every rank's do), and their answers are taken
            for _ in range(pending):
                found = self._crossed.get()
                error = error or (found if found is not _SKIPPED else None)
        if error is not None:
            raise error if error is not _SKIPPED else RuntimeError("the pipeline skipped an item")


_SKIPPED = RuntimeError("skipped: an earlier item of its call failed")


def pipeline(before, across, after, items: list, ctx: Context) -> None:
    """Pipeline.run on the context's communicator's pipeline thread, started at its first use."""
    found = ctx.cache.get("pipeline")
    if found is None:
        found = ctx.cache["pipeline"] = Pipeline(ctx.comm)
    found.run(before, across, after, items)


def scratch_pair(ctx: Context, key, length: int, like) -> list:
    """Two scratch buffers of `length` elements, allocated once and reused across calls."""
    cache_key = ("scratch", key, like.dtype)
    cached = ctx.cache.get(cache_key)
    if cached is None or len(cached[0]) < length:
        cached = [ctx.comm.alloc_like(like, max(length, 1)) for _ in range(2)]
        ctx.cache[cache_key] = cached
    return cached


def wait_all(requests: list) -> None:
    for r in requests:
        r.wait()
    requests.clear()


class Algorithm:
    """Base: subclasses define some of all_reduce / all_gather / reduce_scatter / broadcast / reduce /
    all_to_all (each collective's bind_algorithm says how it is called)."""

    name = ""
    reads_source = False  # all_reduce / reduce_scatter accept src=: out-of-place without a copy
    sends_messages = True  # its data goes through the communicator's point-to-point calls (not so: peer)
    description = ""  # one line for the help texts
    predicted = True  # `commbench model predict` shows it (when it has a cost)
    engine = "steps"  # what a step costs: "steps", a library call each; "kernel", a flag hand-off (fitted apart)
    threads = False  # calls the library from several threads at once (pipeline): MPI_THREAD_MULTIPLE
    one_node = False  # runs the ranks of one node only (the kernels: their data moves through the node's memory)

    @property
    def collectives(self) -> tuple[str, ...]:
        """The collectives it runs: those of the registry it has a method for."""
        from commbench.collectives import COLLECTIVES  # when used: see the imports above

        return tuple(c for c in COLLECTIVES if callable(getattr(self, c, None)))

    @property
    def modelled(self) -> bool:
        """Whether the cost model knows it: it defines cost()."""
        return type(self).cost is not Algorithm.cost

    def cost(self, p, shape, collective: str, size_bytes: float, segment_bytes: int) -> float:
        """Modelled seconds of one call of a collective it runs, on size_bytes (N as in
        nccl-tests) for shape (commbench.algorithms.cost.Shape, n > 1) with the parameters
        p (cost.Params, already adjusted to the call's working set). The formula is in the docstring."""
        raise NotImplementedError(f"{self.name} has no cost model")

    def messages(self, collective: str, elems: int, node_of_rank: list[int], segment_elems: int = SEGMENT_ELEMS) -> Counter:
        """What one call sends, as {(source rank, destination rank): elements}: the analytical
        traffic that link counters are checked against and the cost model charges. elems: the
        all-reduce buffer, or one rank's block for all-gather and reduce-scatter; segment_elems
        as in Context (the totals do not depend on it)."""
        raise NotImplementedError

    def unsupported(self, ctx: Context, collective: str) -> str | None:
        if collective not in self.collectives:
            runs = ", ".join(c.replace("_", "-") for c in self.collectives)
            return f"{self.name} has no {collective.replace('_', '-')} (it runs {runs})"
        if self.sends_messages and not ctx.comm.carries_device_buffers:
            return (f"{ctx.comm.backend} cannot send {ctx.comm.device} buffers point to point; "
                    "the peer algorithms need no sends")
        return None

    def allocator(self, ctx: Context) -> Callable[[int, Any], Any] | None:
        """Where the harness puts this algorithm's buffers, as (count, DType) -> buffer, called
        collectively; None: the communicator's alloc (the kernels put them in the node's shared
        memory)."""
        return None

    def bind(self, ctx: Context, collective: str, send: Any, recv: Any, op: str | None, in_place: bool,
             in_count: int, out_count: int) -> tuple[Callable[[], None], Any]:
        """A zero-argument callable running this algorithm once on the harness' buffers, and the
        buffer holding this rank's output (the collective adapts the layouts: bind_algorithm)."""
        from commbench.collectives import COLLECTIVES  # when used: see the imports above

        ctx.comm.reducer.prepare()  # a CUDA reducer builds its kernels here, not in the first timed call
        return COLLECTIVES[collective].bind_algorithm(self, ctx, send, recv, op, in_place, in_count, out_count)
