"""ring_kernel and tree_kernel: the ring of ring.py and the double binary tree of dbtree.py, each
call run by every rank of a node as one persistent kernel that does every step itself: a GPU
kernel on CUDA tensors, the same source built for the host on CPU buffers (cuda/collectives.cu,
where the steps are; commbench/kernels/node.py builds, maps and binds it). No message goes
through the communicator: the ranks' shared regions carry the data, sequence-number flags the
synchronisation, so one call costs the data movement and 2(n-1) (ring) or 2·depth (tree) flag
hand-offs, not a library call per step. A small call (each peer's message within
kernel_abi.ONESHOT_MAX, for the kernel asked) runs the one-shot schedule instead: every rank sends each
peer its message at once and reduces what arrives, one hand-off (on the CPU; NCCL too picks its
protocol by size).

Their costs are the ring's and the double binary tree's formulas (inherited), fitted apart from
the Python algorithms by the cost model (an α of flags, not of library calls); a point that ran
one-shot (its row's library_choice) is not fitted.

Across nodes, hierarchical_kernel (hierarchical_kernel.py) runs the ring kernel on each node's
sub-communicator (RingOn, below) and the backend's point-to-point ring between the nodes.
"""

from __future__ import annotations

from commbench.errors import Unavailable
from commbench.kernels import abi as kernel_abi
from commbench.kernels import node as kernel_node
from commbench.machine.load import machine_id
from commbench.kernels.peermem import itemsize
from commbench.algorithms.base import Algorithm
from commbench.algorithms.dbtree import DoubleBinaryTree
from commbench.algorithms.ring import Ring

NODE_KEY = "node-kernels"
MAX_BOUND = 256  # RingOn keeps at most this many bound calls (a point's buffers need a few dozen)


def host_ranks(ctx) -> int:
    """How many ranks of the job run on this rank's machine (collectively, once per job; machines told
    apart by the kernel's boot id): they share its cores, however many nodes --ranks-per-node or
    --emulate make of them (MPI's emulated nodes have host names of their own)."""
    if "host-ranks" not in ctx.cache:
        names = ctx.comm.allgather_object(machine_id())
        ctx.cache["host-ranks"] = names.count(names[ctx.comm.rank])
    return ctx.cache["host-ranks"]


def node_kernels(ctx, comm=None, key: str = NODE_KEY, beside_backend: bool = False) -> kernel_node.NodeKernels:
    """The kernels of one communicator of the job (ctx.comm, or a sub-communicator under a key of
    its own: each has its own regions and CbComm), built once per job, collectively; beside_backend:
    they run while the backend's transfers do (kernel_node.NodeKernels)."""
    node = ctx.cache.get(key)
    if node is None:
        comm = comm or ctx.comm
        node = ctx.cache[key] = kernel_node.NodeKernels(comm, comm.device, ctx.timeout_s,
                                                        ctx.channels or kernel_abi.tuned("max_channels", comm.device),
                                                        host_ranks(ctx), beside_backend)
        if node.note:
            ctx.notes.append(node.note)
    return node


class RingOn:
    """The ring kernel on one communicator whose ranks share a node (a node's sub-communicator),
    called by an algorithm's steps on contiguous buffers with equal blocks per rank, beside the
    backend's steps between nodes. A call is bound once per buffers and kept: the harness reuses its
    buffers, so a timed loop binds nothing."""

    def __init__(self, ctx, comm, key: str):
        self.ctx, self.node, self.bound = ctx, node_kernels(ctx, comm, key, beside_backend=True), {}

    def reduce_scatter(self, send, recv, op: str, count: int) -> None:
        """send: n blocks of `count` elements; recv: rank r's block r reduced (in place: send's block r)."""
        self._call("reduce_scatter", send, recv, op, count, self.node.n * count)

    def all_gather(self, send, recv, count: int) -> None:
        """send: this rank's block of `count` elements; recv: the n blocks (in place: send is recv's block r)."""
        size = itemsize(recv)
        self._call("all_gather", send, recv, None, count * size, self.node.n * count)

    def all_reduce(self, send, recv, op: str, count: int) -> None:
        self._call("all_reduce", send, recv, op, count, count)

    def _call(self, collective, send, recv, op, count, elems):
        key = (collective, recv.dtype, op, kernel_abi.address(send), kernel_abi.address(recv), count, self.ctx.channels)
        run = self.bound.get(key)
        if run is None:  # (the channels are chosen here, once per bound call, never in the timed call)
            if len(self.bound) >= MAX_BOUND:
                self.bound.clear()
            dtype = str(recv.dtype).replace("torch.", "")
            message = count if collective == "all_gather" else count * itemsize(recv)
            name, channels = self.node.entry_and_channels("ring", collective, dtype, op, message,
                                                          elems * itemsize(recv), self.ctx.channels)
            run = self.bound[key] = self.node.bind(name, dtype, send, recv, count, channels)
        run()


