"""ring_kernel and tree_kernel as algorithms (commbench/algorithms/kernel.py), without running
a kernel: which entry of cuda/collectives.cu a call binds and with what count, their refusals,
their allocator, how a node's kernels are built once and RingOn's bound calls kept. A stand-in
for the node's kernels (kernel_node.NodeKernels) records what it is asked; the kernels themselves
run in tests/kernels/test_kernel_host.py and, in jobs, tests/algorithms/test_kernel.py."""

import numpy as np
import pytest
from nccl_semantics import World

from commbench.kernels import abi as kernel_abi
from commbench.algorithms import ALGORITHMS, Context
from commbench.algorithms import kernel as K
from commbench.algorithms.cost import Params, Shape
from commbench.algorithms.dbtree import DoubleBinaryTree
from commbench.algorithms.ring import Ring

RING_K, TREE_K = ALGORITHMS["ring_kernel"], ALGORITHMS["tree_kernel"]


class FakeNode:
    """What _Kernel and RingOn ask of kernel_node.NodeKernels, recorded; a bound call writes 2·(k+1)
    into its output's element k (so that avg's division afterwards shows)."""

    def __init__(self, n=2):
        self.n, self.binds, self.timeouts, self.channel_asks, self.allocators = n, [], [], [], []
        self.messages = []  # (collective, bytes of each peer's message) asked of entry_and_channels

    def set_timeout(self, seconds):
        self.timeouts.append(seconds)

    def call_channels(self, nbytes, wanted, name, dtype):
        self.channel_asks.append((nbytes, wanted))
        return 3

    def entry_and_channels(self, kernel, collective, dtype, op, message_bytes, nbytes, wanted):
        """The kernel's own entry, whatever the message (NodeKernels' one-shot choice: test_kernel_node.py)."""
        self.messages.append((collective, message_bytes))
        name = kernel_abi.entry(kernel, collective, dtype, op)
        return name, self.call_channels(nbytes, wanted, name, dtype)

    def bind(self, name, dtype, send, recv, count, channels, direct=False):
        self.binds.append({"name": name, "dtype": dtype, "send": send, "recv": recv, "count": count,
                           "channels": channels, "direct": direct})

        def run():
            recv[...] = 2.0 * np.arange(1, len(recv) + 1)
        return run

    def allocator(self, notes, arena):
        self.allocators.append((notes, arena))
        return "the node's allocator"


def _ctx(n=2, rank=0, nodes=None, node=None, **kw):
    ctx = Context(World(n).comm(rank), nodes if nodes is not None else [0] * n, **kw)
    if node is not None:
        ctx.cache[K.NODE_KEY] = node
    return ctx


# --- bind: entry names, counts, channels ----------------------------------------------------------------
@pytest.mark.parametrize("algorithm,collective,op,name", [
    (RING_K, "all_reduce", "max", "cb_ring_all_reduce_float32_max"),
    (RING_K, "all_reduce", "avg", "cb_ring_all_reduce_float32_sum"),  # avg runs as sum, then divides
    (RING_K, "reduce_scatter", "prod", "cb_ring_reduce_scatter_float32_prod"),
    (RING_K, "all_gather", None, "cb_ring_all_gather"),  # bytes, one entry for every dtype
    (TREE_K, "all_reduce", "min", "cb_tree_all_reduce_float32_min"),
])
def test_bind_names_the_entry_and_its_count(algorithm, collective, op, name):
    node = FakeNode()
    ctx = _ctx(node=node, timeout_s=42.0, channels=5)
    in_count, out_count = {"all_reduce": (6, 6), "reduce_scatter": (6, 3), "all_gather": (3, 6)}[collective]
    send, recv = np.zeros(in_count, np.float32), np.zeros(out_count, np.float32)
    fn, out = algorithm.bind(ctx, collective, send, recv, op, False, in_count, out_count)
    (b,) = node.binds
    count = {"all_reduce": 6, "reduce_scatter": 3, "all_gather": 3 * 4}[collective]  # all-gather: one block's bytes
    assert (b["name"], b["dtype"], b["count"], b["channels"], b["direct"]) == (name, "float32", count, 3, True)
    assert b["send"] is send and b["recv"] is recv and out is recv
    assert node.timeouts == [42.0] and node.channel_asks == [(6 * 4, 5)]  # the larger buffer's bytes
    assert node.messages == [(collective, {"all_reduce": 6 * 4}.get(collective, 3 * 4))]  # each peer's: a block
    fn()
    want = 2.0 * np.arange(1, out_count + 1) / (2 if op == "avg" else 1)  # avg: the sum divided by n = 2
    assert recv.tolist() == want.tolist()


