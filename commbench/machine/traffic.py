"""Inter-node traffic of one call: the analytical count from an algorithm's message pattern
(`Algorithm.messages`) and the measured count from link counters.

Measured bytes come from the byte counters of the interface named by COMMBENCH_LINK_IFACE
(the emulated cluster sets it to each node's uplink; on a real cluster point it at the NIC the
collectives use). They include the frame and TCP/IP headers and acknowledgements (about 1% at
MTU 9000) that the analytical count leaves out.
"""

from __future__ import annotations

import os
from collections import Counter

from commbench.collectives import COLLECTIVES, Counts

LINK_IFACE_ENV = "COMMBENCH_LINK_IFACE"


def block_elems(collective: str, counts: Counts) -> int:
    """The `elems` of Algorithm.messages (Collective.message_elems)."""
    return COLLECTIVES[collective].message_elems(counts)


def internode(sent: Counter, node_of_rank: list[int]) -> int:
    """Elements of `sent` whose source and destination are on different nodes."""
    return sum(v for (src, dst), v in sent.items() if node_of_rank[src] != node_of_rank[dst])


def expected_internode_bytes(algorithm, collective: str, counts: Counts, itemsize: int,
                             node_of_rank: list[int], segment_bytes: int) -> int:
    from commbench.collectives import COLLECTIVES

    shape = {"root": counts.root} if COLLECTIVES[collective].rooted else {}  # where the line or tree starts
    if counts.peers is not None:
        shape["peers"] = counts.peers  # the uneven all-to-all's blocks
    sent = algorithm.messages(collective, block_elems(collective, counts), node_of_rank,
                              max(1, segment_bytes // itemsize), **shape)
    return internode(sent, node_of_rank) * itemsize


def link_iface() -> str | None:
    return os.environ.get(LINK_IFACE_ENV) or None


def tx_bytes(iface: str) -> int:
    """Bytes this host (network namespace) has sent through iface so far."""
    with open(f"/sys/class/net/{iface}/statistics/tx_bytes") as f:
        return int(f.read())
