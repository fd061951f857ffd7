"""ring_kernel and tree_kernel: the ring of ring.py and the double binary tree of dbtree.py, each
call run by every rank of a node as one persistent kernel that does every step itself: a GPU
kernel on CUDA tensors, the same source built for the host on CPU buffers (cuda/collectives.cu,
where the steps are; commbench/rank/kernel_node.py builds, maps and binds it). No message goes
through the communicator: the ranks' shared regions carry the data, sequence-number flags the
synchronisation, so one call costs the data movement and 2(n-1) (ring) or 2·depth (tree) flag
hand-offs, not a library call per step.

Their costs are the ring's and the double binary tree's formulas (inherited), fitted apart from
the Python algorithms by the cost model (an α of flags, not of library calls).
"""

from __future__ import annotations

from commbench.rank import kernel_node, kernels
from commbench.rank.peermem import itemsize
from commbench.rank.algorithms.base import Algorithm
from commbench.rank.algorithms.dbtree import DoubleBinaryTree
from commbench.rank.algorithms.ring import Ring

NODE_KEY = "node-kernels"


class _Kernel(Algorithm):
    kernel = ""  # the schedule's name in cuda/collectives.cu: "ring" or "tree"
    reads_source = True
    sends_messages = False
    engine = "kernel"  # fitted apart from the algorithms whose steps are library calls

    def unsupported(self, ctx, collective):
        reason = super().unsupported(ctx, collective)
        if reason:
            return reason
        nodes = len(set(ctx.node_of_rank))
        if nodes > 1:
            return f"{self.name} runs the ranks of one node (these ranks are on {nodes} nodes)"
        if ctx.comm.size > kernels.MAX_RANKS:
            return f"{self.name} runs at most {kernels.MAX_RANKS} ranks"
        return kernel_node.unavailable(ctx.comm.device)

    def node(self, ctx) -> kernel_node.NodeKernels:
        """The communicator's regions and CbComm, built once per job (collectively)."""
        node = ctx.cache.get(NODE_KEY)
        if node is None:
            node = ctx.cache[NODE_KEY] = kernel_node.NodeKernels(ctx.comm, ctx.comm.device, ctx.timeout_s,
                                                             ctx.channels or kernels.MAX_AUTO_CHANNELS[ctx.comm.device])
            if node.note:
                ctx.notes.append(node.note)
        return node

    def bind(self, ctx, collective, send, recv, op, in_place, in_count, out_count):
        """The kernel on the harness' buffers as they are (in place, send and recv overlap as the
        kernel expects); avg divides afterwards, as the other algorithms' finish does."""
        node, red = self.node(ctx), ctx.comm.reducer
        dtype = str(recv.dtype).replace("torch.", "")
        node.set_timeout(ctx.timeout_s)
        size = itemsize(recv)
        count = {"all_reduce": in_count, "reduce_scatter": out_count, "all_gather": in_count * size}[collective]
        channels = node.call_channels(max(in_count, out_count) * size, ctx.channels)
        run = node.bind(kernels.entry(self.kernel, collective, dtype, op), dtype, send, recv, count, channels)
        if op != "avg":
            return run, recv

        def run_then_divide():
            run()
            red.finish(recv, op, ctx.comm.size)
        return run_then_divide, recv

    def _once(self, ctx, collective, send, recv, op, in_count, out_count):
        fn, _ = self.bind(ctx, collective, send, recv, op, send is recv, in_count, out_count)
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
