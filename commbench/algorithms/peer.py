"""Peer-memory collectives: on one node every rank reads the other ranks' buffers directly.

Each call, a rank copies its input into its own staging slot; the ranks meet at a barrier; then
each computes its output by reading the peers' slots (commbench.kernels.peermem: a /dev/shm mapping on
the CPU, CUDA IPC on the GPU, where the reductions are commbench's kernels reading peer memory;
the reducer's reduce_many reads all n slots in one pass over the output there).
No message goes through the communicator.

* peer_oneshot  all-reduce: barrier; out = x_0 op x_1 op ... op x_(n-1), every rank reading all
                slots in rank order (so every rank computes the bit-identical sum). One step.
                all-gather: own block into the slot; barrier; block q copied from rank q's slot.
                reduce-scatter: barrier; block r reduced over all slots.
* peer_twoshot  all-reduce: barrier; rank r reduces block r over all slots into its own slot
                (reduce-scatter); barrier; block q copied from rank q's slot (all-gather).

Cost for N bytes (β per byte read from a peer or copied, γ per reduced byte, σ a barrier; not in
the fitted model, which has no σ: these algorithms define no cost()):
  peer_oneshot all-reduce    N·β + σ + (n-1)·N·(β + γ)           reads the whole buffer of every peer
  peer_twoshot all-reduce    N·β + 2σ + (n-1)/n·N·(β + γ) + (n-1)/n·N·β
  all-gather                 N/n·β + σ + (n-1)/n·N·β
  reduce-scatter             N·β + σ + (n-1)/n·N·(β + γ)         N = one rank's input
One-shot wins while σ dominates (small buffers), two-shot once the n-fold reads do.

peer_oneshot_gpuflags and peer_twoshot_gpuflags (--device cuda) are the same algorithms with σ
waited on by the GPU (a kernel spinning on the flags, cuda/peer_flags.cu) instead of the host
(a stream synchronisation per barrier): the whole call is queued without the host waiting.
"""

from __future__ import annotations

from collections import Counter

from commbench.kernels import peermem
from commbench.algorithms.base import SEGMENT_ELEMS, Algorithm, bounds, reduce_op

MIN_SLOT_BYTES = 1 << 16


def memory(ctx, nbytes: int, like) -> peermem.PeerMemory:
    """The job's peer memory for buffers like `like`, grown (by powers of two) to nbytes a slot.
    Every rank calls it with the same size at the same point (from bind), collectively."""
    key = ("peer-memory", peermem.is_cuda(like))
    mem = ctx.cache.get(key)
    if mem is None or mem.slot_bytes < nbytes:
        if mem is not None:
            mem.close()
        size = MIN_SLOT_BYTES
        while size < nbytes:
            size *= 2
        mem = ctx.cache[key] = peermem.PeerMemory(ctx.comm, size, like, ctx.timeout_s)
    return mem


class _PeerMemoryAlgorithm(Algorithm):
    reads_source = True
    sends_messages = False
    flags_on_gpu = False  # barriers waited on by a GPU kernel instead of the host

    def unsupported(self, ctx, collective):
        if self.flags_on_gpu and ctx.comm.device != "cuda":
            return f"{self.name} waits on its flags in a GPU kernel: it runs with --device cuda"
        return super().unsupported(ctx, collective) or peermem.unsupported(ctx.node_of_rank)

    def bind(self, ctx, collective, send, recv, op, in_place, in_count, out_count):
        like = recv if len(recv) else send
        memory(ctx, max(in_count, out_count) * peermem.itemsize(like), like)  # before timing
        return super().bind(ctx, collective, send, recv, op, in_place, in_count, out_count)

    def _stage(self, ctx, data):
        """Copy this rank's input into its slot and meet the others: the slots of every rank."""
        mem = memory(ctx, len(data) * peermem.itemsize(data), data)
        parity = mem.next_parity()
        ctx.reducer.copy(mem.slot(ctx.comm.rank, parity, data, len(data)), data)
        mem.barrier(self.flags_on_gpu)
        return mem, [mem.slot(r, parity, data, len(data)) for r in range(ctx.comm.size)]


class PeerOneShot(_PeerMemoryAlgorithm):
    name = "peer_oneshot"
    description = "one node: every rank reads every peer's buffer (one step)"

    def messages(self, collective, elems, node_of_rank, segment_elems=SEGMENT_ELEMS):
        """Elements each rank reads from each peer's memory, as if the peer had sent them."""
        n = len(node_of_rank)
        return Counter({(q, r): elems for r in range(n) for q in range(n) if q != r})

    def all_reduce(self, ctx, buf, op, src=None):
        _, slots = self._stage(ctx, buf if src is None else src)
        ctx.reducer.reduce_many(buf, slots, reduce_op(op))
        ctx.reducer.finish(buf, op, ctx.comm.size)

    def all_gather(self, ctx, buf, block):
        comm = ctx.comm
        _, slots = self._stage(ctx, comm.view(buf, comm.rank * block, block))
        for q in range(comm.size):
            if q != comm.rank:
                ctx.reducer.copy(comm.view(buf, q * block, block), slots[q])

    def reduce_scatter(self, ctx, buf, op, block, src=None):
        comm = ctx.comm
        _, slots = self._stage(ctx, buf if src is None else src)
        mine = comm.view(buf, comm.rank * block, block)
        ctx.reducer.reduce_many(mine, [comm.view(s, comm.rank * block, block) for s in slots], reduce_op(op))
        ctx.reducer.finish(mine, op, comm.size)


class PeerTwoShot(_PeerMemoryAlgorithm):
    name = "peer_twoshot"
    description = "one node: reduce-scatter then all-gather through peer memory"

    def messages(self, collective, elems, node_of_rank, segment_elems=SEGMENT_ELEMS):
        """Block r of every peer (reduce-scatter), then block q from peer q (all-gather)."""
        n, b = len(node_of_rank), bounds(elems, len(node_of_rank))
        return Counter({(q, r): (b[r + 1] - b[r]) + (b[q + 1] - b[q]) for r in range(n) for q in range(n) if q != r})

    def all_reduce(self, ctx, buf, op, src=None):
        comm, red = ctx.comm, ctx.reducer
        mem, slots = self._stage(ctx, buf if src is None else src)
        b = bounds(len(buf), comm.size)
        block = [[comm.view(s, b[q], b[q + 1] - b[q]) for s in slots] for q in range(comm.size)]
        mine = block[comm.rank]
        own = mine[comm.rank]  # reduced in place: starting from its own slot, no other input is overwritten
        red.reduce_many(own, [own] + [s for r, s in enumerate(mine) if r != comm.rank], reduce_op(op))
        red.finish(own, op, comm.size)
        mem.barrier(self.flags_on_gpu)
        for q in range(comm.size):
            red.copy(comm.view(buf, b[q], b[q + 1] - b[q]), block[q][q])


class PeerOneShotGpuFlags(PeerOneShot):
    name = "peer_oneshot_gpuflags"
    description = "peer_oneshot with its barriers waited on by a GPU kernel (--device cuda)"
    flags_on_gpu = True


class PeerTwoShotGpuFlags(PeerTwoShot):
    name = "peer_twoshot_gpuflags"
    description = "peer_twoshot with its barriers waited on by a GPU kernel (--device cuda)"
    flags_on_gpu = True