def ring_on(ctx, comm, key: str) -> RingOn:
    """The RingOn of a sub-communicator, built once per job (collectively) under `key`."""
    if ("ring-on", key) not in ctx.cache:
        ctx.cache[("ring-on", key)] = RingOn(ctx, comm, key)
    return ctx.cache[("ring-on", key)]


def unavailable(name: str, ctx, ranks: int) -> str | None:
    """Why an algorithm running kernels on `ranks` ranks of a node cannot run here, or None (on a
    GPU collective: the ranks compare their GPUs, kernel_node.gpu_refusal)."""
    if ranks > kernel_abi.MAX_NODE_RANKS:
        return f"{name} runs at most {kernel_abi.MAX_NODE_RANKS} ranks on a node"
    built = kernel_node.unavailable(ctx.comm.device)
    gpu = kernel_node.gpu_refusal(ctx, built) if ctx.comm.device == "cuda" else None
    return None if not (built or gpu) else Unavailable(built or gpu)


class _Kernel(Algorithm):
    kernel = ""  # the schedule's name in cuda/collectives.cu: "ring" or "tree"
    KERNEL_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")  # what cuda/collectives.cu has entries for
    reads_source = True
    sends_messages = False
    engine = "kernel"  # fitted apart from the algorithms whose steps are library calls
    one_node = True

    @property
    def collectives(self):
        return tuple(c for c in super().collectives if c in self.KERNEL_COLLECTIVES)

    def unsupported(self, ctx, collective):
        reason = super().unsupported(ctx, collective)
        if reason:
            return reason
        nodes = len(set(ctx.node_of_rank))
        if nodes > 1:
            return f"{self.name} runs the ranks of one node (these ranks are on {nodes} nodes)"
        return unavailable(self.name, ctx, ctx.comm.size)

    def node(self, ctx) -> kernel_node.NodeKernels:
        """The communicator's regions and CbComm, built once per job (collectively)."""
        return node_kernels(ctx)

    def allocator(self, ctx):
        return self.node(ctx).allocator(ctx.notes, ctx.arena)

    def bind(self, ctx, collective, send, recv, op, in_place, in_count, out_count):
        """The kernel on the harness' buffers as they are (in place, send and recv overlap as the
        kernel expects; from allocator(), so all-gather and the ring all-reduce may run direct); avg divides afterwards,
        as the other algorithms' finish does."""
        return self._bind(ctx, collective, send, recv, op, in_count, out_count, direct=True)

    def _bind(self, ctx, collective, send, recv, op, in_count, out_count, direct: bool):
        node, red = self.node(ctx), ctx.comm.reducer
        dtype = str(recv.dtype).replace("torch.", "")
        node.set_timeout(ctx.timeout_s)
        size = itemsize(recv)
        count = {"all_reduce": in_count, "reduce_scatter": out_count, "all_gather": in_count * size}[collective]
        message = (out_count if collective == "reduce_scatter" else in_count) * size  # to each peer, one-shot
        name, channels = node.entry_and_channels(self.kernel, collective, dtype, op, message,
                                                 max(in_count, out_count) * size, ctx.channels)
        run = node.bind(name, dtype, send, recv, count, channels, direct)
        if op != "avg":
            run.schedule = kernel_abi.schedule_of(name)  # the row's library_choice
            return run, recv

        def run_then_divide():
            run()
            red.finish(recv, op, ctx.comm.size)
        run_then_divide.schedule = kernel_abi.schedule_of(name)
        return run_then_divide, recv

    def _once(self, ctx, collective, send, recv, op, in_count, out_count):
        """One call on any buffers (the algorithm's own methods): through the FIFOs."""
        fn, _ = self._bind(ctx, collective, send, recv, op, in_count, out_count, direct=False)
        fn()

    def all_reduce(self, ctx, buf, op, src=None):
        self._once(ctx, "all_reduce", buf if src is None else src, buf, op, len(buf), len(buf))


class RingKernel(_Kernel, Ring):
    name = "ring_kernel"
    description = "ring as one kernel per call over the node's shared memory (cuda/collectives.cu)"
    kernel = "ring"

    def reduce_scatter(self, ctx, buf, op, block, src=None):
        mine = ctx.comm.view(buf, ctx.comm.rank * block, block)
        self._once(ctx, "reduce_scatter", buf if src is None else src, mine, op, len(buf), block)

    def all_gather(self, ctx, buf, block):
        mine = ctx.comm.view(buf, ctx.comm.rank * block, block)
        self._once(ctx, "all_gather", mine, buf, None, block, len(buf))


class TreeKernel(_Kernel, DoubleBinaryTree):
    name = "tree_kernel"
    description = "double binary tree as one kernel per call over the node's shared memory"
    kernel = "tree"
