"""How a host kernel's wait backs off (cuda/collectives.cu Channel::wait, cuda/portable.h
cb_back_off): it yields the core, or, once it has lasted CbComm.nap_ns, naps (kernel_abi.nap_time:
hierarchical_kernel's node kernels beside gloo's transfers). A nap sleeps, so the waiting thread
gives up its core: Linux counts a voluntary context switch for each (a yield that hands the core on
counts an involuntary one), however loaded the machine is."""

import resource
import time

import numpy as np

from kernel_threads import Case, Node, needs_compiler

LATE_S = 0.2  # rank 1 calls this late: rank 0's wait lasts about as long


def late_peer_call(nap_s: float) -> int:
    """A 2-rank all-reduce whose rank 1 calls LATE_S late: exact, and the voluntary context switches
    of rank 0's thread during its call (it sleeps: a nap)."""
    node = Node(2, channels=1, timeout_s=20.0, nap_s=nap_s)
    case = Case(node, "ring_all_reduce", "float32", "sum", 1 << 12, 1, False, np.random.default_rng(3))

    def work(rank):
        if rank:
            time.sleep(LATE_S)
            return node.host_call(case.calls[rank]), 0
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
        code = node.host_call(case.calls[rank])
        return code, resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before

    (code0, sleeps), (code1, _) = node.threads(work)
    assert code0 == code1 == 0 and case.wrong() == []
    return sleeps


@needs_compiler
def test_a_wait_naps_once_it_has_lasted_nap_ns_and_yields_otherwise():
    """A 0.2 s wait: napping after 1 ms it sleeps hundreds of times (each nap 10 us asked, 80 us on
    the 2-core VM); never napping (0), or napping only after 10 s, it does not sleep."""
    napping, yielding, later = late_peer_call(1e-3), late_peer_call(0.0), late_peer_call(10.0)
    assert napping > 100 and yielding < 20 and later < 20, (napping, yielding, later)