def test_methods_go_through_the_fifos_on_any_buffer():
    """The algorithm's own methods (hierarchical calls them): direct=False, in place on buf, or
    from src=."""
    node = FakeNode()
    ctx = _ctx(n=2, rank=1, node=node)
    buf, src = np.zeros(6, np.float64), np.ones(6, np.float64)
    RING_K.all_reduce(ctx, buf, "sum", src=src)
    RING_K.reduce_scatter(ctx, buf, "sum", 3)
    RING_K.all_gather(ctx, buf, 3)
    TREE_K.all_reduce(ctx, buf, "sum")
    ar, rs, ag, tree = node.binds
    assert not any(b["direct"] for b in node.binds)
    assert ar["send"] is src and ar["recv"] is buf and ar["count"] == 6 and ar["dtype"] == "float64"
    assert rs["send"] is buf and np.shares_memory(rs["recv"], buf[3:]) and len(rs["recv"]) == 3 and rs["count"] == 3
    assert np.shares_memory(ag["send"], buf[3:]) and ag["recv"] is buf and ag["count"] == 3 * 8
    assert tree["name"] == "cb_tree_all_reduce_float64_sum" and tree["send"] is tree["recv"] is buf


def test_the_costs_and_messages_are_the_rings_and_the_trees():
    p, shape = Params(1e-6, 1e-9, 1e-5, 1e-8, 1e-10), Shape(1, 4)
    assert RING_K.cost(p, shape, "all_reduce", 4096, 1024) == Ring().cost(p, shape, "all_reduce", 4096, 1024)
    assert TREE_K.cost(p, shape, "all_reduce", 4096, 1024) == DoubleBinaryTree().cost(p, shape, "all_reduce", 4096,
                                                                                     1024)
    assert RING_K.messages("all_gather", 3, [0] * 3) == Ring().messages("all_gather", 3, [0] * 3)
    assert RING_K.collectives == ("all_reduce", "all_gather", "reduce_scatter") and TREE_K.collectives == (
        "all_reduce",)
    for a in (RING_K, TREE_K):
        assert (a.engine, a.one_node, a.sends_messages, a.reads_source) == ("kernel", True, False, True)


# --- refusals -------------------------------------------------------------------------------------------------
def test_unsupported_reasons(monkeypatch):
    monkeypatch.setattr(K.kernel_node, "unavailable", lambda device: None)
    assert RING_K.unsupported(_ctx(), "all_reduce") is None
    assert TREE_K.unsupported(_ctx(), "reduce_scatter") == "tree_kernel has no reduce-scatter (it runs all-reduce)"
    assert RING_K.unsupported(_ctx(4, nodes=[0, 0, 1, 1]), "all_reduce") == (
        "ring_kernel runs the ranks of one node (these ranks are on 2 nodes)")
    big = kernel_abi.MAX_NODE_RANKS + 1
    assert TREE_K.unsupported(_ctx(big), "all_reduce") == f"tree_kernel runs at most {kernel_abi.MAX_NODE_RANKS} ranks on a node"
    monkeypatch.setattr(K.kernel_node, "unavailable", lambda device: f"no build for {device}")
    assert RING_K.unsupported(_ctx(), "all_gather") == "no build for cpu"


