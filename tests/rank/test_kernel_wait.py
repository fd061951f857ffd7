"""How a host kernel's wait backs off (cuda/collectives.cu Channel::wait, cuda/portable.h
cb_back_off): it yields the core, or, once it has lasted CbComm.nap_ns, naps (kernel_abi.nap_time:
hierarchical_kernel's node kernels beside gloo's transfers). A napping wait still sees its data at
once and leaves the core to others meanwhile."""

import time

import numpy as np
import pytest

from commbench.rank.kernel_host import compiler
from kernel_threads import Case, Node

needs_compiler = pytest.mark.skipif(compiler() is None, reason="no C++ compiler for the host build")
LATE_S = 0.2  # rank 1 calls this late: rank 0's wait lasts about as long


def late_peer_call(nap_s: float) -> float:
    """A 2-rank all-reduce whose rank 1 calls LATE_S late: exact, and the CPU seconds rank 0's
    thread spent over the call's wall seconds."""
    node = Node(2, channels=1, timeout_s=20.0, nap_s=nap_s)
    case = Case(node, "ring_all_reduce", "float32", "sum", 1 << 12, 1, False, np.random.default_rng(3))

    def work(rank):
        if rank:
            time.sleep(LATE_S)
            return node.host_call(case.calls[rank]), 0.0
        cpu, wall = time.thread_time(), time.monotonic()
        code = node.host_call(case.calls[rank])
        return code, (time.thread_time() - cpu) / (time.monotonic() - wall)

    (code0, busy), (code1, _) = node.threads(work)
    assert code0 == code1 == 0 and case.wrong() == []
    return busy


@needs_compiler
def test_a_wait_naps_once_it_has_lasted_nap_ns_and_yields_otherwise():
    """Side by side: the yielding wait keeps its core (nothing else wants it); the napping one, after
    1 ms, leaves it most of the time (measured 27% busy on the 2-core VM)."""
    yielding, napping = late_peer_call(0.0), late_peer_call(1e-3)
    assert yielding > 0.7 and napping < 0.6 * yielding, (yielding, napping)