def test_no_sends_so_a_backend_without_device_sends_is_fine(monkeypatch):
    monkeypatch.setattr(K.kernel_node, "unavailable", lambda device: None)
    ctx = _ctx()
    ctx.comm.carries_device_buffers = False
    assert RING_K.unsupported(ctx, "all_reduce") is None
    assert "cannot send" in Ring().unsupported(ctx, "all_reduce")


def test_unavailable_checks_the_rank_limit_before_building(monkeypatch):
    built = []
    monkeypatch.setattr(K.kernel_node, "unavailable", lambda device: built.append(device))
    assert K.unavailable("hierarchical_kernel", _ctx(), kernel_abi.MAX_NODE_RANKS + 1).startswith("hierarchical_kernel runs")
    assert built == []
    assert K.unavailable("x", _ctx(), kernel_abi.MAX_NODE_RANKS) is None and built == ["cpu"]


# --- allocator and the node's kernels --------------------------------------------------------------------------
def test_allocator_is_the_nodes_with_the_contexts_notes_and_arena():
    node = FakeNode()
    ctx = _ctx(node=node)
    ctx.arena = "an arena"
    assert RING_K.allocator(ctx) == "the node's allocator"
    assert node.allocators == [(ctx.notes, "an arena")] and node.allocators[0][0] is ctx.notes
    assert Ring().allocator(ctx) is None  # the other algorithms: the communicator's


def test_node_kernels_are_built_once_per_key_with_the_hosts_ranks(monkeypatch):
    made = []

    class Built:
        def __init__(self, comm, device, timeout_s, channels, host_ranks, beside_backend):
            made.append((comm.rank, device, timeout_s, channels, host_ranks, beside_backend))
            self.note = "a note from the node"

    monkeypatch.setattr(K.kernel_node, "NodeKernels", Built)

    def rank(comm):
        ctx = Context(comm, [0] * 3, timeout_s=9.0)
        first = K.node_kernels(ctx)
        again = K.node_kernels(ctx)
        other = K.node_kernels(ctx, key="sub", beside_backend=True)
        return first is again, first is not other, ctx.notes, ctx.cache["host-ranks"]

    for same, distinct, notes, hosts in World(3).run(rank):
        assert same and distinct and hosts == 3  # one host: all 3 ranks share it
        assert notes == ["a note from the node"] * 2
    assert sorted(made) == sorted((r, "cpu", 9.0, kernel_abi.MAX_AUTO_CHANNELS["cpu"], 3, beside)
                                  for r in range(3) for beside in (False, True))


def test_ring_on_binds_once_per_buffers_and_keeps_a_bounded_cache(monkeypatch):
    node = FakeNode(n=2)
    ctx = _ctx(node=None)
    ctx.cache["sub-node"] = node
    ring = K.ring_on(ctx, ctx.comm, "sub-node")
    assert K.ring_on(ctx, ctx.comm, "sub-node") is ring
    send, recv = np.zeros(8, np.int32), np.zeros(4, np.int32)
    ring.reduce_scatter(send, recv, "max", 4)
    ring.reduce_scatter(send, recv, "max", 4)  # the same call: no new binding
    assert len(node.binds) == 1 and node.binds[0]["name"] == "cb_ring_reduce_scatter_int32_max"
    assert node.binds[0]["count"] == 4 and node.channel_asks == [(2 * 4 * 4, None)]  # n blocks' bytes
    ring.all_gather(recv, send, 4)
    assert node.binds[1]["name"] == "cb_ring_all_gather" and node.binds[1]["count"] == 4 * 4
    ring.all_reduce(send, send, "avg", 8)
    assert node.binds[2]["name"] == "cb_ring_all_reduce_int32_sum" and node.binds[2]["count"] == 8
    assert node.messages == [("reduce_scatter", 4 * 4), ("all_gather", 4 * 4), ("all_reduce", 8 * 4)]  # to each peer
    monkeypatch.setattr(K, "MAX_BOUND", 3)
    ring.all_reduce(recv, recv, "sum", 4)  # a fourth call: the cache is emptied first
    assert len(ring.bound) == 1 and len(node.binds) == 4
